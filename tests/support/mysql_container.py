"""MySQL 8.4 servers in Docker containers (testcontainers) for the replication integration tests.

Only where a Docker engine answers: `docker_unavailable()` pings it through the Docker client
(a `docker` CLI without an engine does not count) and returns the reason to skip otherwise.

Each `MySQLGroup` creates its OWN user-defined Docker network and starts every server on it with
testcontainers' `MySqlContainer`. A server's address is its IP on that network, port 3306: the
same address serves the engine (on the Docker host: Linux routes to a bridge network's
containers) and the replicas (container to container), which is what `ReplicationEngine` needs -
it points replicas at the very address it observes. (Docker Desktop does not route from the host
to container IPs: there, run the tests inside a container attached to the same network.)

Server options are the operator's own MySQL settings (`manifests.config.server_settings`), minus
what cannot apply while the image's entrypoint initialises the data directory (read-only) or what
names paths of the operator's image (mysqlx socket). Once up, each server forgets the GTIDs the
entrypoint's initialisation wrote (`RESET BINARY LOGS AND GTIDS`, as the operator's bootstrap
writes nothing to the binary log) and is fenced persistently (`SET PERSIST super_read_only`), so
that a restarted server never comes back writable on its own - like the operator's my.cnf.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field

import pymysql

from mysql_operator.api.types import ClusterSpec
from mysql_operator.manifests.config import server_settings
from tests.support.wait import wait_for

IMAGE = "mysql:8.4"
PORT = 3306
ADMIN_USER = "root"  # the image's root@'%'; all privileges (the operator's account in these tests)
SKIPPED_SETTINGS = {"read_only", "super_read_only", "mysqlx_socket"}
DEFAULT_SOCKET = "/var/run/docker.sock"


def docker_unavailable() -> str | None:
    """None when a Docker engine answers a ping; otherwise why not, naming what is missing."""
    try:
        import docker  # installed with testcontainers
    except ImportError:
        return "no Docker engine client: the 'docker' Python package is missing (pip install -e '.[test]')"
    host = os.environ.get("DOCKER_HOST")
    try:
        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as e:  # noqa: BLE001 - any failure means: no engine to use
        if host:
            where = f"ping through DOCKER_HOST failed ({type(e).__name__})"
        elif not os.path.exists(DEFAULT_SOCKET):
            where = f"{DEFAULT_SOCKET} absent and DOCKER_HOST unset"
        else:
            where = f"{DEFAULT_SOCKET} present but no engine answers a ping ({type(e).__name__})"
        return f"no Docker engine: {where} - MySQL 8.4 runs only where Docker does"
    return None


def rsa_unavailable() -> str | None:
    """pymysql needs `cryptography` for caching_sha2_password (MySQL 8.4's default) without TLS."""
    try:
        import cryptography  # noqa: F401
    except ImportError:
        return (
            "the 'cryptography' package is missing: pymysql needs it to log in with "
            "caching_sha2_password (MySQL 8.4's default) - pip install -e '.[test]'"
        )
    return None


def server_options(server_id: int, report_host: str) -> list[str]:
    """mysqld command-line options: the operator's MySQL settings plus this server's identity."""
    spec = ClusterSpec(instances=3, flavor="mysql")
    opts = [
        f"--{k}={v}"
        for k, v in server_settings(spec)
        if k not in SKIPPED_SETTINGS and not k.startswith(("plugin_load", "rpl_semi_sync"))
    ]
    return opts + [f"--server_id={server_id}", f"--report_host={report_host}", f"--report_port={PORT}"]


@dataclass
class MySQLNode:
    name: str
    server_id: int
    container: object = field(repr=False)  # testcontainers MySqlContainer
    network_name: str = ""
    admin_password: str = field(default="", repr=False)
    host: str = ""
    port: int = PORT

    def refresh_address(self) -> str:
        wrapped = self.container.get_wrapped_container()
        wrapped.reload()
        self.host = wrapped.attrs["NetworkSettings"]["Networks"][self.network_name]["IPAddress"]
        return self.host

    def connect(
        self,
        user: str = ADMIN_USER,
        password: str | None = None,
        timeout: float = 5,
        database: str | None = None,
    ) -> pymysql.connections.Connection:
        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=user,
            password=self.admin_password if password is None else password,
            database=database,
            connect_timeout=timeout,
            read_timeout=timeout,
            write_timeout=timeout,
            autocommit=True,
        )

    def query(self, sql: str, args=None) -> list[tuple]:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        finally:
            conn.close()

    def kill9(self) -> None:
        """SIGKILL mysqld (PID 1 of the container: the entrypoint execs it) - a crash."""
        wrapped = self.container.get_wrapped_container()
        wrapped.kill(signal="SIGKILL")
        wait_for(
            lambda: (wrapped.reload() or wrapped.status) != "running",
            30,
            f"{self.name}'s container to stop after SIGKILL",
        )

    def logs(self, lines: int = 40) -> str:
        try:
            out = self.container.get_wrapped_container().logs(tail=lines)
            return out.decode(errors="replace")
        except Exception as e:  # noqa: BLE001 - best effort, for failure reports
            return f"(no logs: {type(e).__name__})"


class MySQLGroup:
    """Servers on one Docker network of their own; `close()` removes them and the network."""

    def __init__(self, image: str = IMAGE):
        from testcontainers.core.network import Network

        self.image = image
        self.admin_password = "pw-" + secrets.token_hex(12)
        self.network = Network()
        self.network.create()
        self.nodes: list[MySQLNode] = []

    @property
    def network_name(self) -> str:
        return self.network.name

    def create(self, n: int, prefix: str = "db") -> list[MySQLNode]:
        from testcontainers.community.mysql import MySqlContainer

        out = []
        for k in range(n):
            sid = len(self.nodes) + 1
            alias = f"{prefix}-{k}"
            container = (
                MySqlContainer(self.image, username="root", password=self.admin_password, dbname="mysql")
                .with_network(self.network)
                .with_network_aliases(alias)
                .with_command(server_options(sid, alias))
            )
            node = MySQLNode(alias, sid, container, self.network_name, self.admin_password)
            self.nodes.append(node)  # before start: close() removes it even if start fails
            container.start()  # waits for the entrypoint's "ready for connections" (twice)
            node.refresh_address()
            wait_for(
                lambda node=node: node.connect(timeout=2).close() or True,
                60,
                f"{alias} to accept connections at {node.host}:{PORT}",
            )
            node.query("RESET BINARY LOGS AND GTIDS")  # the image's init is no transaction of ours
            node.query("SET PERSIST super_read_only = ON")
            out.append(node)
        return out

    def logs_report(self, lines: int = 30) -> str:
        return "\n".join(
            f"--- {n.name} (server-id {n.server_id}, {n.host}:{n.port}) ---\n{n.logs(lines)}"
            for n in self.nodes
        )

    def close(self) -> None:
        for n in self.nodes:
            try:
                n.container.stop()  # stops and removes the container
            except Exception:  # noqa: BLE001 - keep removing the others
                pass
        try:
            self.network.remove()
        except Exception:  # noqa: BLE001
            pass
