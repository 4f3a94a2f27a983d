"""The server container's start.sh with MySQL 9.7 (run from the mysql image's root, as
tests/support/mysql.py runs its servers): what it does when the container is told to stop.

tests/integration/test_manifests_scripts.py runs the scripts with MariaDB on the host; MySQL's
branch needs the image's root.
"""

from __future__ import annotations

import os
import shlex
import signal
import threading

import pymysql
import pytest

from mysql_operator import manifests as m
from mysql_operator.api import parse
from mysql_operator.db import accounts
from mysql_operator.db.flavor import Flavor
from mysql_operator.db.instance import Instance
from tests.support.mariadb import ADMIN_USER
from tests.support.mysql import MySQLFactory, MySQLServer, mysql_unavailable
from tests.support.wait import wait_for

WRITERS = 20
FENCE_USER = "mysql-operator"  # start.sh logs in over the socket as the operator's account


class StartedByScript(MySQLServer):
    """A MySQL server run as the Pod runs it: start.sh (the container's PID 1) in the image's
    root, with the ConfigMap's script and this server's options as its my.cnf."""

    def write_options(self) -> None:
        super().write_options()
        config = self.root / "config"
        config.mkdir(exist_ok=True)
        c = parse(
            {"metadata": {"name": "db", "namespace": "prod"}, "spec": {"instances": 3, "flavor": "mysql"}}
        )
        (config / "start.sh").write_text(m.config_map(c)["data"]["start.sh"])
        (config / "my.cnf").write_text(self.option_file.read_text())

    def command(self) -> list[str]:
        bind = shlex.join(["mount", "--bind", "/etc/hosts", str(self.rootfs / "etc/hosts")])
        run = shlex.join(
            ["chroot", str(self.rootfs), "/bin/bash", self._p(self.root / "config" / "start.sh")]
        )
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", f"{bind} && exec {run}"]

    def script_environment(self, pod: str) -> dict[str, str]:
        return {
            "MYSQL_OPERATOR_FLAVOR": "mysql",
            "MYSQL_OPERATOR_DATA_ROOT": self._p(self.root),
            "MYSQL_OPERATOR_RUN_DIR": self._p(self.root / "run"),
            "MYSQL_OPERATOR_CONFIG_DIR": self._p(self.root / "config"),
            "MYSQL_OPERATOR_PORT": str(self.port),
            "POD_NAME": pod,  # its ordinal + 1 is the server_id
            "MYSQL_OPERATOR_USER": FENCE_USER,
            "MYSQL_OPERATOR_PASSWORD": self.admin_password,
        }


class ScriptFactory(MySQLFactory):
    server_class = StartedByScript


@pytest.fixture
def factory():
    why = mysql_unavailable()
    if why:
        pytest.skip(reason=f"no MySQL 9.7 server from the image's root: {why}")
    f = ScriptFactory()
    yield f
    f.close()


def test_a_commit_waiting_for_an_acknowledgement_is_never_answered_ok_when_the_container_stops(
    factory, monkeypatch
):
    """A stopping container never acknowledges a commit no replica has. The k8s fault campaign
    (MySQL seed 202, fixed by e2d75ee) lost 1 of 21,863 acknowledged writes on an old primary
    whose Pod a failover deleted while commits waited for an acknowledgement its cut-off replicas
    could not give; start.sh's TERM trap has since ended the clients' connections first
    (offline_mode, then KILL CONNECTION, as the operator's account over the socket). Here, with
    SIGTERM to start.sh alone (as the kubelet sends it to PID 1), 20 commits waiting behind a
    stopped replica, every client gets an error. This does not reproduce the campaign's loss:
    with the trap's fence removed MySQL 9.7's shutdown answered every one with error 2013 too
    (twice, 20 of 20); it guards the behaviour, the fence included."""
    primary, replica = factory.create(2, semisync=True, start=False)
    for server, pod in ((primary, "db-0"), (replica, "db-1")):
        for key, value in server.script_environment(pod).items():
            monkeypatch.setenv(key, value)
        server.start()
    script = primary.proc
    admin = primary.connect()
    with admin.cursor() as cur:
        cur.execute("SET GLOBAL super_read_only = OFF")  # a primary
        cur.execute("SET GLOBAL read_only = OFF")
        # the operator's account, as the Pod has it (its grants from db/accounts.py), at the
        # socket's host
        cur.execute(f"CREATE USER '{FENCE_USER}'@'localhost' IDENTIFIED BY %s", (primary.admin_password,))
        for g in accounts.operator_grants(Flavor.MYSQL, "app"):
            cur.execute(g.grant_sql().replace("%s@%s", f"'{FENCE_USER}'@'localhost'"))
        cur.execute("CREATE USER 'client'@'127.0.0.1' IDENTIFIED BY 'client-pw'")
        cur.execute("CREATE DATABASE app")
        cur.execute("CREATE TABLE app.t (id INT PRIMARY KEY)")
        cur.execute("GRANT INSERT ON app.* TO 'client'@'127.0.0.1'")
        cur.execute("SET GLOBAL rpl_semi_sync_source_timeout = 4294967295")  # never falls back
        cur.execute("SET GLOBAL rpl_semi_sync_source_enabled = ON")
    r = Instance("127.0.0.1", replica.port, ADMIN_USER, replica.admin_password, name="db-1")
    r.set_semisync_replica(True, restart_io=False)
    r.point_at("127.0.0.1", primary.port, ADMIN_USER, primary.admin_password)
    wait_for(lambda: _status(admin, "Rpl_semi_sync_source_clients") == "1", 30, "db-1 acknowledging")
    replica.sigstop()  # its acknowledgements stop coming (a replica cut off)
    outcome: list[str] = []

    def write(k: int) -> None:
        conn = primary.connect("client", "client-pw")  # a client of the application
        try:
            with conn.cursor() as cur:
                cur.execute("INSERT INTO app.t VALUES (%s)", (k,))
                conn.commit()
            outcome.append("acknowledged")
        except pymysql.err.OperationalError as err:
            outcome.append(f"error {err.args[0]}")

    writers = [threading.Thread(target=write, args=(k,)) for k in range(WRITERS)]
    for w in writers:
        w.start()

    def waiting() -> bool:  # one commit waits for the acknowledgement, the others behind it
        with admin.cursor() as cur:
            cur.execute(
                "SELECT SUM(STATE LIKE 'Waiting for semi-sync ACK%'), SUM(COMMAND = 'Query')"
                " FROM information_schema.PROCESSLIST WHERE USER = 'client'"
            )
            acks, busy = cur.fetchone()
            return acks is not None and acks >= 1 and busy == WRITERS

    wait_for(waiting, 30, "every client's commit waiting")
    admin.close()
    os.kill(script.pid, signal.SIGTERM)
    for w in writers:
        w.join(60)
    script.wait(60)
    replica.sigcont()
    assert len(outcome) == WRITERS and all(o.startswith("error") for o in outcome), outcome


def _status(conn, name: str) -> str | None:
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE %s", (name,))
        row = cur.fetchone()
    return row[1] if row else None
