"""A physical backup of a MySQL server: its data copied by CLONE into a folder, then sent as tar;
and the way back: the tar unpacked and served for a new cluster's instances to clone
(`serving_copy`, driven by backup/restore_physical.py).

    with cloned(tools_dir, donor, password, tls_ca, plugins) as copy:
        tar = spawn(tar_command(copy.data))        # the backup pipeline compresses and uploads it

MySQL's CLONE copies a running server's InnoDB data (every table, the accounts, the GTID state)
consistently, without blocking its writes, into a data directory a server starts on as is. Only a
server can receive a clone, so a throwaway mysqld of the cluster's own server image - the backup
Job's `client-tools` sidecar (backup/sidecar.py) runs it - receives it into a folder of the
disk-backed emptyDir both containers share (the Jobs' `scratch` volume, sized like a data
volume; `CLONE INSTANCE FROM ... DATA DIRECTORY`). That server listens on
no port, only on a socket in that folder, and accepts only its own root; this process, which
drives it, connects there. The donor is one of the cluster's servers, reached over TLS verified
with the cluster's CA. The copy's GTID set is read from the copy itself: a server started on it
(which also shows that it starts) reports it; while it runs, the backup reads the copy's table
digests from a dump of it (`inspect`).

Everything the recipient writes is named clone* in the shared folder and created by the
recipient itself (so by the sidecar's user); the shared folder needs room for the whole data
(binary and relay logs are not copied). All of it is removed when the upload is done or failed.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import pymysql
from pymysql.converters import escape_string

from mysql_operator.backup import commands
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.pipeline import TailBuffer, drain
from mysql_operator.backup.sidecar import SidecarError, SidecarProcess
from mysql_operator.backup.copy_server import (
    Paths,
    PhysicalError,
    init_command,
    recipient_plugins,
    server_command,
)

METHOD_LOGICAL, METHOD_PHYSICAL = "logical", "physical"


@dataclass(frozen=True)
class Copy:
    data: Path  # the cloned data directory
    gtid_executed: str  # the copy's GTID set, in MySQL's format


@contextlib.contextmanager
def cloned(
    tools_dir: str,
    donor: Endpoint,
    password: str,
    tls_ca: str | None,
    plugins: Sequence[str],
    *,
    scratch: str | None = None,
    start_timeout: float = 120.0,
    inspect: Callable[[str, list[str]], None] | None = None,
) -> Iterator[Copy]:
    """Clone `donor` into `scratch` (else `tools_dir`; either shared with the client-tools
    sidecar), start a server on the copy to read its GTID set (and so know it starts), and yield
    it; it is removed afterwards. Raises PhysicalError, whose text never holds the password.
    `inspect(socket, databases)`: called while that server is up (no port, its unix socket,
    its root without a password; `databases`: the copy's user databases), before it shuts down
    (the backup's table digests: backup/backup_producer.py); what it raises ends the copy."""
    p = Paths(Path(scratch or tools_dir))
    p.remove()  # a failed attempt's, in a retried Pod
    try:
        run_tool(init_command(p), tools_dir, p.init_log)
        with _server(p, False, plugins, tools_dir, start_timeout) as conn:
            _clone(conn, p, donor, password, tls_ca)
        # clone_status names no GTID set for a copy into a folder: the copy's own, as a server
        # started on it (a restored one) sees it
        with _server(p, True, plugins, tools_dir, start_timeout) as conn:
            with conn.cursor() as cur:
                cur.execute("SELECT @@GLOBAL.gtid_executed")
                (gtid,) = cur.fetchone()
                cur.execute("SHOW DATABASES")
                databases = commands.user_databases([str(r[0]) for r in cur.fetchall()])
            if inspect is not None:
                inspect(str(p.socket), databases)
        (p.data / "auto.cnf").unlink(missing_ok=True)  # its server_uuid: every restored server makes its own
        yield Copy(p.data, re.sub(r"\s+", "", str(gtid or "")))
    finally:
        p.remove()


@contextlib.contextmanager
def serving_copy(
    tools_dir: str,
    unpack: Callable[[Path], None],
    accounts: Sequence[str],
    login: tuple[str, str],
    port: int,
    *,
    scratch: str | None = None,
    tls_dir: str | None = None,
    start_timeout: float = 120.0,
) -> Iterator[Copy]:
    """A physical backup served for the instances of a new cluster to clone (its restore), with the
    certificate in `tls_dir` (server_command).
    `unpack(folder)` writes the copy into `folder` of `scratch` (else of `tools_dir`; either shared
    with the client-tools sidecar). A server started on it without account checks, listening on
    no port, first runs `accounts` (account_statements of the new cluster: its accounts replace
    the backup's of the same names, so the restored instances keep the new cluster's passwords;
    the backup's other accounts stay) and reads the copy's GTID set. Then a server on the copy
    with its accounts checked listens on `port` and is yielded; `login` (one of `accounts`, local logins allowed)
    shuts it down. All of it is removed afterwards. Raises PhysicalError (never a password)."""
    p = Paths(Path(scratch or tools_dir))
    p.remove()
    plugins = recipient_plugins([])  # the copy's mysql.plugin adds what it had installed
    try:
        p.data.mkdir()
        unpack(p.data)
        with _server(p, True, plugins, tools_dir, start_timeout) as conn:
            with conn.cursor() as cur:
                helpers = _proxy_grantor(cur, accounts)
                cur.execute("FLUSH PRIVILEGES")  # account statements work from here on
                for sql in accounts:
                    try:
                        cur.execute(sql)
                    except pymysql.MySQLError as e:
                        what = sql.split(" IDENTIFIED ", 1)[0][:200]  # never the password hash
                        raise PhysicalError(f"the new cluster's account on the copy: {what}: {e}") from None
                for row in helpers:  # gone from the table the serving server starts with
                    cur.execute(f"DELETE FROM mysql.proxies_priv WHERE {_PROXY_ROW}", row)
                cur.execute("SELECT @@GLOBAL.gtid_executed")
                (gtid,) = cur.fetchone()
        with _server(
            p, False, plugins, tools_dir, start_timeout, donor_port=port, login=login, tls_dir=tls_dir
        ):
            yield Copy(p.data, re.sub(r"\s+", "", str(gtid or "")))
    finally:
        p.remove()


# SHOW GRANTS' form of a proxy grant: GRANT PROXY ON `user`@`host` TO ...
_GRANT_PROXY = re.compile(r"^GRANT PROXY ON `((?:[^`]|``)*)`@`((?:[^`]|``)*)` TO ")
_PROXY_ROW = "Host = '' AND User = %s AND Proxied_host = %s AND Proxied_user = %s"


def _proxy_grantor(cur, accounts: Sequence[str]) -> list[tuple[str, str, str]]:
    """A server without account checks runs its statements as a user no grant names
    ('root'@''), and MySQL lets only a holder of PROXY ... WITH GRANT OPTION on an account grant
    PROXY on it (root@localhost's own default grant included). So, in the grant table itself,
    before the accounts are loaded: that right for this session's user on every account the
    statements grant PROXY on. Returns the rows added, for the caller to delete afterwards."""
    cur.execute("SELECT SUBSTRING_INDEX(USER(), '@', 1)")
    (me,) = cur.fetchone()
    added = []
    for sql in accounts:
        m = _GRANT_PROXY.match(sql)
        if m is None:
            continue
        row = (str(me), m.group(2).replace("``", "`"), m.group(1).replace("``", "`"))
        cur.execute(
            "INSERT IGNORE INTO mysql.proxies_priv (Host, User, Proxied_host, Proxied_user, "
            "With_grant, Grantor) VALUES ('', %s, %s, %s, 1, '')",
            row,
        )
        if cur.rowcount and row not in added:
            added.append(row)
    return added


def account_statements(execute: Callable[..., list], mariadb: bool = False) -> list[str]:
    """The statements that make every account of a server (a new cluster's instance; `execute(sql,
    args)` runs a query in one session of it) on another server: DROP USER IF EXISTS, CREATE USER
    with its password hash (MySQL: as hex), its GRANTs; for MariaDB, CREATE USER IF NOT EXISTS,
    ALTER USER to the same, the GRANTs but PROXY. The servers' own accounts (mysql.*,
    mariadb.sys) are left alone, and MariaDB's roles."""
    out = []
    if mariadb:
        accounts = execute(
            "SELECT User, Host FROM mysql.user WHERE User <> %s AND is_role = 'N' ORDER BY User, Host",
            ("mariadb.sys",),
        )
    else:
        execute("SET SESSION print_identified_with_as_hex = ON")
        accounts = execute(
            "SELECT User, Host FROM mysql.user WHERE User NOT LIKE %s ORDER BY User, Host", ("mysql.%",)
        )
    for user, host in accounts:
        name = f"'{escape_string(str(user))}'@'{escape_string(str(host))}'"
        ((create,),) = execute(f"SHOW CREATE USER {name}")
        grants = [str(g) for (g,) in execute(f"SHOW GRANTS FOR {name}") if str(g).startswith("GRANT ")]
        if not mariadb:
            out += [f"DROP USER IF EXISTS {name}", str(create), *grants]
            continue
        # MariaDB runs them from a server's init file, which stops at the first error: an account
        # the copy has too is altered, not dropped (so its PROXY grant, which only a holder of it
        # may give, stays and is not given again)
        rest = str(create).removeprefix("CREATE USER ")
        out += [f"CREATE USER IF NOT EXISTS {rest}", f"ALTER USER {rest}"]
        out += [g for g in grants if not g.startswith("GRANT PROXY ")]
    return out


@contextlib.contextmanager
def _server(
    p: Paths,
    copy: bool,
    plugins: Sequence[str],
    tools_dir: str,
    timeout: float,
    donor_port: int | None = None,
    login: tuple[str, str] = ("root", ""),
    tls_dir: str | None = None,
):
    """A session of a MySQL server the sidecar runs (server_command), as throwaway_server."""
    with throwaway_server(
        p, server_command(p, plugins, copy, donor_port, tls_dir), tools_dir, timeout, login
    ) as conn:
        yield conn


@contextlib.contextmanager
def throwaway_server(
    p: Paths, argv: list[str], tools_dir: str, timeout: float, login: tuple[str, str] = ("root", "")
):
    """A session of a server the sidecar runs with `argv` (its socket and log: `p`'s), as `login`
    (root without a password unless its accounts are checked); shut down after."""
    try:
        server = SidecarProcess(argv, tools_dir)
    except SidecarError as e:
        raise PhysicalError(str(e)) from None
    try:
        err = TailBuffer()
        readers = [drain(server.stdout, err), drain(server.stderr, err)]
        conn = _connect(p, server, timeout, login)
        try:
            yield conn
        finally:  # after a failure too: a server left running would write into what is removed
            try:
                with conn.cursor() as cur:
                    cur.execute("SHUTDOWN")
            finally:
                conn.close()
        if server.wait(120) != 0:
            raise PhysicalError(f"a throwaway server ended with status {server.returncode}: {_log(p)}")
        for t in readers:
            t.join(5)
    finally:
        if server.poll() is None:  # a failure: it was asked to shut down; gone before its files are
            server.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(30)


def run_tool(argv: list[str], tools_dir: str, log: Path | None, timeout: float = 600) -> None:
    """Run `argv` in the sidecar to its end; PhysicalError with its log's (else its output's) tail."""
    try:
        proc = SidecarProcess(argv, tools_dir)
    except SidecarError as e:
        raise PhysicalError(str(e)) from None
    err = TailBuffer()
    readers = [drain(proc.stdout, err), drain(proc.stderr, err)]
    rc = proc.wait(timeout)
    for t in readers:
        t.join(5)
    if rc != 0:
        text = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else err.text()
        raise PhysicalError(f"{argv[0]} {argv[2]} failed (exit status {rc}): {text.strip() or 'no message'}")


def _log(p: Paths) -> str:
    return p.log.read_text(errors="replace")[-2000:].strip() if p.log.exists() else "no log"


def _connect(p: Paths, server: SidecarProcess, timeout: float, login: tuple[str, str]) -> pymysql.Connection:
    """A session of the server's (as `login`), once its socket answers."""
    deadline = time.monotonic() + timeout
    while True:
        if server.poll() is not None:
            raise PhysicalError(f"the server exited at start ({server.returncode}): {_log(p)}")
        try:
            return pymysql.connect(
                unix_socket=str(p.socket), user=login[0], password=login[1], autocommit=True
            )
        except pymysql.err.OperationalError as e:
            if time.monotonic() > deadline:
                raise PhysicalError(
                    f"the server did not answer within {timeout:.0f}s ({e}): {_log(p)}"
                ) from None
            time.sleep(0.2)


# a CLONE whose donor's name did not resolve for now (the resolver's EAI_AGAIN, -3: "try again")
# is tried again this many times, these seconds apart; nothing was copied yet (CI: a DNS stall
# under load failed a physical backup at its first try, docs/flakes.md)
NAME_RETRIES, NAME_RETRY_SECONDS = 3, 3.0


def _clone(
    conn,
    p: Paths,
    donor: Endpoint,
    password: str,
    tls_ca: str | None,
    pause: Callable[[float], None] = time.sleep,
) -> None:
    with conn.cursor() as cur:
        cur.execute("SET GLOBAL clone_valid_donor_list = %s", (f"{donor.host}:{donor.port}",))
        if tls_ca:  # the donor's certificate must chain to the cluster's CA
            cur.execute("SET GLOBAL clone_ssl_ca = %s", (tls_ca,))
        for attempt in range(NAME_RETRIES + 1):
            try:
                cur.execute(
                    "CLONE INSTANCE FROM %s@%s:%s IDENTIFIED BY %s DATA DIRECTORY = %s"
                    + (" REQUIRE SSL" if tls_ca else " REQUIRE NO SSL"),
                    (donor.user, donor.host, donor.port, password, str(p.data)),
                )
                break
            except pymysql.MySQLError as e:
                message = str(e.args[1] if len(e.args) > 1 else e).replace(password, "***")
                if attempt < NAME_RETRIES and commands.name_not_resolved_yet(message):
                    print(f"CLONE: {message}; again in {NAME_RETRY_SECONDS:g} s", file=sys.stderr, flush=True)
                    pause(NAME_RETRY_SECONDS)
                    continue
                raise PhysicalError(
                    f"CLONE INSTANCE FROM {donor.host}:{donor.port} failed: {message}"
                ) from None
        cur.execute("SELECT STATE, ERROR_NO, ERROR_MESSAGE FROM performance_schema.clone_status")
        row = cur.fetchone()
    if row is None or row[0] != "Completed":
        raise PhysicalError(f"the clone did not complete: {row if row else 'no clone_status'}")
