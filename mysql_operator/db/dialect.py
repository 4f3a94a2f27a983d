"""Every statement that differs between MySQL 8.0/8.4 and MariaDB 10.11/11.x, as one interface
(`Dialect`; db/dialects.py has each flavor's). Its methods return SQL text (with pymysql `%s`
placeholders and an args tuple where values are involved - passwords are never formatted into the
text here). Callers never branch on the flavor themselves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mysql_operator.db.flavor import Flavor, ServerVersion


Statement = tuple[str, tuple[Any, ...]]


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

    # the session variable bounding one statement's run time, and its units per second
    statement_time_variable: tuple[str, int]

    def limit_statement_time(self, seconds: int) -> str:
        """SQL bounding each later statement of this session to `seconds` (the server stops it)."""
        name, per_second = self.statement_time_variable
        return f"SET SESSION {name} = {int(seconds) * per_second}"

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

    def semisync_state_sql(self, heartbeats: bool = True) -> str:
        """(name, value) rows: the semi-sync variables, their status counters, Uptime, and with
        `heartbeats` those received as a replica (`HEARTBEATS`); names as the server spells them
        (compare them lower-cased).

        Ask for the heartbeats only of a replica whose receiver runs: MySQL 9.7.4 aborted
        (std::bad_alloc in Gtid::to_string, building a performance_schema
        replication_connection_status row) when it was read just after the server restarted on
        a CLONE, before its replication was configured again (seen in CI; its receiver was not
        running, and a receiver that does not run receives no heartbeats anyway)."""
        schema = self.settings_schema
        return (
            f"SELECT VARIABLE_NAME, VARIABLE_VALUE FROM {schema}.global_variables WHERE {self.SETTINGS_WHERE} "
            f"UNION ALL SELECT VARIABLE_NAME, VARIABLE_VALUE FROM {schema}.global_status WHERE {self.COUNTERS_WHERE}"
            + (self.HEARTBEATS_SQL if heartbeats else "")
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
