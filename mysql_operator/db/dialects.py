"""Each flavor's statements: `MySQLDialect`, `MariaDBDialect`, and `dialect_for(version)` (the one
a detected server version needs)."""

from __future__ import annotations


from mysql_operator.db.gtid import MariaDBGtids, MySQLGtidSet
from mysql_operator.db.dialect import Dialect, ReplicaColumns, Statement
from mysql_operator.db.flavor import Flavor, ServerVersion


class MySQLDialect(Dialect):
    divergence_errnos = frozenset({1236, 13114})  # source purged/lacks GTIDs the replica has
    read_only_variable = "super_read_only"
    statement_time_variable = ("max_execution_time", 1000)  # milliseconds; read-only SELECTs only
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
    statement_time_variable = ("max_statement_time", 1)  # seconds
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
