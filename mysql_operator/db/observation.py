"""What the operator reads from one server, as plain values: its observation, replica status,
scheduled events and clone stage, the error an operation on it raises (InstanceError, never with
a password), the error numbers it reacts to, and the pure readings of a server's answers (who
answered, which connections to end, a certificate's expiry)."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any, Iterable, Protocol


from mysql_operator.db.flavor import ServerVersion
from mysql_operator.topology import CLONE_COPIED, CLONE_COPYING, CLONE_FAILED

LOST_CONNECTION = 2013  # CR_SERVER_LOST: also a read that timed out
# client errors worth a retry: can't connect, lost connection, gone away, too many connections
TRANSIENT_ERRNOS = frozenset({1040, 2003, 2006, LOST_CONNECTION})
ER_REPLICA_NOT_CONFIGURED = 1200  # START on a replica with no source: "MASTER_HOST was not set"
# STOP REPLICA past rpl_stop_replica_timeout: "SQL thread got the stop signal, thread is busy, SQL
# thread will stop once the current task is complete" (MySQL; MariaDB has no such timeout)
ER_STOP_REPLICA_SQL_THREAD_TIMEOUT = 1875
ER_NONEXISTING_GRANT = 1141  # SHOW GRANTS FOR an account that does not exist
ACCESS_DENIED = frozenset({1044, 1045, 1142, 1227})  # database, user, table, privilege
SPECIFIC_ACCESS_DENIED = 1227  # ER_SPECIFIC_ACCESS_DENIED_ERROR: a privilege such as SET USER missing
TEXT_CHARS = 200  # of VERSION() and @@version_comment read (truncated by the server)
GTID_TEXT_CHARS = 1024 * 1024  # of a GTID set read; a longer one is refused, never read in part


class InstanceError(Exception):
    """A failed operation on one instance. `errno` is the server/client error number if any."""

    def __init__(self, message: str, errno: int | None = None):
        super().__init__(message)
        self.errno = errno


@dataclass(frozen=True)
class ReplicaStatus:
    source_host: str
    source_port: int
    io_state: str  # Yes / No / Connecting / Preparing
    sql_running: bool
    io_errno: int
    io_error: str
    sql_errno: int
    sql_error: str
    seconds_behind: int | None
    received: Any  # GtidSet
    ssl_allowed: bool = False  # the IO thread connects over TLS (MASTER_SSL=1)
    ssl_verify: bool = False  # and checks the source's certificate and host name

    @property
    def tls_verified(self) -> bool:
        return self.ssl_allowed and self.ssl_verify

    @property
    def io_running(self) -> bool:
        return self.io_state == "Yes"


@dataclass(frozen=True)
class Observation:
    """What one instance said, or that it did not answer. Plain data; no secrets."""

    reachable: bool
    error: str | None = None
    version: ServerVersion | None = None
    server_id: int | None = None
    server_uuid: str | None = None
    hostname: str | None = None  # @@hostname: the Pod's name in Kubernetes
    report_host: str | None = None  # @@report_host: the Pod's name or DNS name (start.sh)
    read_only: bool = True
    executed: Any = None  # GtidSet
    purged: Any = None  # GtidSet no longer in the binary logs
    replica: ReplicaStatus | None = None
    semisync_source_enabled: bool = False
    semisync_source_active: bool = False  # the status variable: OFF after a silent fallback
    semisync_replica_enabled: bool = False
    semisync_replica_active: bool = False
    semisync_ack_count: int | None = None  # what a semi-sync commit waits for (MySQL; None: one)
    semisync_clients: int | None = None  # replicas connected that acknowledge (None: not known)
    heartbeats: int | None = None  # heartbeats received from its source so far (None: not known)
    uptime: float | None = None  # seconds since the server started (status Uptime)
    clone: "CloneStatus | None" = None  # the last physical copy onto it (MySQL CLONE), if any

    @property
    def origin(self) -> str | None:
        """The id GTIDs written here carry: server_uuid (MySQL) or server_id (MariaDB)."""
        if self.version is None:
            return None
        if self.version.flavor.value == "mysql":
            return self.server_uuid
        return None if self.server_id is None else str(self.server_id)


# Not on the operator's list (it would make the operator's account root's equal) but never shed
# when a person granted it alone: it lets the operator enable events of other definers on a new
# primary (duties.Events; MySQL's SET_ANY_DEFINER is never shed: MariaDB only)
KEPT_IF_GRANTED = frozenset({"SET USER"})

# what a server makes of every event it receives by replication, ENABLED or DISABLED on its source
# alike: its scheduler skips it (MariaDB and MySQL before 8.0.22: SLAVESIDE_DISABLED)
REPLICA_SIDE_DISABLED = frozenset({"SLAVESIDE_DISABLED", "REPLICA_SIDE_DISABLED"})


class Login(Protocol):
    """An account's user name and password (replication.Credentials is one)."""

    @property
    def user(self) -> str: ...
    @property
    def password(self) -> str: ...


@dataclass(frozen=True)
class Event:
    """A scheduled event (information_schema.EVENTS); its names are a user's: quote them."""

    schema: str
    name: str
    status: str  # ENABLED, DISABLED, or one of REPLICA_SIDE_DISABLED
    definer: str  # user@host

    @property
    def key(self) -> tuple[str, str]:
        return (self.schema, self.name)

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}"


ER_CLONE_RESTART = 3707  # "Restart server failed (mysqld is not managed by supervisor process)"
# A copy's CLONE session ends with these when the server restarts itself on the copy (under a
# supervisor: start.sh) - or dies; clone_status tells which once it answers again
CLONE_SESSION_ENDS = frozenset({ER_CLONE_RESTART, 2006, 2013})


@dataclass(frozen=True)
class CloneStatus:
    """performance_schema.clone_status/clone_progress of the server a copy went to, as a stage:
    CLONE_COPYING, CLONE_COPIED (copied, the server must restart on it), CLONE_FAILED, or None
    (none, or done: the server restarted on the copy)."""

    stage: str | None
    error: str = ""
    copied: int = 0  # bytes
    total: int = 0


def clone_stage(state: str, error_no: int, ended: float | None, booted: float | None) -> str | None:
    """Pure: the stage of a clone from clone_status (STATE, ERROR_NO, END_TIME as a Unix time)
    and when the server started (Unix time). A copy that ended with ER_CLONE_RESTART is complete
    but waits for a restart - unless the server started after it ended."""
    if state == "In Progress":
        return CLONE_COPYING
    if error_no == ER_CLONE_RESTART:
        restarted = ended is not None and booted is not None and booted > ended
        return None if restarted else CLONE_COPIED
    if state == "Failed":
        return CLONE_FAILED
    return None


def identity_mismatch(observed: Observation, server_id: int | None, hostname: str | None) -> str | None:
    """Why the server that answered is not the instance expected at that address, or None.

    `server_id` is derived from the ordinal; `hostname` is the Pod name, matched against
    @@hostname or the first label of @@report_host. None skips that check."""
    if not observed.reachable:
        return None
    if server_id is not None and observed.server_id != server_id:
        return f"answers as server_id {observed.server_id}, expected {server_id}"
    if hostname is not None:
        names = {observed.hostname, (observed.report_host or "").split(".")[0]}
        if hostname not in names:
            return (
                f"answers as host {observed.hostname or '?'} (report_host "
                f"{observed.report_host or '?'}), expected {hostname}"
            )
    return None


# threads never to kill: replication, internal ones
_PROTECTED_USERS = frozenset({"system user", "event_scheduler", "mariadb.sys"})
_PROTECTED_COMMANDS = frozenset(
    {"Binlog Dump", "Binlog Dump GTID", "Daemon", "Slave_IO", "Slave_SQL", "Slave_worker", "Killed"}
)


def connections_to_kill(rows: Iterable[dict[str, Any]], own_id: int, keep_users: Iterable[str]) -> list[int]:
    """Client connection ids from PROCESSLIST rows (ID, USER, COMMAND) that a fence must kill:
    not our own, not replication or internal threads, not the operator's accounts."""
    keep = set(keep_users)
    out = []
    for r in rows:
        if int(r["ID"]) == own_id:
            continue
        if r["USER"] in _PROTECTED_USERS or r["USER"] in keep:
            continue
        if r["COMMAND"] in _PROTECTED_COMMANDS:
            continue
        out.append(int(r["ID"]))
    return sorted(out)


_MONTHS = {
    m: n
    for n, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
_TLS_TIME = re.compile(r"^([A-Z][a-z]{2}) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4}) GMT$")


def parse_tls_time(text: str | None) -> dt.datetime | None:
    """'Nov 23 20:00:00 2026 GMT' (OpenSSL's format, as in Ssl_server_not_after) as UTC; None
    for '' (no TLS). Independent of the locale."""
    m = _TLS_TIME.match((text or "").strip())
    if not m or m[1] not in _MONTHS:
        if (text or "").strip():
            raise InstanceError(f"cannot read a certificate date from {text!r}")
        return None
    return dt.datetime(
        int(m[6]), _MONTHS[m[1]], int(m[2]), int(m[3]), int(m[4]), int(m[5]), tzinfo=dt.timezone.utc
    )
