"""Every statement that differs between MySQL 8.0/8.4 and MariaDB 10.11/11.x, in one place.

`detect(version, version_comment)` reads `SELECT VERSION(), @@version_comment`; `dialect_for(v)`
returns the matching `Dialect`, whose methods return SQL text (with pymysql `%s` placeholders and
an args tuple where values are involved - passwords are never formatted into the text here).
Callers never branch on the flavor themselves.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from mysql_operator.db.gtid import MariaDBGtids, MySQLGtidSet

Statement = tuple[str, tuple[Any, ...]]


class Flavor(str, enum.Enum):
    MYSQL = "mysql"
    MARIADB = "mariadb"


class UnsupportedServer(ValueError):
    pass


@dataclass(frozen=True, order=True)
class ServerVersion:
    flavor: Flavor
    major: int
    minor: int
    patch: int

    def at_least(self, major: int, minor: int, patch: int = 0) -> bool:
        return (self.major, self.minor, self.patch) >= (major, minor, patch)

    def __str__(self) -> str:
        return f"{self.flavor.value} {self.major}.{self.minor}.{self.patch}"


_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


def detect(version: str, version_comment: str = "") -> ServerVersion:
    """Flavor and version from `VERSION()` ('10.11.6-MariaDB-0+deb12u1-log', '8.4.3') and
    `@@version_comment` ('MySQL Community Server - GPL', 'mariadb.org binary distribution')."""
    m = _VERSION.match(version or "")
    if not m:
        raise UnsupportedServer(f"cannot read a version from VERSION()={version!r}")
    major, minor, patch = int(m[1]), int(m[2]), int(m[3])
    is_mariadb = "mariadb" in version.lower() or "mariadb" in (version_comment or "").lower()
    flavor = Flavor.MARIADB if is_mariadb else Flavor.MYSQL
    v = ServerVersion(flavor, major, minor, patch)
    if flavor is Flavor.MYSQL and not v.at_least(8, 0, 0):
        raise UnsupportedServer(f"{v} is not supported: MySQL 8.0 or newer is required")
    if flavor is Flavor.MARIADB and not v.at_least(10, 6, 0):
        raise UnsupportedServer(f"{v} is not supported: MariaDB 10.6 or newer is required")
    return v


@dataclass(frozen=True)
class ReplicaColumns:
    """Column names of SHOW REPLICA/SLAVE STATUS for one flavor."""

    io_running: str
    sql_running: str
    source_host: str
    source_port: str
    seconds_behind: str
    received: str  # Retrieved_Gtid_Set (MySQL) / Gtid_IO_Pos (MariaDB)
    io_errno: str = "Last_IO_Errno"
    io_error: str = "Last_IO_Error"
    sql_errno: str = "Last_SQL_Errno"
    sql_error: str = "Last_SQL_Error"
    ssl_allowed: str = "Master_SSL_Allowed"  # Yes: the IO thread connects over TLS
    ssl_verify: str = "Master_SSL_Verify_Server_Cert"  # Yes: and verifies the source's name


class Dialect:
    """SQL for one server flavor and version; see MySQLDialect and MariaDBDialect."""

    version: ServerVersion
    columns: ReplicaColumns
    read_only_variable: str
    semisync_source_enabled: str
    semisync_replica_enabled: str
    semisync_source_status: str
    semisync_replica_status: str
    semisync_source_clients: str  # status: replicas connected that acknowledge
    # the acknowledgements a semi-sync commit waits for; None: the flavor waits for one, always
    semisync_ack_count: str | None = None
    # errors a replica's IO/SQL thread reports when its history diverged from its source's
    divergence_errnos: frozenset[int] = frozenset()

    def __init__(self, version: ServerVersion):
        self.version = version

    @property
    def flavor(self) -> Flavor:
        return self.version.flavor

    # GTIDs
    def parse_gtids(self, text: str | None):
        raise NotImplementedError

    executed_gtids_variable: str  # the server's executed GTID set, as a global variable
    purged_gtids_variable: str | None = None  # None: the binary logs must be read
    server_uuid_variable: str | None = None  # the origin of its own GTIDs, where it has one

    def executed_gtids_sql(self) -> str:
        return f"SELECT @@GLOBAL.{self.executed_gtids_variable}"

    def purged_gtids_sql(self) -> str | None:
        """SQL whose single value is the purged GTID set, or None if the binlogs must be read."""
        return f"SELECT @@GLOBAL.{self.purged_gtids_variable}" if self.purged_gtids_variable else None

    def wait_for_gtids(self, gtids, timeout: float) -> Statement:
        raise NotImplementedError

    # observe(): a few statements, whatever the flavor, and no user table in any of them
    def server_state_sql(self, text_chars: int = 255, gtid_chars: int = 1024 * 1024 + 1) -> str:
        """One row: server_id, server_uuid (NULL where there is none), read-only, hostname,
        report_host, executed GTIDs, purged GTIDs (NULL where the binary logs must be read).
        The texts are cut by the server: names to `text_chars`, GTID sets to `gtid_chars` (ask
        for one more than you accept: a set that long was cut)."""

        def var(name: str | None, chars: int) -> str:
            return f"LEFT(@@GLOBAL.{name}, {int(chars)})" if name else "NULL"

        return (
            f"SELECT @@server_id, {var(self.server_uuid_variable, text_chars)}, @@{self.read_only_variable}, "
            f"LEFT(@@hostname, {int(text_chars)}), LEFT(@@report_host, {int(text_chars)}), "
            f"{var(self.executed_gtids_variable, gtid_chars)}, {var(self.purged_gtids_variable, gtid_chars)}"
        )

    # the global settings and counters semi-sync decisions read, as (name, value) rows
    SETTINGS_WHERE = (
        "VARIABLE_NAME LIKE 'rpl_semi_sync%enabled' OR VARIABLE_NAME LIKE 'rpl_semi_sync%wait_for%count'"
    )
    COUNTERS_WHERE = (
        "VARIABLE_NAME = 'Uptime' OR VARIABLE_NAME LIKE 'Rpl_semi_sync%status' "
        "OR VARIABLE_NAME LIKE 'Rpl_semi_sync%clients'"
    )
    settings_schema = "performance_schema"
    # one row, one column: the transaction the receiver has only part of in the relay log ("" when
    # none); None where the server does not say (MariaDB)
    QUEUEING_SQL: str | None = (
        "SELECT QUEUEING_TRANSACTION FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = ''"
    )
    # the row (its name lower-cased) counting the heartbeats a replica received from its source
    HEARTBEATS = "count_received_heartbeats"
    HEARTBEATS_SQL = (
        " UNION ALL SELECT 'count_received_heartbeats', COUNT_RECEIVED_HEARTBEATS "
        "FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = ''"
    )

    def semisync_state_sql(self) -> str:
        """(name, value) rows: the semi-sync variables, their status counters, Uptime, and the
        heartbeats received as a replica (`HEARTBEATS`); names as the server spells them
        (compare them lower-cased)."""
        schema = self.settings_schema
        return (
            f"SELECT VARIABLE_NAME, VARIABLE_VALUE FROM {schema}.global_variables WHERE {self.SETTINGS_WHERE} "
            f"UNION ALL SELECT VARIABLE_NAME, VARIABLE_VALUE FROM {schema}.global_status WHERE {self.COUNTERS_WHERE}"
            + self.HEARTBEATS_SQL
        )

    def wait_succeeded(self, result: Any) -> bool:
        raise NotImplementedError

    # replication
    def show_replica_status(self) -> str:
        raise NotImplementedError

    def start_replica(self) -> str:
        raise NotImplementedError

    def stop_replica(self) -> str:
        raise NotImplementedError

    def start_io_thread(self) -> str:
        return self.start_replica() + " IO_THREAD"

    def stop_io_thread(self) -> str:
        return self.stop_replica() + " IO_THREAD"

    def reset_replica_all(self) -> str:
        raise NotImplementedError

    def change_source(
        self,
        host: str,
        port: int,
        user: str,
        password: str,
        connect_retry: int = 1,
        heartbeat: float = 1.0,
        tls_ca: str | None = None,
    ) -> Statement:
        """Point a replica at `host`; with `tls_ca` (a CA file on the REPLICA's file system) over
        TLS, verifying the source's certificate against it and `host` against its names."""
        raise NotImplementedError

    # TLS
    def reload_tls(self) -> str:
        """Make the server read its certificate, key and CA files again (new connections only)."""
        raise NotImplementedError

    def tls_not_after_sql(self) -> str:
        """One row (name, value): when the certificate the server presents stops being valid
        ('Nov 23 20:00:00 2026 GMT'), '' without TLS. MySQL's global value is the server's
        current certificate; MariaDB's (10.11) is the one THIS connection's TLS session got, ''
        over plaintext: read it on a new connection."""
        return "SHOW GLOBAL STATUS LIKE 'Ssl_server_not_after'"

    def prepare_replica_position(self) -> list[str]:
        """Statements to run (replica stopped) before pointing a server at a new source."""
        return []

    # read-only
    def set_read_only(self, on: bool) -> list[str]:
        raise NotImplementedError

    def offline_mode(self, on: bool) -> list[str]:
        """Refuse (on) or accept again (off) connections of accounts without CONNECTION_ADMIN,
        disconnecting those open; empty where the server has no such mode (MariaDB)."""
        return []

    # semi-sync
    def semisync_plugins(self) -> list[tuple[str, str]]:
        """(plugin name, library) pairs to INSTALL PLUGIN if missing; empty when built in."""
        return []

    def enable_semisync_source(self, ack_count: int, timeout_ms: int) -> list[Statement]:
        raise NotImplementedError

    def disable_semisync_source(self) -> list[Statement]:
        return [(f"SET GLOBAL {self.semisync_source_enabled} = OFF", ())]

    def enable_semisync_replica(self) -> list[Statement]:
        return [(f"SET GLOBAL {self.semisync_replica_enabled} = ON", ())]

    def disable_semisync_replica(self) -> list[Statement]:
        return [(f"SET GLOBAL {self.semisync_replica_enabled} = OFF", ())]

    @property
    def supports_ack_count(self) -> bool:
        return False


class MySQLDialect(Dialect):
    divergence_errnos = frozenset({1236, 13114})  # source purged/lacks GTIDs the replica has
    read_only_variable = "super_read_only"
    executed_gtids_variable = "gtid_executed"
    purged_gtids_variable = "gtid_purged"
    server_uuid_variable = "server_uuid"

    def __init__(self, version: ServerVersion):
        super().__init__(version)
        self.new_syntax = version.at_least(8, 0, 23)  # CHANGE REPLICATION SOURCE, *_REPLICA
        self.new_semisync = version.at_least(8, 0, 26)  # rpl_semi_sync_source / _replica
        if version.at_least(8, 0, 22):
            self.columns = ReplicaColumns(
                io_running="Replica_IO_Running",
                sql_running="Replica_SQL_Running",
                source_host="Source_Host",
                source_port="Source_Port",
                seconds_behind="Seconds_Behind_Source",
                received="Retrieved_Gtid_Set",
                ssl_allowed="Source_SSL_Allowed",
                ssl_verify="Source_SSL_Verify_Server_Cert",
            )
        else:
            self.columns = ReplicaColumns(
                io_running="Slave_IO_Running",
                sql_running="Slave_SQL_Running",
                source_host="Master_Host",
                source_port="Master_Port",
                seconds_behind="Seconds_Behind_Master",
                received="Retrieved_Gtid_Set",
            )
        s = "source" if self.new_semisync else "master"
        r = "replica" if self.new_semisync else "slave"
        self.semisync_source_enabled = f"rpl_semi_sync_{s}_enabled"
        self.semisync_replica_enabled = f"rpl_semi_sync_{r}_enabled"
        self.semisync_source_status = f"Rpl_semi_sync_{s}_status"
        self.semisync_replica_status = f"Rpl_semi_sync_{r}_status"
        self.semisync_source_clients = f"Rpl_semi_sync_{s}_clients"
        self.semisync_ack_count = f"rpl_semi_sync_{s}_wait_for_{r}_count"
        self._semisync_prefix = s

    def parse_gtids(self, text):
        return MySQLGtidSet.parse(text)

    def wait_for_gtids(self, gtids, timeout: float) -> Statement:
        return "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)", (str(gtids), max(1, int(timeout)))

    def wait_succeeded(self, result) -> bool:
        return result is not None and int(result) == 0

    def show_replica_status(self) -> str:
        return "SHOW REPLICA STATUS" if self.version.at_least(8, 0, 22) else "SHOW SLAVE STATUS"

    def start_replica(self) -> str:
        return "START REPLICA" if self.version.at_least(8, 0, 22) else "START SLAVE"

    def stop_replica(self) -> str:
        return "STOP REPLICA" if self.version.at_least(8, 0, 22) else "STOP SLAVE"

    def reset_replica_all(self) -> str:
        return "RESET REPLICA ALL" if self.version.at_least(8, 0, 22) else "RESET SLAVE ALL"

    def change_source(self, host, port, user, password, connect_retry=1, heartbeat=1.0, tls_ca=None):
        p = "SOURCE" if self.new_syntax else "MASTER"
        head = "CHANGE REPLICATION SOURCE TO" if self.new_syntax else "CHANGE MASTER TO"
        sql = (
            f"{head} {p}_HOST=%s, {p}_PORT=%s, {p}_USER=%s, {p}_PASSWORD=%s, "
            f"{p}_AUTO_POSITION=1, {p}_CONNECT_RETRY=%s, {p}_HEARTBEAT_PERIOD=%s, "
            # caching_sha2_password without TLS needs the source's RSA key
            f"GET_{p}_PUBLIC_KEY=1"
        )
        args = (host, int(port), user, password, int(connect_retry), float(heartbeat))
        if tls_ca is not None:
            sql += f", {p}_SSL=1, {p}_SSL_CA=%s, {p}_SSL_VERIFY_SERVER_CERT=1"
            args += (tls_ca,)
        return sql, args

    def reload_tls(self) -> str:
        return "ALTER INSTANCE RELOAD TLS"  # CONNECTION_ADMIN; a failed reload keeps the old files

    def set_read_only(self, on: bool) -> list[str]:
        if on:
            return ["SET GLOBAL super_read_only = ON"]  # implies read_only
        return ["SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"]

    def offline_mode(self, on: bool) -> list[str]:
        return [f"SET GLOBAL offline_mode = {'ON' if on else 'OFF'}"]  # SYSTEM_VARIABLES_ADMIN

    def semisync_plugins(self) -> list[tuple[str, str]]:
        if self.new_semisync:
            return [
                ("rpl_semi_sync_source", "semisync_source.so"),
                ("rpl_semi_sync_replica", "semisync_replica.so"),
            ]
        return [("rpl_semi_sync_master", "semisync_master.so"), ("rpl_semi_sync_slave", "semisync_slave.so")]

    @property
    def supports_ack_count(self) -> bool:
        return True

    def enable_semisync_source(self, ack_count: int, timeout_ms: int) -> list[Statement]:
        s = self._semisync_prefix
        return [
            (f"SET GLOBAL rpl_semi_sync_{s}_wait_point = 'AFTER_SYNC'", ()),
            (f"SET GLOBAL {self.semisync_ack_count} = %s", (max(1, int(ack_count)),)),
            (f"SET GLOBAL rpl_semi_sync_{s}_timeout = %s", (int(timeout_ms),)),
            (f"SET GLOBAL {self.semisync_source_enabled} = ON", ()),
        ]


class MariaDBDialect(Dialect):
    # 1236: the source lacks GTIDs the replica has; 1950/1951: gtid_strict_mode out-of-order GTID
    divergence_errnos = frozenset({1236, 1950, 1951})
    read_only_variable = "read_only"  # no super_read_only; READ_ONLY ADMIN bypasses it
    semisync_source_enabled = "rpl_semi_sync_master_enabled"
    semisync_replica_enabled = "rpl_semi_sync_slave_enabled"
    semisync_source_status = "Rpl_semi_sync_master_status"
    semisync_replica_status = "Rpl_semi_sync_slave_status"
    semisync_source_clients = "Rpl_semi_sync_master_clients"
    columns = ReplicaColumns(
        io_running="Slave_IO_Running",
        sql_running="Slave_SQL_Running",
        source_host="Master_Host",
        source_port="Master_Port",
        seconds_behind="Seconds_Behind_Master",
        received="Gtid_IO_Pos",
    )

    def parse_gtids(self, text):
        return MariaDBGtids.parse(text)

    # the last GTID per (domain, server_id) ever binlogged; needs log_slave_updates=ON
    executed_gtids_variable = "gtid_binlog_state"
    # no purged set: the Gtid_list event at the start of the oldest binlog file says
    settings_schema = "information_schema"
    QUEUEING_SQL = None  # MariaDB does not say what its receiver has only part of
    HEARTBEATS = "slave_received_heartbeats"  # a status counter of the default connection
    COUNTERS_WHERE = Dialect.COUNTERS_WHERE + " OR VARIABLE_NAME = 'Slave_received_heartbeats'"
    HEARTBEATS_SQL = ""

    def wait_for_gtids(self, gtids, timeout: float) -> Statement:
        pos = gtids.position() if isinstance(gtids, MariaDBGtids) else str(gtids)
        return "SELECT MASTER_GTID_WAIT(%s, %s)", (pos, float(timeout))

    def wait_succeeded(self, result) -> bool:
        return result is not None and int(result) == 0

    def show_replica_status(self) -> str:
        return "SHOW SLAVE STATUS"

    def start_replica(self) -> str:
        return "START SLAVE"

    def stop_replica(self) -> str:
        return "STOP SLAVE"

    def reset_replica_all(self) -> str:
        return "RESET SLAVE ALL"

    def change_source(self, host, port, user, password, connect_retry=1, heartbeat=1.0, tls_ca=None):
        sql = (
            "CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%s, MASTER_USER=%s, MASTER_PASSWORD=%s, "
            "MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=%s, MASTER_HEARTBEAT_PERIOD=%s"
        )
        args = (host, int(port), user, password, int(connect_retry), float(heartbeat))
        if tls_ca is not None:
            sql += ", MASTER_SSL=1, MASTER_SSL_CA=%s, MASTER_SSL_VERIFY_SERVER_CERT=1"
            args += (tls_ca,)
        elif self.version.at_least(11, 3, 0):
            # 11.4 replicas verify the source's certificate by default; we replicate without TLS
            sql += ", MASTER_SSL=0, MASTER_SSL_VERIFY_SERVER_CERT=0"
        return sql, args

    def reload_tls(self) -> str:
        # RELOAD (10.4+); new connections get the new certificate. A plain FLUSH SSL is written
        # to the binary log: on a replica an errant GTID that stops it (1950) at the next event
        return "FLUSH NO_WRITE_TO_BINLOG SSL"

    def prepare_replica_position(self) -> list[str]:
        # a former primary's gtid_slave_pos is stale: start from what it has in its binlog
        # (callers check for errant transactions first)
        return ["SET GLOBAL gtid_slave_pos = @@GLOBAL.gtid_binlog_pos"]

    def set_read_only(self, on: bool) -> list[str]:
        return [f"SET GLOBAL read_only = {'ON' if on else 'OFF'}"]

    def enable_semisync_source(self, ack_count: int, timeout_ms: int) -> list[Statement]:
        # MariaDB 10.11/11.x wait for exactly one acknowledgement: ack_count is not settable
        return [
            ("SET GLOBAL rpl_semi_sync_master_wait_point = 'AFTER_SYNC'", ()),
            ("SET GLOBAL rpl_semi_sync_master_timeout = %s", (int(timeout_ms),)),
            ("SET GLOBAL rpl_semi_sync_master_enabled = ON", ()),
        ]


def dialect_for(version: ServerVersion) -> Dialect:
    if version.flavor is Flavor.MARIADB:
        return MariaDBDialect(version)
    return MySQLDialect(version)
