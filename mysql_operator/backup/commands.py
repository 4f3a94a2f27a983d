"""Pure: the command lines a logical backup and a restore run, and the statements around a load.

Passwords never appear on a command line (other users of the machine can read /proc/*/cmdline):
the client tools read them from an option file (`--defaults-extra-file`, mode 0600) the caller
writes with `client_option_file()`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mysql_operator.db.accounts import SYSTEM_DATABASES
from mysql_operator.db.flavor import Flavor, ServerVersion

COMPRESSORS = {
    # name: (compress argv, decompress argv, object suffix)
    "zstd": (["zstd", "-q", "-c", "-3", "-T0"], ["zstd", "-q", "-d", "-c"], ".zst"),
    "gzip": (["gzip", "-c", "-6"], ["gzip", "-d", "-c"], ".gz"),
}


class CommandError(ValueError):
    pass


# the server release a client tool was built with, in its `--version` line: MySQL's "mysqlbinlog
# Ver 9.7.4-2 for Linux", MariaDB's "mariadb-binlog from 11.8.9-MariaDB, client 3.5" and
# "mariadb-dump Ver 10.19 Distrib 10.11.19-MariaDB"; MariaDB 10.11's mariadb-binlog names none
_TOOL_RELEASE = re.compile(r"\b(?:Ver|from|Distrib) (\d+)\.(\d+)\.(\d+)\b")


def tool_release(version_line: str) -> tuple[int, int, int] | None:
    """The server release (major, minor, patch) a tool's `--version` output names, or None."""
    m = _TOOL_RELEASE.search(version_line)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def tool_too_old(tool: str, version_line: str, server: ServerVersion, image: str = "") -> str | None:
    """Why `tool` must not work on `server`'s data: it is the other flavor's (a MariaDB build's
    line says "-MariaDB"; Debian's MariaDB images also answer to `mysqldump`), or it comes from an
    older release series (a binary log or dump may hold what it does not know). None when it may:
    its series is the server's or newer (an older patch release of the same series reads the
    series' format), or its output names no release (MariaDB 10.11's mariadb-binlog)."""
    release = tool_release(version_line)
    if release is None:
        return None
    flavor = "mariadb" if "MariaDB" in version_line else "mysql"
    where = f" in the tool image {image}" if image else ""
    said = f"{tool} {'.'.join(map(str, release))}{where}"
    fix = (
        f"Fix spec.toolsImage: name a tool image of {server.flavor.value} {server.major}.{server.minor} "
        f"or later (the operator's own is <toolsImage.repository>:{server.flavor.value}-"
        f"{server.major}.{server.minor}), or remove it"
    )
    if flavor != server.flavor.value:
        return f"{said} is {flavor}'s, and the server is {server}: its formats differ. {fix}"
    if release[:2] >= (server.major, server.minor):
        return None
    return (
        f"{said} is older than the server ({server}): it may not read the binary logs or the "
        f"data the server writes. {fix}"
    )


@dataclass(frozen=True)
class Endpoint:
    """Where a client tool connects. The password goes in the option file, never here."""

    host: str
    port: int
    user: str


def client_option_file(user: str, password: str) -> str:
    """Text of a [client] option file holding the password (write it with mode 0600).
    A line break or NUL would end the value early or add a line: refused (the error never shows
    the password)."""
    for what, value in (("user name", user), ("password", password)):
        if any(ch in value for ch in "\n\r\0"):
            raise CommandError(
                f"the {what} of account {user!r} contains a line break or a NUL character, "
                "which an option file cannot hold: use a single-line value without NUL"
            )

    def quote(v: str) -> str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return f"[client]\nuser={quote(user)}\npassword={quote(password)}\n"


def compressor(name: str) -> tuple[list[str], list[str], str]:
    if name not in COMPRESSORS:
        raise CommandError(f"compressor {name!r} is not supported: use one of {', '.join(COMPRESSORS)}")
    c, d, s = COMPRESSORS[name]
    return list(c), list(d), s


def user_databases(names: list[str]) -> list[str]:
    return sorted(n for n in names if n.lower() not in SYSTEM_DATABASES)


def tls_options(version: ServerVersion, tls_ca: str | None) -> list[str]:
    """Client-tool options that connect over TLS only, verifying the server's certificate against
    the CA file `tls_ca` and its host name against the one connected to. Without a CA, plaintext
    (never the tools' unverified TLS): a server that requires TLS refuses it, visibly."""
    mariadb = version.flavor is Flavor.MARIADB
    if not tls_ca:
        return ["--skip-ssl"] if mariadb else ["--ssl-mode=DISABLED"]
    if mariadb:
        return ["--ssl", f"--ssl-ca={tls_ca}", "--ssl-verify-server-cert"]
    return ["--ssl-mode=VERIFY_IDENTITY", f"--ssl-ca={tls_ca}"]


def tls_hint(message: str, tls_ca: str | None) -> str:
    """`message`, with what to do when a server may have refused a connection for lacking TLS
    (`tls_ca` None): MySQL says "insecure transport"; MariaDB denies access, as to a wrong password."""
    text = message.lower()
    if not tls_ca and ("insecure transport" in text or "(using password:" in text):
        return (
            f"{message} (connected without TLS, which a server that requires TLS refuses: give "
            "--tls-ca with the cluster's CA certificate)"
        )
    return message


# a lookup of a server's name that failed for now (the resolver's EAI_AGAIN, -3: "try again"), as
# each client says it: CLONE's "2005 : Unknown MySQL server host 'h' (-3)", mysqldump's "2005:
# Unknown MySQL server host 'h' (-3)", the MariaDB tools' "Unknown server host 'h' (-3)", PyMySQL's
# "Can't connect to MySQL server on 'h' ([Errno -3] ...)". A name that does not exist is -2.
_LOOKUP_STALLED = re.compile(r"Unknown (?:MySQL )?server host '[^']*' \(-3\)|on '[^']*' \(\[Errno -3\]")


def name_not_resolved_yet(message: str) -> bool:
    """Pure: whether a client's failure `message` says a server's name did not resolve for now
    (EAI_AGAIN), which is worth trying again; any other failure is not."""
    return _LOOKUP_STALLED.search(message) is not None


# the dump tools' options that shape what a dump holds (its rows as the table digests read them,
# backup/table_digest.py): every dump of a backup or of a restored server for its check has them
DUMP_CONTENT = (
    "--single-transaction",
    "--quick",
    "--triggers",
    "--routines",
    "--events",
    "--hex-blob",
    "--default-character-set=utf8mb4",
)


def dump_command(
    version: ServerVersion, ep: Endpoint, options_file: str, databases: list[str], tls_ca: str | None = None
) -> list[str]:
    """The flavor's dump tool with a consistent snapshot and the GTID position in the output
    (over TLS verifying the server against the CA file `tls_ca`, when given)."""
    if not databases:
        raise CommandError("nothing to back up: the server has no databases besides the system ones")
    common = [
        f"--defaults-extra-file={options_file}",
        f"--host={ep.host}",
        f"--port={ep.port}",
        "--protocol=TCP",
        *tls_options(version, tls_ca),
        *DUMP_CONTENT,
    ]
    if version.flavor is Flavor.MARIADB:
        # --master-data=2 + --gtid: a commented `SET GLOBAL gtid_slave_pos='…'` for the snapshot
        tool = "mariadb-dump" if version.at_least(10, 5) else "mysqldump"
        argv = [tool, *common, "--master-data=2", "--gtid"]
    else:
        source = "--source-data=2" if version.at_least(8, 0, 26) else "--master-data=2"
        argv = ["mysqldump", *common, source, "--set-gtid-purged=ON", "--column-statistics=0"]
    return [*argv, "--databases", *databases]


def copy_dump_command(version: ServerVersion, socket: str, databases: list[str]) -> list[str]:
    """The dump tool on the server a physical copy is started on (MySQL: backup/physical.py;
    MariaDB: backup/mariadb_copy_tables.py: no port, only its unix `socket`; no account checks,
    so its root without a password; no binary log), for the copy's table digests only: with
    dump_command's options that shape the dump's rows (DUMP_CONTENT; MySQL's
    --column-statistics=0), so that a restored server dumped by dump_command gives the same
    digests, and without those that write a position (a server without a binary log has none:
    mysqldump refuses --source-data there)."""
    if not databases:
        raise CommandError("the copy has no databases besides the system ones")
    where = ["--user=root", f"--socket={socket}", "--protocol=SOCKET", *DUMP_CONTENT]
    if version.flavor is Flavor.MARIADB:
        tool = "mariadb-dump" if version.at_least(10, 5) else "mysqldump"
        return [tool, *where, "--databases", *databases]
    return ["mysqldump", *where, "--set-gtid-purged=OFF", "--column-statistics=0", "--databases", *databases]


def client_command(
    version: ServerVersion,
    ep: Endpoint,
    options_file: str,
    tls_ca: str | None = None,
    *,
    binlogged: bool = False,
) -> list[str]:
    """The command-line client that loads a dump (dumps use client-side DELIMITER), over TLS
    verifying the server against the CA file `tls_ca` when given. `binlogged`: what it runs is
    written to the server's binary log (a binlog replay: the replayed GTIDs become the server's)."""
    tool = "mariadb" if version.flavor is Flavor.MARIADB and version.at_least(10, 5) else "mysql"
    # A dump is a tenant's bytes: the client never reads a local file for it (LOAD DATA LOCAL
    # INFILE; the restore also turns local_infile off on the server, before_load_sql) and runs no
    # client command (\\! and system, \\. and source, tee, pager): --binary-mode already turns them
    # off in both clients when reading a pipe (all but DELIMITER and \\C); --commands=OFF (MySQL)
    # and --sandbox (MariaDB) say it again where the client has them (command_switch).
    argv = [
        tool,
        f"--defaults-extra-file={options_file}",
        f"--host={ep.host}",
        f"--port={ep.port}",
        "--protocol=TCP",
        *tls_options(version, tls_ca),
        "--binary-mode",
        "--default-character-set=utf8mb4",
        "--local-infile=0",
    ]
    argv += command_switch(version)
    if version.flavor is Flavor.MARIADB and not binlogged:
        # the restored rows are not binlogged: replicas are built from the loaded primary, and the
        # server's GTID position is set to the backup's afterwards (see before/after_load_sql)
        argv.append("--init-command=SET SESSION sql_log_bin=0")
    return argv


# MariaDB's --sandbox came with these releases of each series (and every series after 11.4)
_SANDBOX_SINCE = {(10, 5): 25, (10, 6): 18, (10, 11): 8, (11, 0): 6, (11, 1): 5, (11, 2): 4, (11, 4): 2}


def command_switch(version: ServerVersion) -> list[str]:
    """The client option that turns its own commands off, when the client of the server image
    `version` (the restore Job's sidecar runs that image's client) has it: MySQL's --commands
    (measured in 9.7.4; older clients are not assumed to have it), MariaDB's --sandbox. Without
    it, --binary-mode alone keeps them off (client_command)."""
    if version.flavor is Flavor.MYSQL:
        return ["--commands=OFF"] if version.at_least(9, 7) else []
    series = (version.major, version.minor)
    if series in _SANDBOX_SINCE:
        return ["--sandbox"] if version.patch >= _SANDBOX_SINCE[series] else []
    return ["--sandbox"] if version.at_least(11, 5) else []


def before_load_sql(version: ServerVersion) -> list[str]:
    """Statements run on the (empty) target before loading: the server refuses LOAD DATA LOCAL
    (a dump must never make the client send a file), a clean GTID history."""
    refuse_local = "SET GLOBAL local_infile = 0"
    if version.flavor is Flavor.MARIADB:
        return [refuse_local]
    # the GTID position is set after the load, which needs an empty gtid_executed
    return [refuse_local, "RESET BINARY LOGS AND GTIDS" if version.at_least(8, 4) else "RESET MASTER"]


def after_load_sql(version: ServerVersion, gtid: str | None) -> list[tuple[str, tuple[object, ...]]]:
    """Statements that set the GTID position of the restored server to the backup's: MySQL's is
    the set of the dump's own GTID statement, which the load held back (DumpFilter), MariaDB's the
    position the dump's head names."""
    if not gtid:
        return []
    if version.flavor is Flavor.MYSQL:  # the load wrote no GTID (SQL_LOG_BIN = 0): gtid_executed is empty
        return [("SET GLOBAL gtid_purged = %s", (gtid,))]
    return [
        ("RESET MASTER", ()),
        ("SET GLOBAL gtid_binlog_state = %s", (gtid,)),
        ("SET GLOBAL gtid_slave_pos = %s", (gtid,)),
    ]


def after_replay_sql(version: ServerVersion) -> list[str]:
    """After archived binary logs were replayed into a restored server: MariaDB's replicas start
    from gtid_slave_pos, which the replay left at the backup's position (it moved the binary log
    state only)."""
    if version.flavor is Flavor.MARIADB:
        return ["SET GLOBAL gtid_slave_pos = @@GLOBAL.gtid_binlog_pos"]
    return []


def executed_gtids_sql(version: ServerVersion) -> str:
    return (
        "SELECT @@GLOBAL.gtid_executed"
        if version.flavor is Flavor.MYSQL
        else "SELECT @@GLOBAL.gtid_binlog_pos"
    )


def quote_account(user: str, host: str = "%") -> str:
    return "`" + user.replace("`", "``") + "`@`" + host.replace("`", "``") + "`"
