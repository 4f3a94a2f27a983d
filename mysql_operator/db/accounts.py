"""The SQL accounts the operator manages and exactly what each may do, per flavor: the one place
where privileges are listed.

| account | host | what for |
| --- | --- | --- |
| `mysql-operator` | % | the replication engine: observe, fence, promote, repoint; manages the others |
| `replication` | % | replicas' IO threads reading the primary's binary log |
| `mysql-operator-backup` | % | backups: logical (`mariadb-dump`/`mysqldump`) and physical (MySQL CLONE, BACKUP_ADMIN): read only |
| the application user | % | the tenant: everything on its database, nothing else |
| `mysql-operator-restore` | % | the restore Job's own statements in a new cluster (spec.restore); created by the init step only then |
| `mysql-operator-load` | % | what a tenant's dump and binary logs run as during a restore: its databases only; made and dropped by the restore Job |
| `mysql-operator-sql` | % | MySQLDatabase, MySQLUser, MySQLGrant: creates databases and accounts, grants on databases |
| `mysql-operator-monitor` | localhost | the metrics sidecar (mysqld_exporter) over the server's socket: reads status |

Who uses the lists: `manifests.servers` renders them with `grant_lines` into the init container's
environment (INIT_SH turns each line into a GRANT), the replication engine converges accounts to
them on the primary (`Instance.ensure_user`, `Instance.shed_privileges`), the tests compare
`SHOW GRANTS` with them (`parse_show_grants`, `expected`).

Every privilege below was checked against real servers (MariaDB 10.11.19 and 11.8.9, MySQL 9.7.4):
the operator's whole sequence of statements (observe, fence, kill, failover, semi-sync, users)
and the backup's dump fail without any single one of them, and with exactly them the dump is
identical to one taken with ALL PRIVILEGES. MariaDB names are those SHOW GRANTS prints from
10.5.9 to 11.8 (REPLICATION CLIENT is shown as BINLOG MONITOR, REPLICA MONITOR as SLAVE
MONITOR); SUPER is never granted, so the 10.11/11.0 split of SUPER changes nothing here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from mysql_operator.api.sql import DATABASE_PRIVILEGES
from mysql_operator.db.flavor import Flavor, ServerVersion

_IDENT = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_PRIVILEGE = re.compile(r"^[A-Z][A-Z_ ]*[A-Z]$")


@dataclass(frozen=True)
class Grant:
    """One GRANT: privileges on one target ("*.*", "db.*" or "db.table"; identifiers unquoted)."""

    privileges: tuple[str, ...]
    target: str = "*.*"
    grant_option: bool = False

    def __post_init__(self):
        for p in self.privileges:
            if not _PRIVILEGE.match(p):
                raise ValueError(f"privilege {p!r} is invalid")
        db, dot, table = self.target.partition(".")
        named = _IDENT.match(db) and (table == "*" or _IDENT.match(table))
        if not dot or (db, table) != ("*", "*") and not named:
            raise ValueError(f"grant target {self.target!r} is invalid: use *.*, db.* or db.table")

    @property
    def sql_target(self) -> str:
        """The target as GRANT reads it. A database's '_' is a wildcard in a database-level
        grant: escaped, `app_db`.* is that one database, not also `appXdb` (a table-level grant
        names its database literally; names never hold '%', see _IDENT)."""
        db, _, table = self.target.partition(".")
        if db == "*":
            return "*.*"
        if table == "*":
            return database_level(db)
        return f"`{db}`.`{table}`"

    def clause(self) -> str:
        """`<privileges> ON <target>`: what goes between GRANT and TO."""
        return f"{', '.join(self.privileges)} ON {self.sql_target}"

    def grant_sql(self) -> str:
        """The GRANT, with pymysql placeholders for user and host."""
        return f"GRANT {self.clause()} TO %s@%s" + (" WITH GRANT OPTION" if self.grant_option else "")

    def revoke_sql(self) -> str:
        return f"REVOKE {self.clause()} FROM %s@%s"


# (privilege, why) for the operator's account, WITH GRANT OPTION on *.* (GRANT OPTION belongs to
# a level, not to a privilege: it is needed to give the replication and backup accounts theirs,
# and with it the operator can grant any privilege it holds - never more).
_OPERATOR_MARIADB = (
    ("SELECT", "granted to the backup account; SHOW GRANTS FOR other accounts reads mysql.*"),
    (
        "RELOAD",
        "RESET SLAVE ALL (promote, decommission); FLUSH SSL (a renewed certificate); granted to the binlog archiver",
    ),
    (
        "PROCESS",
        "every account's threads in information_schema.PROCESSLIST: without it a fence "
        "silently kills nothing",
    ),
    ("REPLICATION SLAVE", "granted to the replication account"),
    ("BINLOG MONITOR", "SHOW BINARY LOGS and SHOW BINLOG EVENTS (purged GTIDs); alias REPLICATION CLIENT"),
    ("BINLOG ADMIN", "PURGE BINARY LOGS (spec.replication.binlogRetention)"),
    ("SHOW VIEW", "granted to the backup account"),
    (
        "CREATE USER",
        "CREATE/ALTER USER and REVOKE for the replication, application and backup "
        "accounts; DROP USER of the restore account",
    ),
    ("EVENT", "granted to the backup account"),
    ("TRIGGER", "granted to the backup account"),
    (
        "CONNECTION ADMIN",
        "KILL CONNECTION of other accounts' threads (fence, switchover; a re-seed's donor: "
        "commits waiting for an acknowledgement only the copy can give)",
    ),
    (
        "READ_ONLY ADMIN",
        "SET GLOBAL read_only (not part of SUPER from 10.11 on); writes on a "
        "read-only server while promoting",
    ),
    (
        "REPLICATION SLAVE ADMIN",
        "CHANGE MASTER, START/STOP/RESET SLAVE, SET GLOBAL gtid_slave_pos and rpl_semi_sync_slave_*",
    ),
    ("REPLICATION MASTER ADMIN", "SET GLOBAL rpl_semi_sync_master_*"),
    ("SLAVE MONITOR", "SHOW SLAVE STATUS; alias REPLICA MONITOR"),
)
_OPERATOR_MYSQL = (
    ("SELECT", "granted to the backup account; SHOW GRANTS FOR other accounts reads mysql.*"),
    ("RELOAD", "RESET REPLICA ALL (promote, decommission); granted to the binlog archiver"),
    (
        "PROCESS",
        "every account's threads in information_schema.PROCESSLIST: without it a fence "
        "silently kills nothing",
    ),
    ("REPLICATION SLAVE", "granted to the replication account"),
    ("REPLICATION CLIENT", "SHOW REPLICA STATUS; granted to the backup account"),
    ("SHOW VIEW", "granted to the backup account"),
    (
        "CREATE USER",
        "CREATE/ALTER USER and REVOKE for the replication, application and backup "
        "accounts; DROP USER of the restore account",
    ),
    ("EVENT", "granted to the backup account"),
    ("TRIGGER", "granted to the backup account"),
    (
        "CONNECTION_ADMIN",
        "KILL CONNECTION of other accounts' threads (fence, switchover); "
        "ALTER INSTANCE RELOAD TLS (a renewed certificate)",
    ),
    ("REPLICATION_SLAVE_ADMIN", "CHANGE REPLICATION SOURCE, START/STOP/RESET REPLICA"),
    ("SYSTEM_VARIABLES_ADMIN", "SET GLOBAL super_read_only/read_only and rpl_semi_sync_*"),
    ("BINLOG_ADMIN", "PURGE BINARY LOGS (spec.replication.binlogRetention)"),
    ("BACKUP_ADMIN", "a re-seed's donor: the recipient's CLONE INSTANCE copies as this account"),
    ("CLONE_ADMIN", "a re-seed's recipient: CLONE INSTANCE (the server then restarts on the copy)"),
    (
        "SYSTEM_USER",
        "ALTER USER of root (password rotation) and KILL of root's threads (a fence): only an "
        "account holding SYSTEM_USER may change or kill one that does; it also keeps accounts "
        "with CREATE USER alone from altering or dropping the operator's",
    ),
)
# MySQL also needs INSERT on mysql.plugin for INSTALL PLUGIN (semi-sync turned on while the
# server was started without the plugins); FLUSH_TABLES (8.0.23+) only to grant it to backups.

# The backup account: reads everything, writes nothing. TRIGGER and EVENT are the only ways to
# read triggers and events (mariadb-dump silently leaves triggers out without TRIGGER); they
# also let the account create or drop triggers and events - neither flavor has a read-only form.
_BACKUP_MARIADB = (
    "SELECT",
    "SHOW VIEW",
    "EVENT",
    "TRIGGER",
    "BINLOG MONITOR",  # SHOW MASTER STATUS in the dump; SHOW BINARY LOGS when picking a source
    "SLAVE MONITOR",
)  # SHOW SLAVE STATUS when picking a healthy replica
_BACKUP_MYSQL = (
    "SELECT",
    "SHOW VIEW",
    "EVENT",
    "TRIGGER",
    "REPLICATION CLIENT",  # SHOW BINARY LOG STATUS / SHOW REPLICA STATUS
    "BACKUP_ADMIN",  # a physical backup's CLONE copies as this account (backup/physical.py)
)


def flavor_of(v: ServerVersion | Flavor | str) -> Flavor:
    return v.flavor if isinstance(v, ServerVersion) else Flavor(v)


def _mysql_flush_tables(v: ServerVersion | Flavor | str) -> str:
    """What mysqldump (8.0.32+: FLUSH TABLES + FTWRL for a consistent GTID set) needs: the
    narrower FLUSH_TABLES from 8.0.23, RELOAD before (or when the version is not known)."""
    return "FLUSH_TABLES" if isinstance(v, ServerVersion) and v.at_least(8, 0, 23) else "RELOAD"


def operator_privileges(v: ServerVersion | Flavor | str) -> tuple[tuple[str, str], ...]:
    """(privilege, why) pairs of the operator's account on *.*, documented."""
    if flavor_of(v) is Flavor.MARIADB:
        return _OPERATOR_MARIADB
    extra = _mysql_flush_tables(v)
    if extra == "RELOAD":
        return _OPERATOR_MYSQL
    return _OPERATOR_MYSQL + ((extra, "granted to the backup account"),)


# The SQL-objects account (MySQLDatabase, MySQLUser, MySQLGrant; mysql_operator/sql_objects.py):
# both servers let an account grant only privileges it holds WITH GRANT OPTION, so it holds every
# privilege a MySQLGrant may list (api/sql.py DATABASE_PRIVILEGES) on *.*, with CREATE/ALTER/DROP
# of databases and CREATE USER. That is write access to mysql.* too: it is an account of its own,
# used only for these objects, so the replication engine's account stays without it.
_SQL_COMMON = tuple(p for p in DATABASE_PRIVILEGES if p != "ALL PRIVILEGES") + ("CREATE USER",)


def sql_grants(v: ServerVersion | Flavor | str) -> tuple[Grant, ...]:
    """SELECT also reads mysql.user and SHOW GRANTS FOR other accounts; MariaDB's database-level
    ALL PRIVILEGES includes DELETE HISTORY (system-versioned tables)."""
    extra = ("DELETE HISTORY",) if flavor_of(v) is Flavor.MARIADB else ()
    return (Grant(_SQL_COMMON + extra, "*.*", grant_option=True),)


def monitor_grants(v: ServerVersion | Flavor | str) -> tuple[Grant, ...]:
    """mysqld_exporter's collectors (sh/exporter.sh): PROCESS for the process list and InnoDB
    metrics, REPLICATION CLIENT for SHOW BINARY LOGS (MariaDB: BINLOG MONITOR) and replica status
    (MariaDB: SLAVE MONITOR); global status and variables need none. No data, no writes, no
    performance_schema (no perf_schema collector is enabled)."""
    if flavor_of(v) is Flavor.MARIADB:
        status: tuple[str, ...] = ("PROCESS", "BINLOG MONITOR", "SLAVE MONITOR")
    else:
        status = ("PROCESS", "REPLICATION CLIENT")
    return (Grant(status),)


def operator_grants(v: ServerVersion | Flavor | str, app_database: str | None = None) -> tuple[Grant, ...]:
    out = [Grant(tuple(p for p, _ in operator_privileges(v)), "*.*", grant_option=True)]
    if flavor_of(v) is Flavor.MYSQL:
        out.append(Grant(("INSERT",), "mysql.plugin"))  # INSTALL PLUGIN rpl_semi_sync_*
    if app_database:
        # CREATE DATABASE of the app database, and granting the app account ALL on it
        out.append(Grant(("ALL PRIVILEGES",), f"{app_database}.*", grant_option=True))
    return tuple(out)


def replication_grants(v: ServerVersion | Flavor | str) -> tuple[Grant, ...]:
    """Replicas' IO threads (GTID auto-positioning, semi-sync acknowledgements) need only this."""
    return (Grant(("REPLICATION SLAVE",)),)


def backup_grants(v: ServerVersion | Flavor | str) -> tuple[Grant, ...]:
    if flavor_of(v) is Flavor.MARIADB:
        # mariadb-dump --single-transaction --master-data reads the snapshot's binlog position
        # without FLUSH TABLES WITH READ LOCK: no RELOAD, no LOCK TABLES
        return (Grant(_BACKUP_MARIADB),)
    return (Grant(_BACKUP_MYSQL + (_mysql_flush_tables(v),)),)


def binlog_grants(v: ServerVersion | Flavor | str) -> tuple[Grant, ...]:
    """The binary-log archiver (backup/binlog_stream.py): REPLICATION SLAVE streams the binary logs
    (mysqlbinlog --read-from-remote-server) and reads their headers (SHOW BINLOG EVENTS),
    REPLICATION CLIENT (MariaDB: BINLOG MONITOR) lists them, RELOAD closes the file being written
    (FLUSH BINARY LOGS) once it held a transaction maxDelaySeconds. No data, no writes."""
    listing = "BINLOG MONITOR" if flavor_of(v) is Flavor.MARIADB else "REPLICATION CLIENT"
    return (Grant(("REPLICATION SLAVE", listing, "RELOAD")),)


def app_grants(v: ServerVersion | Flavor | str, database: str) -> tuple[Grant, ...]:
    return (Grant(("ALL PRIVILEGES",), f"{database}.*"),)


def restore_grants(v: ServerVersion | Flavor | str) -> tuple[Grant, ...]:
    """The restore Job's own account: it prepares each instance (writable, the GTID position, the
    events' statuses, a physical copy's accounts) and gives the load account its grants, so it
    holds ALL PRIVILEGES WITH GRANT OPTION, but what `restore_revokes` takes back. No statement of
    a tenant's dump or binary log runs as it: those run as the load account (`load_grants`). It
    exists only while a restore needs it."""
    return (Grant(("ALL PRIVILEGES",), grant_option=True),)


# The load account (mysql-operator-load): what a tenant's dump and archived binary logs run as.
# It is made by the restore Job on each instance for the load, with a password only that Job
# knows, and dropped after it. On *.* it holds only what the dump tools' and binlog tools' output
# needs beside the data, measured on MariaDB 10.11.19 and MySQL 9.7.4; on each database the load
# creates (and each one restored already) ALL PRIVILEGES, granted by the Job as the dump or the
# binary log reaches its CREATE DATABASE (`database_grant_sql`). No CREATE USER, no privilege on
# mysql.*, no FILE, PROCESS, SUPER or global settings but the binary-log ones MariaDB needs.
_LOAD_MARIADB = (
    "SET USER",  # the DEFINER of a stored object: the application account (DefinerRewriter)
    "BINLOG REPLAY",  # mariadb-binlog's BINLOG statements and session gtid_seq_no/server_id
    # SET SESSION sql_log_bin = 0 (a dump is not binary-logged: the GTID position is set after
    # it). It also lets the session change the binary log's global settings: the restore Job
    # reads them before the load and fails the restore when they changed (BINLOG_GLOBALS)
    "BINLOG ADMIN",
)
_LOAD_MYSQL = (
    "SET_ANY_DEFINER",  # the DEFINER of a stored object: the application account
    "REPLICATION_APPLIER",  # mysqlbinlog's BINLOG statements, GTID_NEXT and its session settings
    "SESSION_VARIABLES_ADMIN",  # the dump's SET @@SESSION.SQL_LOG_BIN = 0
)
# The global settings a MariaDB load account could change (BINLOG ADMIN); a dump never does.
BINLOG_GLOBALS = (
    "binlog_annotate_row_events",
    "binlog_checksum",
    "binlog_direct_non_transactional_updates",
    "binlog_expire_logs_seconds",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "log_bin_compress",
    "max_binlog_size",
    "sync_binlog",
)


def load_grants(v: ServerVersion | Flavor | str) -> tuple[Grant, ...]:
    """What the load account holds on *.* (see _LOAD_MARIADB, _LOAD_MYSQL)."""
    return (Grant(_LOAD_MARIADB if flavor_of(v) is Flavor.MARIADB else _LOAD_MYSQL),)


SYSTEM_DATABASES = frozenset({"mysql", "sys", "information_schema", "performance_schema"})


def database_level(database: str) -> str:
    """`<database>`.* as a database-level grant reads it: its '_' and '%' (wildcards there)
    escaped, so that it names that one database."""
    return "`" + database.replace("`", "``").replace("_", "\\_").replace("%", "\\%") + "`.*"


def database_grant_sql(database: str, account: str) -> str:
    """GRANT ALL PRIVILEGES on the one database `database` (any name a server takes: its '_' and
    '%' escaped, as a database-level grant reads them as wildcards) to `account` (quoted, as
    `user`@`host`). ValueError for a system database, an empty or too long name, or one holding a
    backslash (which a database-level grant reads as an escape)."""
    if not database or len(database) > 64:
        raise ValueError(f"database name {database!r}: not 1 to 64 characters")
    if database.lower() in SYSTEM_DATABASES:
        raise ValueError(f"database {database}: a system database, never restored")
    if "\\" in database:
        raise ValueError(f"database name {database!r} holds a backslash: the restore cannot grant on it")
    return f"GRANT ALL PRIVILEGES ON {database_level(database)} TO {account}"


# Taken back from the restore account's ALL on both flavors: what no dump the tools write needs
# and a tenant's dump could turn against the server or the operator. FILE reads and writes the
# server's files (LOAD_FILE of its TLS key, SELECT ... INTO DUMPFILE of a library into the plugin
# directory for CREATE FUNCTION ... SONAME; MariaDB's secure_file_priv is empty by default);
# PROCESS shows other sessions' statements, the operator's among them. SHUTDOWN stops the server:
# taken back on MariaDB; MySQL's CLONE needs it (the physical restore's recipient restarts itself).
_RESTORE_REVOKES = ("FILE", "PROCESS")
# MySQL's ALL also holds these dynamic privileges: SYSTEM_USER (with it, the dump could alter root's
# and the operator's accounts and kill their threads), keeping a setting over restarts past the
# operator's my.cnf (PERSIST_RO_VARIABLES_ADMIN), turning redo logging off, rotating the keyring's
# master key, reading sensitive settings.
_RESTORE_REVOKES_MYSQL = (
    "SYSTEM_USER",
    "PERSIST_RO_VARIABLES_ADMIN",
    "INNODB_REDO_LOG_ENABLE",
    "ENCRYPTION_KEY_ADMIN",
    "SENSITIVE_VARIABLES_OBSERVER",
)


def restore_revokes(v: ServerVersion | Flavor | str) -> tuple[Grant, ...]:
    """Taken back from the restore account right after ALL PRIVILEGES (see _RESTORE_REVOKES)."""
    if flavor_of(v) is Flavor.MYSQL:
        return (Grant(_RESTORE_REVOKES + _RESTORE_REVOKES_MYSQL),)
    return (Grant(_RESTORE_REVOKES + ("SHUTDOWN",)),)


def grant_lines(grants: Iterable[Grant], revokes: Iterable[Grant] = ()) -> str:
    """The grants as INIT_SH reads them: one `<privileges> ON <target>[ WITH GRANT OPTION]` a
    line, then one `REVOKE <privileges> ON <target>` a line."""
    return "\n".join(
        [g.clause() + (" WITH GRANT OPTION" if g.grant_option else "") for g in grants]
        + [f"REVOKE {g.clause()}" for g in revokes]
    )
