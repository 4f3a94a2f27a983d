"""Real MySQL 9.7 servers on 127.0.0.1 for integration tests, run from the MySQL image's root.

The binaries are Debian sid's (`mysql-server-core`, `mysql-client-core`), which need sid's libc:
they never go onto the host. `hack/build-images.sh --rootfs mysql` builds the image the cluster
runs (images/mysql/Dockerfile) and unpacks its root file system into the image cache; each server
here runs `chroot ROOT mysqld ...` (root only; in a mount namespace of its own where the host's
/etc/hosts is bound over the image's empty one, as in a Pod), with its folder under ROOT/var/tmp so
that the same paths work inside the root and, prefixed with ROOT, from the tests.

Like `tests/support/mariadb.py` (whose `MariaDBServer`/`MariaDBFactory` these extend): ONE pristine
data directory per factory, initialised with the test accounts (`--initialize-insecure
--init-file`, nothing in a binary log), copied for every server; each server has its own option
file, port, server-id and process group. The options are the operator's own MySQL settings
(`manifests.config.server_settings`), so the tests run the configuration Pods run, with durability
relaxed to the page cache as in the MariaDB tests.

    python -m tests.support.mysql 3     # start 3 servers, print their ports, run until Ctrl-C
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from mysql_operator.api.types import ClusterSpec, Replication
from mysql_operator.db import accounts
from mysql_operator.db.flavor import Flavor
from mysql_operator.manifests.config import server_settings
from tests.support.mariadb import (
    ADMIN_USER,
    APP_DATABASE,
    BACKUP_USER,
    SQL_USER,
    OPERATOR_USER,
    MariaDBFactory,
    MariaDBServer,
    server_option_file,
    main,
)

REPO = Path(__file__).resolve().parents[2]
# the operator's settings that name paths of its Pods (given per server here instead)
PATH_SETTINGS = {"ssl_ca", "ssl_cert", "ssl_key", "mysqlx_socket"}

__all__ = [
    "ADMIN_USER",
    "APP_DATABASE",
    "BACKUP_USER",
    "SQL_USER",
    "OPERATOR_USER",
    "MySQLFactory",
    "MySQLServer",
    "mysql_unavailable",
]


@functools.cache
def _rootfs(image: str = "mysql") -> tuple[Path | None, str | None]:
    if os.geteuid() != 0:
        return None, "MySQL 9.7 runs here with chroot into its image's root, which needs root"
    cmd = [str(REPO / "hack" / "build-images.sh"), "--rootfs", image]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        return None, (
            f"`hack/build-images.sh --rootfs {image}` failed ({proc.returncode}): {proc.stderr.strip()[-600:]}"
        )
    root = Path(proc.stdout.strip().splitlines()[-1])
    if not any((root / "usr/sbin" / s).exists() for s in ("mysqld", "mariadbd")):
        return None, f"{root} holds no usr/sbin/mysqld (nor mariadbd)"
    return root, None


def mysql_rootfs(image: str = "mysql") -> Path:
    """The unpacked root of the server image (`mysql`: as the official one, no mysqlbinlog) or of
    the tool image the Jobs' client-tools sidecar runs (`mysql-tools`)."""
    root, why = _rootfs(image)
    if root is None:
        raise RuntimeError(why)
    return root


def mysql_unavailable() -> str | None:
    """None when MySQL servers and their tools can run here; otherwise why not (for a printed
    skip reason)."""
    return _rootfs()[1] or _rootfs("mysql-tools")[1]


def in_root(root: Path, path: Path) -> str:
    """`path` (under `root`) as the chrooted server sees it."""
    return "/" + str(path.relative_to(root))


@dataclass
class MySQLServer(MariaDBServer):
    """A mysqld in the image's root. Same interface as MariaDBServer (kill9, sigstop, restart...)."""

    rootfs: Path = Path("/")

    def _p(self, path: Path | None) -> str | None:
        return None if path is None else in_root(self.rootfs, path)

    def start(self, timeout: float = 60.0) -> "MySQLServer":
        # as the Pods' start.sh: a CLONE waiting to be put in place comes up with a new server_uuid
        if (self.datadir / "#clone" / "#replace_files").exists():
            (self.datadir / "auto.cnf").unlink(missing_ok=True)
        super().start(timeout)
        return self

    def options(self) -> dict[str, object]:
        spec = ClusterSpec(
            instances=3,
            flavor="mysql",
            replication=Replication(mode="semisync" if self.semisync else "async"),
        )
        opts: dict[str, object] = {
            "datadir": self._p(self.datadir),
            "socket": self._p(self.root / "mysqld.sock"),
            "pid-file": self._p(self.root / "mysqld.pid"),
            "log-error": self._p(self.error_log),
            "port": self.port,
            "bind-address": "127.0.0.1",
            "user": "root",
            "server-id": self.server_id,
            "mysqlx": "OFF",
            "secure_file_priv": "",
            "sync_binlog": 0,
            "innodb_flush_log_at_trx_commit": 2,
            "innodb_buffer_pool_size": "32M",
            "innodb_redo_log_capacity": "16M",
            "max_connections": 300,  # clients that retried during a hang (SIGSTOP) stay queued
            "replica_net_timeout": 3,  # the operator sets heartbeats of 1s; detect a hung source fast
            "host_cache_size": 0,
            # a module keeps dozens of servers up; native AIO would exhaust fs.aio-max-nr (io_setup
            # EAGAIN at start). Pods keep the default.
            "innodb_use_native_aio": "OFF",
        }
        plugins = []
        for key, value in server_settings(spec):
            if key == "plugin_load_add":  # once per plugin in my.cnf; one list on a command line
                plugins.append(value)
            elif key not in PATH_SETTINGS:
                assert key not in opts, f"{key} is both a test setting and an operator setting"
                opts[key] = value
        if plugins:
            opts["plugin_load_add"] = ";".join(plugins)
        if self.ssl_cert is not None:
            opts.update(
                {
                    "ssl_ca": self._p(self.ssl_ca),
                    "ssl_cert": self._p(self.ssl_cert),
                    "ssl_key": self._p(self.ssl_key),
                }
            )
        if self.require_secure_transport:
            opts["require_secure_transport"] = "ON"
        opts.update(self.extra)
        return opts

    def command(self) -> list[str]:
        # in a mount namespace of its own with the host's /etc/hosts bound over the image's empty
        # one, as the kubelet does in a Pod: a replica reaches its source by a name (`localhost`
        # in tests/integration/test_replication_tls.py), which the image alone cannot resolve
        bind = shlex.join(["mount", "--bind", "/etc/hosts", str(self.rootfs / "etc/hosts")])
        defaults = f"--defaults-file={self._p(self.option_file)}"
        run = shlex.join(["chroot", str(self.rootfs), "mysqld", defaults])
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", f"{bind} && exec {run}"]

    def write_options(self) -> None:
        self.option_file.write_text(server_option_file(self.options()).replace("[mariadbd]", "[mysqld]", 1))


class MySQLFactory(MariaDBFactory):
    """MySQL servers from one pristine data directory in the image's root; `close()` stops them."""

    flavor = Flavor.MYSQL
    server_class = MySQLServer

    def __init__(self, rootfs: Path | None = None):
        self.rootfs = rootfs or mysql_rootfs()
        (self.rootfs / "var/tmp").mkdir(parents=True, exist_ok=True)
        super().__init__(Path(tempfile.mkdtemp(prefix="mysql-test-", dir=self.rootfs / "var/tmp")))

    def server_kwargs(self) -> dict[str, object]:
        return {"rootfs": self.rootfs}

    def copy_pristine(self, datadir: Path) -> None:
        super().copy_pristine(datadir)
        (datadir / "auto.cnf").unlink(missing_ok=True)  # each server makes its own server_uuid

    def pristine(self) -> Path:
        if self._pristine is None:
            path = self.workdir / "pristine"
            pw = self.admin_password
            sql = [
                "SET SESSION sql_log_bin = 0;",
                "DROP USER IF EXISTS 'root'@'localhost';",
                f"CREATE USER '{ADMIN_USER}'@'127.0.0.1' IDENTIFIED BY '{pw}';",
                f"GRANT ALL PRIVILEGES ON *.* TO '{ADMIN_USER}'@'127.0.0.1' WITH GRANT OPTION;",
            ]
            for user, grants in (
                (OPERATOR_USER, accounts.operator_grants(Flavor.MYSQL, APP_DATABASE)),
                (BACKUP_USER, accounts.backup_grants(Flavor.MYSQL)),
                (SQL_USER, accounts.sql_grants(Flavor.MYSQL)),
            ):
                sql.append(f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{pw}';")
                sql += [g.grant_sql().replace("%s@%s", f"'{user}'@'127.0.0.1'") + ";" for g in grants]
            init = self.workdir / "init.sql"
            init.write_text("\n".join(sql) + "\n")
            proc = subprocess.run(
                [
                    "chroot",
                    str(self.rootfs),
                    "mysqld",
                    "--no-defaults",
                    "--initialize-insecure",
                    "--user=root",
                    f"--datadir={in_root(self.rootfs, path)}",
                    "--skip-log-bin",
                    f"--init-file={in_root(self.rootfs, init)}",
                    "--innodb-buffer-pool-size=32M",
                    "--innodb-redo-log-capacity=16M",
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if proc.returncode != 0:
                raise RuntimeError(
                    f"mysqld --initialize-insecure failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
                )
            init.unlink()
            self._pristine = path
        return self._pristine


@contextlib.contextmanager
def client_tools_sidecar(shared: Path, image: str = "mysql-tools") -> Iterator[subprocess.Popen]:
    """The backup/restore Jobs' client-tools sidecar (manifests.scripts.CLIENT_TOOLS_SH) run from
    a tool image's root with chroot (MySQL's: the server image has no mysqlbinlog, as the official
    one), serving the folder `shared`: bind-mounted at the same path inside the root, as the Pod's
    emptyDir is in both containers; the host's /etc/hosts is bound over the image's empty one, as
    the kubelet does in a Pod, and /proc is mounted, as in every container (mariadb-backup
    --prepare crashes without it)."""
    from mysql_operator.manifests.scripts import CLIENT_TOOLS_SH

    rootfs = mysql_rootfs(image)
    inside = rootfs / str(shared).lstrip("/")
    inside.mkdir(parents=True, exist_ok=True)
    mounts = []
    try:
        for src, dst, opts in (
            (shared, inside, "rbind"),  # with what is mounted below it
            (Path("/etc/hosts"), rootfs / "etc/hosts", "bind,ro"),
        ):
            subprocess.run(["mount", "-o", opts, str(src), str(dst)], check=True, capture_output=True)
            mounts.append(dst)
        subprocess.run(["mount", "-t", "proc", "proc", str(rootfs / "proc")], check=True, capture_output=True)
        mounts.append(rootfs / "proc")
        proc = subprocess.Popen(
            ["chroot", str(rootfs), "/bin/bash", "-c", CLIENT_TOOLS_SH, "client-tools.sh", str(shared)],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            yield proc
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    finally:
        for m in reversed(mounts):
            subprocess.run(["umount", "-l", str(m)], capture_output=True)
        with contextlib.suppress(OSError):
            inside.rmdir()  # the mount point made above (empty once unmounted)


@contextlib.contextmanager
def restarted_when_down(servers):
    """What a Pod's container does for its server: started again when it stopped (a server
    clone replaced the data of, without start.sh above it, shuts down)."""
    done = threading.Event()
    starts = dict.fromkeys((s.name for s in servers), 0)

    def watch():
        while not done.wait(0.2):
            for s in servers:
                if not s.alive:
                    s.start()
                    starts[s.name] += 1

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        yield starts
    finally:
        done.set()
        t.join(30)


if __name__ == "__main__":
    sys.exit(main(MySQLFactory))
