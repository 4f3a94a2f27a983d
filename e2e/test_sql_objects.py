"""Issue 18 on the local cluster, with the operator installed by its chart: a MySQLDatabase, a
read-write and a read-only MySQLUser with their MySQLGrants on a 2-instance MySQL cluster under a
write load. The read-only account cannot write; the read-write password rotated through its Secret
(the old one refused, the new one accepted) while that account itself writes, without one of its
writes failing; the primary hung until a replica is promoted, then a
grant changed and converged through the new primary; the read-write user deleted (it no longer
logs in) while the database and its rows remain. Measured: apply -> every object Ready, a spec or
Secret change -> applied on the server."""

from __future__ import annotations

import base64
import time

import pymysql
import pytest
from kubernetes import client

from e2e.helpers import (
    GROUP,
    VERSION,
    Cluster,
    cluster_spec,
    connect,
    create_writes_table,
    lost_rows,
    query,
    record,
    signal_server,
    writer_to,
)
from tests.support.wait import wait_for
from tests.support.writer import Writer

pytestmark = pytest.mark.cluster
DENIED = {1044, 1045, 1142, 1227}
PLURALS = {"MySQLDatabase": "mysqldatabases", "MySQLUser": "mysqlusers", "MySQLGrant": "mysqlgrants"}


def apply(c: Cluster, kind: str, name: str, spec: dict) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"clusterRef": {"name": c.name}, **spec},
    }
    try:
        c.objs.create_namespaced_custom_object(GROUP, VERSION, c.namespace, PLURALS[kind], body)
    except client.ApiException as e:
        if e.status != 409:
            raise
        c.objs.patch_namespaced_custom_object(
            GROUP, VERSION, c.namespace, PLURALS[kind], name, {"spec": body["spec"]}
        )


def ready(c: Cluster, kind: str, name: str) -> bool:
    """Ready=True for the object's current generation."""
    try:
        body = c.objs.get_namespaced_custom_object(GROUP, VERSION, c.namespace, PLURALS[kind], name)
    except client.ApiException:
        return False
    st = body.get("status") or {}
    cond = next((x for x in st.get("conditions") or [] if x["type"] == "Ready"), {})
    return cond.get("status") == "True" and st.get("observedGeneration") == body["metadata"]["generation"]


def describe(c: Cluster) -> str:
    lines = [c.describe()]
    for kind, plural in PLURALS.items():
        for o in c.objs.list_namespaced_custom_object(GROUP, VERSION, c.namespace, plural)["items"]:
            conds = (o.get("status") or {}).get("conditions") or []
            lines.append(f"{kind} {o['metadata']['name']}: {[(x['reason'], x['message']) for x in conds]}")
    return "\n".join(lines)


def outcome(host: str, user: str, password: str, sql: str, database: str | None = "shop") -> int | None:
    """None if `user` may run `sql` through `host`, else the server's error number."""
    try:
        conn = connect(host, user, password, database)
    except pymysql.err.MySQLError as e:
        return e.args[0]
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
        return None
    except pymysql.err.MySQLError as e:
        return e.args[0]
    finally:
        conn.close()


def put_password(c: Cluster, secret: str, password: str) -> None:
    data = {"password": base64.b64encode(password.encode()).decode()}
    try:
        c.core.create_namespaced_secret(c.namespace, {"metadata": {"name": secret}, "data": data})
    except client.ApiException as e:
        if e.status != 409:
            raise
        c.core.patch_namespaced_secret(secret, c.namespace, {"data": data})


@pytest.mark.causes("Failover", "Reseed")  # the primary hung (SIGSTOP) under writes, then resumed
def test_databases_users_and_grants_converge_through_rotation_failover_and_deletion(
    local_cluster, scenario_namespace
):
    c = Cluster(local_cluster.api_client(), scenario_namespace, "sqlobj")
    c.create(cluster_spec(2, "mysql"))
    c.wait_ready(300, instances=2, primary="sqlobj-0")
    rw_ip, app_pw = create_writes_table(c)
    load = writer_to(rw_ip, "app", app_pw)
    load.start()
    try:
        wait_for(lambda: len(load.acked) >= 20, 60, "20 acknowledged writes")
        put_password(c, "shop-writer", "writer-first-pw")
        started = time.monotonic()
        apply(c, "MySQLDatabase", "shop", {"name": "shop", "collation": "utf8mb4_bin"})
        apply(
            c,
            "MySQLUser",
            "writer",
            {"name": "writer", "passwordSecretKeyRef": {"name": "shop-writer", "key": "password"}},
        )
        apply(c, "MySQLUser", "reader", {"name": "reader"})
        writer_grant = {
            "user": "writer",
            "database": "shop",
            "privileges": ["SELECT", "INSERT", "CREATE", "DELETE"],
        }
        apply(c, "MySQLGrant", "writer", writer_grant)
        apply(c, "MySQLGrant", "reader", {"user": "reader", "database": "shop", "privileges": ["SELECT"]})
        names = [("MySQLDatabase", "shop"), ("MySQLUser", "writer"), ("MySQLUser", "reader")]
        names += [("MySQLGrant", "writer"), ("MySQLGrant", "reader")]
        wait_for(
            lambda: all(ready(c, k, n) for k, n in names),
            120,
            "every object Ready",
            describe=lambda: describe(c),
        )
        record("5 SQL objects applied -> all Ready (mysql)", time.monotonic() - started, scenario="18")

        reader_pw = c.password("password", secret="reader-mysql-password")
        assert outcome(rw_ip, "writer", "writer-first-pw", "CREATE TABLE t (id INT PRIMARY KEY)") is None
        assert outcome(rw_ip, "writer", "writer-first-pw", "INSERT INTO t VALUES (1)") is None
        assert outcome(rw_ip, "reader", reader_pw, "SELECT COUNT(*) FROM t") is None
        assert outcome(rw_ip, "reader", reader_pw, "INSERT INTO t VALUES (2)") in DENIED
        ro_ip = c.service_ip("ro")
        wait_for(
            lambda: outcome(ro_ip, "reader", reader_pw, "SELECT * FROM t WHERE id = 1") is None, 30, "-ro"
        )

        # a spec change: applied within about a second (the watch wakes the cluster's pass)
        started = time.monotonic()
        apply(
            c,
            "MySQLGrant",
            "reader",
            {"user": "reader", "database": "shop", "privileges": ["SELECT", "SHOW VIEW"]},
        )
        wait_for(
            lambda: ready(c, "MySQLGrant", "reader"), 60, "SHOW VIEW granted", describe=lambda: describe(c)
        )
        record("MySQLGrant spec changed -> applied (mysql)", time.monotonic() - started, scenario="18")
        assert outcome(rw_ip, "reader", reader_pw, "INSERT INTO t VALUES (2)") in DENIED

        # the read-write password rotated through its Secret, under the write load and under the
        # rotated account's own: an application writing as `writer` with the password its Secret
        # held when it connected keeps its session (sessions open before ALTER USER stay)
        assert outcome(rw_ip, "writer", "writer-first-pw", "CREATE TABLE w (id INT PRIMARY KEY)") is None
        own = Writer(
            lambda _: connect(rw_ip, "writer", "writer-first-pw", "shop", timeout=1),
            "INSERT INTO shop.w (id) VALUES (%s)",
            pause=0.05,
        )
        own.start()
        try:
            wait_for(lambda: len(own.acked) >= 20, 60, "20 writes as writer")
            started = time.monotonic()
            put_password(c, "shop-writer", "writer-second-pw")
            wait_for(
                lambda: outcome(rw_ip, "writer", "writer-second-pw", "SELECT 1") is None,
                60,
                "the new password accepted",
            )
            record(
                "password Secret changed -> new password accepted (mysql)",
                time.monotonic() - started,
                scenario="18",
            )
            assert outcome(rw_ip, "writer", "writer-first-pw", "SELECT 1") == 1045
            rotated_at = len(own.acked)
            wait_for(lambda: len(own.acked) >= rotated_at + 20, 60, "20 more writes in the open session")
        finally:
            own.stop()
        assert own.failures == 0, f"{own.failures} writes as writer failed across the rotation"
        kept = {r[0] for r in query(rw_ip, "writer", "writer-second-pw", "SELECT id FROM shop.w")}
        assert [n for n in own.ids if n not in kept] == [], "a write acknowledged to writer is missing"

        # the primary hangs: a replica is promoted; a grant changed meanwhile converges through it
        old = c.status()["currentPrimary"]
        hung = signal_server(local_cluster, c, old, "SIGSTOP")
        try:
            wait_for(
                lambda: c.status().get("currentPrimary") not in (None, old),
                60,
                "a failover",
                describe=c.describe,
            )
            started = time.monotonic()
            apply(c, "MySQLGrant", "writer", {**writer_grant, "privileges": ["SELECT", "INSERT", "CREATE"]})
            wait_for(
                lambda: ready(c, "MySQLGrant", "writer"),
                60,
                "the narrower grant applied",
                describe=lambda: describe(c),
            )
            record(
                "grant changed after a failover -> applied on the new primary (mysql)",
                time.monotonic() - started,
                scenario="18",
            )
            new_rw = c.service_ip("rw")
            wait_for(
                lambda: outcome(new_rw, "writer", "writer-second-pw", "INSERT INTO t VALUES (3)") is None,
                60,
                "the writer writing through the new primary",
            )
            assert outcome(new_rw, "writer", "writer-second-pw", "DELETE FROM t") in DENIED
        finally:
            signal_server(local_cluster, c, old, "SIGCONT", hung)
        wait_for(
            lambda: all(ready(c, k, n) for k, n in names),
            120,
            "everything still Ready",
            describe=lambda: describe(c),
        )

        # deleting the user: it no longer logs in; the database and its rows stay
        started = time.monotonic()
        c.objs.delete_namespaced_custom_object(GROUP, VERSION, c.namespace, "mysqlusers", "writer")

        def user_gone() -> bool:
            try:
                c.objs.get_namespaced_custom_object(GROUP, VERSION, c.namespace, "mysqlusers", "writer")
                return False
            except client.ApiException as e:
                return e.status == 404

        wait_for(user_gone, 60, "the MySQLUser deleted (its finalizer removed)", describe=lambda: describe(c))
        record("MySQLUser deleted -> account dropped (mysql)", time.monotonic() - started, scenario="18")
        assert outcome(rw_ip, "writer", "writer-second-pw", "SELECT 1") == 1045
        rows = connect(rw_ip, "reader", reader_pw, "shop")
        with rows, rows.cursor() as cur:
            cur.execute("SELECT id FROM t ORDER BY id")
            assert [r[0] for r in cur.fetchall()] == [1, 3]
        c.objs.delete_namespaced_custom_object(GROUP, VERSION, c.namespace, "mysqldatabases", "shop")
        assert outcome(rw_ip, "reader", reader_pw, "SELECT COUNT(*) FROM t") is None  # cleanupPolicy Skip
    finally:
        load.stop()
    assert lost_rows(c.service_ip("rw"), app_pw, load) == []
