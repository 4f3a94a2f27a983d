"""The whole product on the local one-node cluster: the operator runs on the host (as a process,
authenticated as a ServiceAccount with the declared RBAC) and drives real MariaDB Pods.

A 3-instance cluster becomes Ready; writes go through the -rw Service and reads through the -ro
Service from the host (kube-proxy makes ClusterIPs reachable); deleting the primary Pod fails over
with no acknowledged write lost; editing spec.primary (via `mysql-operator switchover`) switches over.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pymysql
import pytest
import yaml
from kubernetes import client

from mysql_operator import manifests as m
from mysql_operator.api import GROUP, VERSION
from mysql_operator.k8s.rbac import CLUSTER_SCOPE_RULES, namespaced_rules
from e2e.conftest import chart_operator_paused
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[1]
PLURAL = "mysqlclusters"
NAME = "shop"


def _install_crds(api) -> None:
    """Create or update the CRDs (cluster-scoped, shared: left installed for other tests)."""
    ext = client.ApiextensionsV1Api(api)
    for path in sorted((REPO / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        name = crd["metadata"]["name"]
        try:
            ext.create_custom_resource_definition(crd)
        except client.ApiException as e:
            if e.status != 409:
                raise
            crd["metadata"]["resourceVersion"] = ext.read_custom_resource_definition(name).metadata.resource_version
            ext.replace_custom_resource_definition(name, crd)
        wait_for(lambda: any(c.type == "Established" and c.status == "True" for c in
                             ext.read_custom_resource_definition(name).status.conditions or []),
                 30, f"CRD {name} established")


def _sa_kubeconfig(api, admin_kubeconfig: str, ns: str, sa: str, out: Path) -> Path:
    admin = yaml.safe_load(Path(admin_kubeconfig).read_text())
    cluster = admin["clusters"][0]["cluster"]
    token = client.CoreV1Api(api).create_namespaced_service_account_token(
        sa, ns, {"spec": {"expirationSeconds": 7200}}).status.token
    kc = {"apiVersion": "v1", "kind": "Config",
          "clusters": [{"name": "local", "cluster": cluster}],
          "users": [{"name": sa, "user": {"token": token}}],
          "contexts": [{"name": sa, "context": {"cluster": "local", "user": sa, "namespace": ns}}],
          "current-context": sa}
    out.write_text(yaml.safe_dump(kc))
    out.chmod(0o600)
    return out


@pytest.fixture
def operator_ns(local_cluster, kube_namespace, tmp_path):
    api = local_cluster.api_client()
    ns = kube_namespace
    _install_crds(api)
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(ns, {"metadata": {"name": "mysql-operator"}})
    rbac.create_namespaced_role(ns, {"metadata": {"name": "mysql-operator"}, "rules": namespaced_rules()})
    subject = [{"kind": "ServiceAccount", "name": "mysql-operator", "namespace": ns}]
    rbac.create_namespaced_role_binding(ns, {
        "metadata": {"name": "mysql-operator"}, "subjects": subject,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "mysql-operator"}})
    rbac.create_cluster_role({"metadata": {"name": f"mysql-operator-{ns}"}, "rules": CLUSTER_SCOPE_RULES})
    rbac.create_cluster_role_binding({
        "metadata": {"name": f"mysql-operator-{ns}"}, "subjects": subject,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": f"mysql-operator-{ns}"}})
    kubeconfig = _sa_kubeconfig(api, local_cluster.kubeconfig, ns, "mysql-operator", tmp_path / "sa.conf")
    log_path = tmp_path / "operator.log"
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    with chart_operator_paused(local_cluster):  # one operator per namespace
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "mysql_operator.cli", "run", "--namespace", ns, "--kubeconfig",
                 str(kubeconfig), "--resolver", "ip", "--loop-seconds", "1", "--resync-seconds", "30"],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True)
        yield ns, api, log_path, proc
        alive = proc.poll() is None
        # delete the cluster while its operator runs: it removes kopf's finalizer
        objs = client.CustomObjectsApi(api)
        try:
            objs.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, NAME)
            wait_for(lambda: not objs.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"],
                     60, "the MySQLCluster to be deleted")
        except client.ApiException:
            pass
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print(f"\n----- operator log (tail) -----\n{log_path.read_text(errors='replace')[-8000:]}", file=sys.stderr)
    rbac.delete_cluster_role_binding(f"mysql-operator-{ns}")
    rbac.delete_cluster_role(f"mysql-operator-{ns}")
    assert alive, "the operator exited during the test"


def _status(api, ns) -> dict:
    return client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, NAME).get(
        "status") or {}


def _connect(host, user, password, database=None, timeout=2):
    return pymysql.connect(host=host, port=3306, user=user, password=password, database=database,
                           connect_timeout=timeout, read_timeout=5, write_timeout=5, autocommit=True)


def _query(host, user, password, sql, database=None):
    conn = _connect(host, user, password, database)
    with conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


class Writer(threading.Thread):
    """Inserts numbered rows through the -rw Service; remembers which commits were acknowledged."""

    def __init__(self, host, user, password):
        super().__init__(daemon=True)
        self.host, self.user, self.password = host, user, password
        self.acked: list[int] = []
        self.failures = 0
        self.stop = threading.Event()

    def run(self):
        n, conn = 0, None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = _connect(self.host, self.user, self.password, "app", timeout=1)
                n += 1
                with conn.cursor() as cur:
                    cur.execute("INSERT INTO app.writes (id) VALUES (%s)", (n,))
                self.acked.append(n)
            except pymysql.MySQLError:
                self.failures += 1
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001 - already broken
                        pass
                conn = None
                self.stop.wait(0.2)


def test_operator_runs_a_replicated_mariadb_cluster(operator_ns, local_cluster):
    ns, api, log_path, proc = operator_ns
    objs, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    spec = {"flavor": "mariadb", "image": "localhost/mariadb:10.11", "imagePullPolicy": "Never",
            "instances": 3, "database": {"name": "app", "user": "app"},
            "storage": {"size": "256Mi", "storageClassName": "standard"},
            "replication": {"failover": {"delaySeconds": 2}}}
    t0 = time.monotonic()
    objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "MySQLCluster", "metadata": {"name": NAME}, "spec": spec})
    st = wait_for(lambda: (s := _status(api, ns)).get("phase") == "Ready" and s, 420, "phase Ready")
    print(f"\n3-instance cluster Ready {time.monotonic() - t0:.1f}s after creation; primary {st['currentPrimary']}")
    # (usually shop-0; with the 2 s failover delay set here a loaded node may already have failed
    # over once: whichever it is, exactly one primary and it is the recorded one)
    primary = st["currentPrimary"]
    assert st["readyInstances"] == 3
    assert {i["name"]: i["role"] for i in st["instances"]} == {
        f"{NAME}-{n}": "primary" if f"{NAME}-{n}" == primary else "replica" for n in (0, 1, 2)}

    secret = core.read_namespaced_secret(f"{NAME}-credentials", ns).data
    app_pw = base64.b64decode(secret[m.APP_PASSWORD_KEY]).decode()
    rw = core.read_namespaced_service(f"{NAME}-rw", ns).spec.cluster_ip
    ro = core.read_namespaced_service(f"{NAME}-ro", ns).spec.cluster_ip

    # writes via -rw, reads via -ro (a read-only replica), from the host
    # the Service's endpoints follow the role label through the endpoint controller and kube-proxy
    wait_for(lambda: _query(rw, "app", app_pw, "SELECT 1"), 60, "-rw answering")
    _query(rw, "app", app_pw, "CREATE TABLE app.writes (id INT PRIMARY KEY)")
    _query(rw, "app", app_pw, "INSERT INTO app.writes VALUES (0)")
    assert _query(rw, "app", app_pw, "SELECT @@hostname, @@global.read_only")[0] == (primary, 0)
    seen = []

    def replica_read():
        conn = _connect(ro, "app", app_pw)  # one connection (one server), two statements:
        with conn, conn.cursor() as cur:  # MariaDB 10.11 answers @@read_only=0 next to COUNT(*)
            cur.execute("SELECT @@hostname, @@global.read_only")
            host, read_only = cur.fetchone()
            cur.execute("SELECT COUNT(*) FROM app.writes")
            row = (host, read_only, cur.fetchone()[0])
        seen.append((round(time.monotonic() - t0, 2), *row))
        return row[2] == 1 and row[1] == 1 and row
    try:
        host, read_only, count = wait_for(replica_read, 60, "the row readable through -ro")
    finally:
        print(f"-ro reads (seconds since creation, host, read_only, rows): {seen[:5]} ... {seen[-3:]}")
    writable_replica_reads = [s for s in seen if s[2] != 1]
    print(f"-ro reads until the row arrived: {seen}")
    assert host != primary
    assert not writable_replica_reads, f"-ro answered from a writable server: {writable_replica_reads}"
    with pytest.raises(pymysql.MySQLError):
        _query(ro, "app", app_pw, "INSERT INTO app.writes VALUES (-1)")

    # failover: delete the primary Pod under write load
    writer = Writer(rw, "app", app_pw)
    writer.start()
    wait_for(lambda: len(writer.acked) >= 50, 60, "50 acknowledged writes before the failure")
    old = st["currentPrimary"]
    t1 = time.monotonic()
    core.delete_namespaced_pod(old, ns, grace_period_seconds=0)
    st = wait_for(lambda: (s := _status(api, ns)).get("currentPrimary") not in (None, old) and s,
                  120, "a new primary recorded")
    acked_at_failure = len(writer.acked)
    wait_for(lambda: len(writer.acked) > acked_at_failure + 20, 120, "writes accepted by the new primary")
    print(f"failover: {old} -> {st['currentPrimary']}, writes accepted again "
          f"{time.monotonic() - t1:.1f}s after the delete")
    writer.stop.set()
    writer.join(10)
    new = st["currentPrimary"]
    rows = {r[0] for r in _query(rw, "app", app_pw, "SELECT id FROM app.writes")}
    lost = [n for n in writer.acked if n not in rows]
    print(f"{len(writer.acked)} writes acknowledged, {writer.failures} failed attempts, {len(lost)} lost")
    assert not lost, f"acknowledged writes lost: {lost[:20]}"
    assert _query(rw, "app", app_pw, "SELECT @@hostname")[0][0] == new

    # the old primary comes back as a read-only replica; the cluster is Ready again
    st = wait_for(lambda: (s := _status(api, ns)).get("phase") == "Ready" and s, 300, "Ready after failover")
    roles = {i["name"]: i["role"] for i in st["instances"]}
    assert roles[old] == "replica" and roles[new] == "primary"
    events = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={NAME}").items
    assert any(e.reason == "Failover" for e in events)

    # switchover by editing spec.primary (through the CLI)
    target = next(n for n in (0, 1, 2) if f"{NAME}-{n}" != new)
    r = subprocess.run([sys.executable, "-m", "mysql_operator.cli", "switchover", NAME, "--to", str(target),
                        "-n", ns, "--kubeconfig", local_cluster.kubeconfig],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    t2 = time.monotonic()
    def switched():
        s = _status(api, ns)
        roles = {i["name"]: i["role"] for i in s.get("instances") or []}
        want = {f"{NAME}-{n}": "primary" if n == target else "replica" for n in (0, 1, 2)}
        return s.get("phase") == "Ready" and s.get("currentPrimary") == f"{NAME}-{target}" \
            and roles == want and s
    st = wait_for(switched, 120, "switchover done, roles moved and Ready")
    print(f"switchover {new} -> {NAME}-{target} done (Ready) in {time.monotonic() - t2:.1f}s")
    host = wait_for(lambda: _query(rw, "app", app_pw, "SELECT @@hostname")[0][0] == f"{NAME}-{target}",
                    30, "-rw routes to the new primary")
    assert host
    assert _query(rw, "app", app_pw, "SELECT COUNT(*) FROM app.writes")[0][0] >= len(writer.acked)
    out = subprocess.run([sys.executable, "-m", "mysql_operator.cli", "status", NAME, "-n", ns,
                          "--kubeconfig", local_cluster.kubeconfig], capture_output=True, text=True, cwd=REPO)
    print(out.stdout)
    assert f"phase Ready, primary {NAME}-{target}" in out.stdout

    log = log_path.read_text(errors="replace")
    assert "orbidden" not in log
    for pw in (base64.b64decode(v).decode() for v in secret.values()):
        assert pw not in log
