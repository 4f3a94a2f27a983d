"""Real MariaDB servers (Debian's mariadb-server) on 127.0.0.1 for integration tests.

A `MariaDBFactory` initialises ONE pristine data directory per session with `mariadb-install-db`
(plus an admin account for TCP, created in bootstrap mode so it is not in any binary log), then
copies it for every server it starts: copying is much faster than initialising again.

Each server runs with its own option file, data directory, socket, free port and server-id, in its
own process group (`start_new_session=True`), so the helpers below signal exactly that server and
teardown kills exactly what the factory started - nothing shared with another session.

Replication settings are those the operator requires: log-bin, log_slave_updates, gtid_strict_mode,
gtid_domain_id=0, binlog_format=ROW, skip-name-resolve, and `read_only=ON` at start so that a server
that restarts (for instance a crashed primary) never comes back writable on its own.
Durability is relaxed to the OS page cache (sync_binlog=0, innodb_flush_log_at_trx_commit=2): the
tests kill processes, not the machine, and the kernel keeps what a killed process wrote.

    python -m tests.support.mariadb 3     # start 3 servers, print their ports, run until Ctrl-C
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from mysql_operator.db import accounts
from mysql_operator.db.connection import PreferredTLSOnce
from mysql_operator.db.flavor import Flavor
from tests.support.ports import free_port
from tests.support.wait import wait_for

ADMIN_USER = "admin"  # 'admin'@'127.0.0.1': ALL PRIVILEGES, for setting tests up (and restores)
# Accounts with exactly the operator's privileges (db/accounts.py; the app database is
# helpers_replication.DB) and the backup account's; same password as ADMIN_USER.
OPERATOR_USER = "operator"
BACKUP_USER = "backup"
SQL_USER = "sqlobjects"  # MySQLDatabase/MySQLUser/MySQLGrant (db/accounts.py sql_grants)
APP_DATABASE = "app"


def missing_binaries() -> list[str]:
    return [b for b in ("mariadbd", "mariadb-install-db") if shutil.which(b) is None]


def server_option_file(values: dict[str, object]) -> str:
    """A [mariadbd] option file from a dict (True = flag without value)."""
    lines = ["[mariadbd]"]
    for key, value in values.items():
        lines.append(key if value is True else f"{key}={value}")
    return "\n".join(lines) + "\n"


class _Connection(PreferredTLSOnce, pymysql.connections.Connection):
    """pymysql's, sharing one context for the TLS it uses unasked (db/connection.py)."""


@dataclass
class MariaDBServer:
    name: str
    server_id: int
    port: int
    root: Path  # this server's folder: data/, my.cnf, error.log, socket
    admin_password: str = field(repr=False)
    semisync: bool = False
    extra: dict[str, object] = field(default_factory=dict)
    # TLS: PEM files (the server's certificate and key, the CA clients verify it with)
    ssl_ca: Path | None = None
    ssl_cert: Path | None = None
    ssl_key: Path | None = None
    require_secure_transport: bool = False  # refuse plaintext clients (needs ssl_cert/ssl_key)
    proc: subprocess.Popen | None = field(default=None, repr=False)
    stopped: bool = False  # SIGSTOPped
    _tls: ssl.SSLContext | None = field(default=None, repr=False)

    host = "127.0.0.1"

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    @property
    def error_log(self) -> Path:
        return self.root / "error.log"

    @property
    def option_file(self) -> Path:
        return self.root / "my.cnf"

    def options(self) -> dict[str, object]:
        opts: dict[str, object] = {
            "datadir": self.datadir,
            "socket": self.root / "mysqld.sock",
            "pid-file": self.root / "mysqld.pid",
            "log-error": self.error_log,
            "port": self.port,
            "bind-address": "127.0.0.1",
            "user": "root",
            "server-id": self.server_id,
            "log-bin": "mysql-bin",
            "log_slave_updates": "ON",
            "gtid_strict_mode": "ON",
            "gtid_domain_id": 0,
            "binlog_format": "ROW",
            "skip-name-resolve": True,
            "read_only": "ON",
            "relay-log": "relay-bin",
            "sync_binlog": 0,
            "innodb_flush_log_at_trx_commit": 2,
            "innodb_buffer_pool_size": "16M",
            "innodb_log_file_size": "16M",
            "performance_schema": "OFF",
            "skip-host-cache": True,
            "max_connections": 100,
            "slave_net_timeout": 3,  # the operator sets heartbeats of 1s; detect a hung source fast
        }
        if self.semisync:
            opts.update(
                {
                    "rpl_semi_sync_master_wait_point": "AFTER_SYNC",
                    "rpl_semi_sync_master_timeout": 4294967295,
                    # as the operator's config: a restarted primary drops what no replica acknowledged
                    "rpl_semi_sync_slave_enabled": "ON",
                    "init_rpl_role": "SLAVE",
                }
            )
        if self.ssl_cert is not None:
            opts.update({"ssl_ca": self.ssl_ca, "ssl_cert": self.ssl_cert, "ssl_key": self.ssl_key})
        if self.require_secure_transport:
            opts["require_secure_transport"] = "ON"
        opts.update(self.extra)
        return opts

    # -- lifecycle -------------------------------------------------------------------------------
    def command(self) -> list[str]:
        return ["mariadbd", f"--defaults-file={self.option_file}"]

    def write_options(self) -> None:
        self.option_file.write_text(server_option_file(self.options()))

    def start(self, timeout: float = 60.0) -> "MariaDBServer":
        self.write_options()
        log = open(self.root / "stdout.log", "ab")
        self.proc = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # own process group: signals reach exactly this server
        )
        log.close()
        self.stopped = False
        wait_for(self._ready, timeout, f"{self.name} to accept connections on port {self.port}")
        return self

    def _ready(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited:\n{self.log_tail()}")
        try:
            conn = self.connect(timeout=2)
        except pymysql.err.OperationalError:
            return False
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@server_id")
                (answered,) = cur.fetchone()
        finally:
            conn.close()
        if answered != self.server_id:  # another process took the port first
            raise RuntimeError(f"port {self.port} is answered by server-id {answered}, not {self.name}'s")
        return True

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        """SIGKILL the server (a crash). Returns once the process is gone."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.stopped = False

    def sigstop(self) -> None:
        """Freeze the server (a hung primary): it still accepts TCP but never answers."""
        assert self.alive, f"{self.name} is not running"
        os.killpg(self.proc.pid, signal.SIGSTOP)
        self.stopped = True

    def sigcont(self) -> None:
        if self.alive:
            os.killpg(self.proc.pid, signal.SIGCONT)
        self.stopped = False

    def stop(self, timeout: float = 20.0) -> None:
        """Clean shutdown (SIGTERM), SIGKILL after `timeout`."""
        if self.proc is None or self.proc.poll() is not None:
            return
        if self.stopped:
            self.sigcont()
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def restart(self, **extra: object) -> "MariaDBServer":
        """Start again on the same data directory (after kill9 or stop); `extra` adds options."""
        if self.alive:
            self.stop()
        self.extra.update(extra)
        return self.start()

    # -- access ----------------------------------------------------------------------------------
    def connect(
        self,
        user: str = ADMIN_USER,
        password: str | None = None,
        timeout: float = 5,
        database: str | None = None,
    ) -> pymysql.connections.Connection:
        return _Connection(
            host=self.host,
            port=self.port,
            user=user,
            password=self.admin_password if password is None else password,
            database=database,
            connect_timeout=timeout,
            read_timeout=timeout,
            write_timeout=timeout,
            autocommit=True,
            # over TLS when the server has a certificate (its chain, not its name: host is an IP)
            ssl=self._client_tls(),
        )

    def _client_tls(self) -> ssl.SSLContext | None:
        """The chain checked against ssl_ca, one context for every connection (building one per
        connection loads the system's CA store each time)."""
        if self.ssl_cert is None:
            return None
        if self._tls is None:
            self._tls = ssl.create_default_context(cafile=str(self.ssl_ca))
            self._tls.check_hostname = False
            self._tls.verify_flags &= ~ssl.VERIFY_X509_STRICT
        return self._tls

    def query(self, sql: str, args=None) -> list[tuple]:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        finally:
            conn.close()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.error_log.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no error log)"
        return "\n".join(text[-lines:])


class MariaDBFactory:
    """Starts servers from one cached pristine data directory; `close()` stops all of them."""

    flavor = Flavor.MARIADB
    server_class = MariaDBServer

    def __init__(self, workdir: Path | None = None):
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="mariadb-test-"))
        self.admin_password = "pw-" + secrets.token_hex(12)
        self.servers: list[MariaDBServer] = []
        self._pristine: Path | None = None
        self._next_id = 1
        self._volumes: list[Path] = []  # data directories on a tmpfs of their own (create)

    def pristine(self) -> Path:
        if self._pristine is None:
            path = self.workdir / "pristine"
            done = subprocess.run(
                [
                    "mariadb-install-db",
                    "--no-defaults",
                    "--user=root",
                    f"--datadir={path}",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                    "--skip-name-resolve",
                ],
                capture_output=True,
                timeout=180,
            )
            if done.returncode:  # what it said, for the failure's cause (it once failed under load)
                said = (done.stdout + done.stderr).decode(errors="replace")[-3000:]
                raise RuntimeError(f"mariadb-install-db exited {done.returncode}: {said}")
            # the operator's admin account, created without a binary log in bootstrap mode
            sql = (
                "FLUSH PRIVILEGES;\n"
                "DELETE FROM mysql.global_priv WHERE User='root' AND Host<>'localhost';\n"
                "FLUSH PRIVILEGES;\n"
                f"CREATE USER '{ADMIN_USER}'@'127.0.0.1' IDENTIFIED BY '{self.admin_password}';\n"
                f"GRANT ALL PRIVILEGES ON *.* TO '{ADMIN_USER}'@'127.0.0.1' WITH GRANT OPTION;\n"
            )
            for user, grants in (
                (OPERATOR_USER, accounts.operator_grants(Flavor.MARIADB, APP_DATABASE)),
                (BACKUP_USER, accounts.backup_grants(Flavor.MARIADB)),
                (SQL_USER, accounts.sql_grants(Flavor.MARIADB)),
            ):
                sql += f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{self.admin_password}';\n"
                sql += "".join(
                    g.grant_sql().replace("%s@%s", f"'{user}'@'127.0.0.1'") + ";\n" for g in grants
                )
            subprocess.run(
                [
                    "mariadbd",
                    "--no-defaults",
                    "--bootstrap",
                    "--user=root",
                    f"--datadir={path}",
                    "--skip-log-bin",
                    "--innodb-buffer-pool-size=16M",
                ],
                input=sql.encode(),
                check=True,
                capture_output=True,
                timeout=120,
            )
            self._pristine = path
        return self._pristine

    def create(
        self,
        n: int = 1,
        semisync: bool = False,
        start: bool = True,
        prefix: str = "db",
        ssl_ca: Path | None = None,
        ssl_cert: Path | None = None,
        ssl_key: Path | None = None,
        require_secure_transport: bool = False,
        volume_bytes: int | None = None,
    ) -> list[MariaDBServer]:
        """`n` new servers named {prefix}-0.. with fresh data directories (server ids unique).
        `ssl_*`: PEM files of the servers' TLS (see MariaDBServer). `volume_bytes`: each data
        directory on a tmpfs of that size (a volume that can fill up: needs root), else on the
        work directory's file system."""
        out = []
        for _ in range(n):
            sid = self._next_id
            self._next_id += 1
            root = self.workdir / f"{prefix}-{sid}"
            root.mkdir(parents=True)
            if volume_bytes is not None:
                (root / "data").mkdir()
                subprocess.run(
                    [
                        "mount",
                        "-t",
                        "tmpfs",
                        "-o",
                        f"size={volume_bytes},mode=0750",
                        "tmpfs",
                        str(root / "data"),
                    ],
                    check=True,
                    capture_output=True,
                )
                self._volumes.append(root / "data")
            self.copy_pristine(root / "data")
            server = self.server_class(
                name=f"{prefix}-{len(out)}",
                server_id=sid,
                port=free_port(),
                root=root,
                admin_password=self.admin_password,
                semisync=semisync,
                ssl_ca=ssl_ca,
                ssl_cert=ssl_cert,
                ssl_key=ssl_key,
                require_secure_transport=require_secure_transport,
                **self.server_kwargs(),
            )
            self.servers.append(server)
            out.append(server)
        if start:
            for s in out:
                s.start()
        return out

    def copy_pristine(self, datadir: Path) -> None:
        shutil.copytree(self.pristine(), datadir, dirs_exist_ok=True)  # into an empty volume too

    def server_kwargs(self) -> dict[str, object]:
        return {}

    def logs_report(self, lines: int = 30) -> str:
        parts = []
        for s in self.servers:
            parts.append(f"--- {s.name} (server-id {s.server_id}, port {s.port}) ---\n{s.log_tail(lines)}")
        return "\n".join(parts)

    def close(self, remove: bool = True) -> None:
        """Stop every server: killed at once when their data is removed anyway (a clean shutdown
        can wait out a timeout - a semi-sync primary's, a hung replica connection's: CI saw a
        module's teardown take 60 s), else shut down cleanly."""
        for s in self.servers:
            try:
                if remove:
                    s.kill9()
                else:
                    s.stop(timeout=10)
            except Exception as e:  # noqa: BLE001 - keep stopping the others
                print(f"stopping {s.name}: {e}", file=sys.stderr)
        for volume in self._volumes:
            subprocess.run(["umount", "--lazy", str(volume)], check=False, capture_output=True)
        self._volumes.clear()
        if remove:
            shutil.rmtree(self.workdir, ignore_errors=True)


def main(factory_class: type[MariaDBFactory] = MariaDBFactory) -> int:
    """Start N servers (argv[1], default 1), print where, run until Ctrl-C."""
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    f = factory_class()
    try:
        for s in f.create(n):
            print(f"{s.name}: 127.0.0.1:{s.port} server-id {s.server_id} user {ADMIN_USER}")
        print(f"admin password in {f.workdir}/password (Ctrl-C to stop)")
        (f.workdir / "password").write_text(f.admin_password)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        f.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
