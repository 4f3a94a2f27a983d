"""A recording fake of `db_ops.DbOps`: fake servers in one `World` that logs every operation
in order, as (server, operation), and keeps only what the engine's orders are about (read-only,
replication source, IO thread, semi-sync, GTIDs, binary logs, events). With `World.log_reads`,
an observation is logged too ((server, "observe")): a whole pass's reads and writes in one list.
The real statements behind each operation are tested against real servers in
tests/integration/test_replication.py."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from mysql_operator.binlogs import BinlogFile, PurgeTo
from mysql_operator.db.dialects import dialect_for
from mysql_operator.db.flavor import detect
from mysql_operator.db.observation import CloneStatus, Event, InstanceError, Observation, ReplicaStatus
from mysql_operator.members import Credentials

DIALECT = dialect_for(detect("10.11.9-MariaDB-log", "mariadb.org binary distribution"))
MYSQL_DIALECT = dialect_for(detect("9.7.4", "MySQL Community Server - GPL"))
WRITES = {"set_read_only(False)"}  # the one operation that makes a server accept writes


@dataclass
class World:
    """Every fake server and one log of what was done, in order, as (server, operation)."""

    log: list[tuple[str, str]] = field(default_factory=list)
    servers: dict[str, "FakeServer"] = field(default_factory=dict)
    fail: set[tuple[str, str]] = field(default_factory=set)  # (server, operation) that raise
    denied: set[tuple[str, str]] = field(default_factory=set)  # ... that raise "access denied"
    most_writable: int = 0  # the most servers writable at once, seen after every operation
    log_reads: bool = False  # an observation is logged too, as (server, "observe")
    # until when the certificate in the servers' files is valid (what a reload serves)
    tls_files: dt.datetime = dt.datetime(2999, 1, 1, tzinfo=dt.timezone.utc)

    def writable(self) -> list[str]:
        return sorted(n for n, s in self.servers.items() if not s.read_only)


@dataclass
class FakeServer:
    name: str
    world: World
    read_only: bool = True
    source: str | None = None
    io_running: bool = False
    semisync_source: bool = False
    semisync_replica: bool = False
    applies: bool = True  # wait_for succeeds (its relay log applies in time)
    connects: bool = True  # wait_connected succeeds (a started IO thread reaches its source in time)
    reachable: bool = True
    executed: str = ""  # its GTIDs (MariaDB notation)
    binlogs: list = field(default_factory=list)  # [BinlogFile], oldest first
    uptime: float = 100.0
    error: str = "injected: down"  # why it does not answer (when not reachable)
    dialect: object = DIALECT
    clone: CloneStatus | None = None  # MySQL: what clone_status says of the last copy onto it
    stuck_commits: int = 0  # sessions release_stuck_commits would end
    scheduled: dict[str, str] = field(default_factory=dict)  # its events: name (in app) -> status
    definers: dict[str, str] = field(default_factory=dict)  # event name -> definer (default app@%)
    set_any_definer: bool = False  # the operator's account may name another definer (granted by a person)
    tls_until: dt.datetime | None = dt.datetime(2999, 1, 1, tzinfo=dt.timezone.utc)  # what it serves
    server_id: int | None = None  # who it answers as (expected: its ordinal + 1, its Pod's name)
    hostname: str | None = None

    def _do(self, op: str) -> None:
        if not self.reachable or (self.name, op) in self.world.fail:
            raise InstanceError(f"{self.name}: {op} failed (injected)")
        if (self.name, op) in self.world.denied:
            raise InstanceError(f"{self.name}: {op}: access denied (injected)", errno=1227)
        self.world.log.append((self.name, op))

    def _after(self) -> None:
        self.world.most_writable = max(self.world.most_writable, len(self.world.writable()))

    # -- DbOps -----------------------------------------------------------------------------------
    def observe(self) -> Observation:
        if self.world.log_reads:
            self.world.log.append((self.name, "observe"))
        if not self.reachable:
            return Observation(reachable=False, error=self.error)
        replica = None
        if self.source:
            replica = ReplicaStatus(
                self.source,
                3306,
                "Yes" if self.io_running else "No",
                True,
                0,
                "",
                0,
                "",
                0,
                DIALECT.parse_gtids(""),
            )
        return Observation(
            reachable=True,
            version=DIALECT.version,
            read_only=self.read_only,
            executed=DIALECT.parse_gtids(self.executed),
            purged=DIALECT.parse_gtids(""),
            replica=replica,
            uptime=self.uptime,
            semisync_source_enabled=self.semisync_source,
            semisync_replica_enabled=self.semisync_replica,
            clone=self.clone,
            server_id=self.server_id,
            hostname=self.hostname,
        )

    def close(self) -> None:
        pass

    def tls_not_after(self) -> dt.datetime | None:
        self._do("tls_not_after")
        return self.tls_until

    def reload_tls(self) -> None:
        self._do("reload_tls")
        self.tls_until = self.world.tls_files

    def replica_status(self) -> ReplicaStatus | None:
        self._do("replica_status")
        return self.observe().replica

    def fence(self, keep_users=()) -> int:
        self._do("fence")
        self.read_only = True
        return 0

    def set_read_only(self, on: bool) -> None:
        self._do(f"set_read_only({on})")
        self.read_only = on
        self._after()

    def kill_client_connections(self, keep_users=()) -> list[int]:
        self._do("kill_client_connections")
        return []

    def stop_io_thread(self) -> None:
        self._do("stop_io_thread")
        self.io_running = False

    def stop_receiving(self) -> None:
        self.stop_io_thread()

    def start_sql_thread(self) -> None:
        self._do("start_sql_thread")

    def reset_replica(self) -> None:
        self._do("reset_replica")
        self.source, self.io_running = None, False

    def point_at(self, source_host, source_port, user, password, start=True, attempts=5, tls_ca=None) -> None:
        self._do(f"point_at({source_host})")
        self.source, self.io_running = source_host, start
        self.source_password = password

    def wait_for(self, gtids, timeout) -> bool:
        self._do("wait_for")
        return self.applies

    def wait_connected(self, timeout) -> bool:
        self._do("wait_connected")
        return self.io_running and self.connects

    def set_semisync_source(self, on: bool, ack_count: int = 1, timeout_ms: int = 0) -> None:
        self._do(f"set_semisync_source({on})")
        self.semisync_source = on
        self.semisync_timeout_ms = timeout_ms if on else None
        self.semisync_acks = ack_count if on else None

    def set_semisync_replica(self, on: bool, restart_io: bool = True) -> None:
        self._do(f"set_semisync_replica({on})")
        self.semisync_replica = on

    def ensure_database(self, name: str) -> None:
        self._do("ensure_database")

    def ensure_user(self, user, host, password, grants, local=False) -> list[str]:
        self._do(f"ensure_user({user})")
        return []

    def shed_privileges(self, grants, host="%") -> list[str]:
        self._do("shed_privileges")
        return []

    def set_password(self, user, host, password) -> None:
        self._do(f"set_password({user}@{host})")

    def errant_events(self, gtids, limit=2000) -> list[str]:
        self._do("errant_events")
        return [f"binlog.000001:4 Gtid SET @@SESSION.GTID_NEXT= '{gtids}'"]

    def ensure_clone_plugin(self) -> None:
        self._do("ensure_clone_plugin")

    def start_clone(self, host, port, user, password, tls_ca) -> None:
        self._do(f"start_clone({host})")

    def release_stuck_commits(self, keep_users=()) -> int:
        self._do("release_stuck_commits")
        return self.stuck_commits

    def events(self) -> list[Event]:
        self._do("events")
        return [
            Event("app", n, status, self.definers.get(n, "app@%")) for n, status in self.scheduled.items()
        ]

    def enable_event(self, event: Event, as_user: Credentials | None) -> None:
        login = None if as_user is None else f"{as_user.user}@{as_user.host}"
        self._do(f"enable_event({event} as {login or 'operator'})")
        if login is None and not self.set_any_definer:
            raise InstanceError(f"{self.name}: ALTER failed: you need the SET USER privilege", errno=1227)
        # as the server has it: a plain ALTER EVENT makes whoever runs it the definer
        self.definers[event.name] = login or event.definer
        self.scheduled[event.name] = "ENABLED"
        for other in self.world.servers.values():  # it replicates
            if other is not self and event.name in other.scheduled:
                other.scheduled[event.name] = "REPLICA_SIDE_DISABLED"

    def binary_logs(self) -> list[BinlogFile]:
        self._do("binary_logs")
        return list(self.binlogs)

    def purge_binary_logs(self, plan) -> list[str]:
        self._do(f"purge_binary_logs({plan})")
        keep = (
            [f.name for f in self.binlogs].index(plan.file)
            if isinstance(plan, PurgeTo)
            else len(self.binlogs) - 1
        )
        gone, self.binlogs = self.binlogs[:keep], self.binlogs[keep:]
        return [f.name for f in gone]
