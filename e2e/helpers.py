"""Shared by the e2e scenarios: SQL from the host, a write load with acknowledged-row accounting,
one MySQLCluster seen through the API, kubectl, namespaces that clean up after themselves, and the
timings the scenarios measure (printed as a table at the end of the session)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pymysql
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from mysql_operator import __version__
from mysql_operator.manifests import EXPORTER_IMAGE as EXPORTER_IMAGE_LOCAL
from mysql_operator.manifests.common import TOOLS_REPOSITORY
from tests.support.cluster import PULL_SECRET, registry_ref
from tests.support.crds import apply_crds, project_crds
from tests.support.wait import wait_for
from tests.support.writer import Writer

GROUP, VERSION = "mysql.operator.dev", "v1alpha1"
CLUSTERS, BACKUPS = "mysqlclusters", "mysqlbackups"
# the images of hack/build-images.sh as the registry beside the cluster has them: pulled with
# the pull Secret every e2e namespace gets (tests/support/cluster.py, PULL_SECRET)
IMAGE = registry_ref("localhost/mariadb:10.11")
IMAGES = {"mariadb": IMAGE, "mysql": registry_ref("localhost/mysql:9.7")}
MARIADB_11_8 = registry_ref("localhost/mariadb:11.8")
OPERATOR_IMAGE = registry_ref(f"localhost/mysql-operator:{__version__}")
EXPORTER_IMAGE = registry_ref(EXPORTER_IMAGE_LOCAL)  # the metrics sidecar's (hack/build-images.sh exporter)
TOOLS_IMAGE = registry_ref(TOOLS_REPOSITORY)  # the Jobs' client tools (hack/build-images.sh *-tools), no tag
PULL = {"imagePullPolicy": "Always", "imagePullSecrets": [{"name": PULL_SECRET}]}
FLAVORS = tuple(IMAGES)
REPO = Path(__file__).resolve().parents[1]
TIMINGS_FILE = REPO / "artifacts" / "e2e" / "timings.json"


# ------------------------------------------------------------------------------------------ SQL
def connect(host, user, password, database=None, timeout=2, tls=None):
    """`tls`: an ssl.SSLContext (TLS, verified as it says), None for plaintext (pymysql would
    otherwise use TLS unverified with a server that offers it)."""
    return pymysql.connect(
        host=host,
        port=3306,
        user=user,
        password=password,
        database=database,
        connect_timeout=timeout,
        read_timeout=5,
        write_timeout=5,
        autocommit=True,
        ssl=tls,
        ssl_disabled=tls is None,
    )


def query(host, user, password, sql, database=None, args=None, tls=None):
    conn = connect(host, user, password, database, tls=tls)
    with conn, conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def try_query(host, user, password, sql, database=None):
    """The rows, or None while the server (or the Service in front of it) does not answer."""
    try:
        return query(host, user, password, sql, database)
    except pymysql.MySQLError:
        return None


def replica_state(host, user, password, table="app.writes"):
    """(hostname, read_only, rows in table) over one connection, or None while it does not answer.
    Two statements: MariaDB 10.11 answers @@read_only=0 when selected next to COUNT(*)."""
    try:
        conn = connect(host, user, password)
        with conn, conn.cursor() as cur:
            cur.execute("SELECT @@hostname, @@global.read_only")
            name, read_only = cur.fetchone()
            cur.execute(f"SELECT COUNT(*) FROM {table}")
            return name, read_only, cur.fetchone()[0]
    except pymysql.MySQLError:
        return None


def writer_to(host, user, password, tls=None) -> Writer:
    """Numbered rows into app.writes through one address (a Service); `ids` acknowledged."""
    return Writer(
        lambda _: connect(host, user, password, "app", timeout=1, tls=tls),
        "INSERT INTO app.writes (id) VALUES (%s)",
        pause=0.2,
    )


# ------------------------------------------------------------------------------------------ cluster
def cluster_spec(instances: int = 3, flavor: str = "mariadb", **extra: Any) -> dict:
    spec = {
        "flavor": flavor,
        "image": IMAGES[flavor],
        **PULL,  # Always: a rebuilt image pushed under the same tag is the one that runs
        "instances": instances,
        "database": {"name": "app", "user": "app"},
        "storage": {"size": "1Gi", "storageClassName": "standard"},
        "replication": {"failover": {"delaySeconds": 2}},
    }
    spec.update(extra)
    return spec


@dataclass
class Cluster:
    """One MySQLCluster as a user sees it: status, Services, the generated Secret, its Pods."""

    api: Any
    namespace: str
    name: str

    @property
    def objs(self):
        return client.CustomObjectsApi(self.api)

    @property
    def core(self):
        return client.CoreV1Api(self.api)

    def create(self, spec: dict) -> "Cluster":
        self.objs.create_namespaced_custom_object(
            GROUP,
            VERSION,
            self.namespace,
            CLUSTERS,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "MySQLCluster",
                "metadata": {"name": self.name},
                "spec": spec,
            },
        )
        return self

    def body(self) -> dict:
        return self.objs.get_namespaced_custom_object(GROUP, VERSION, self.namespace, CLUSTERS, self.name)

    def status(self) -> dict:
        return self.body().get("status") or {}

    def patch_spec(self, spec: dict) -> None:
        self.objs.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, CLUSTERS, self.name, {"spec": spec}
        )

    def wait_ready(
        self,
        timeout: float,
        what: str = "phase Ready",
        instances: int | None = None,
        primary: str | None = None,
    ) -> dict:
        """Ready for the current generation (and with that many ready instances / that primary)."""

        def ready():
            b = self.body()
            s = b.get("status") or {}
            ok = (
                s.get("phase") == "Ready"
                and s.get("observedGeneration") == b["metadata"].get("generation")
                and (instances is None or s.get("readyInstances") == instances)
                and (primary is None or s.get("currentPrimary") == primary)
            )
            return ok and s

        return wait_for(ready, timeout, f"{self.name}: {what}", describe=self.describe)

    def describe(self) -> str:
        """What a person would look at first: status, instances, the latest Events."""
        s = self.status()
        lines = [
            f"{self.name}: phase {s.get('phase')}, primary {s.get('currentPrimary')}, "
            f"primarySince {s.get('primarySince')}"
        ]
        lines += [
            f"  {c.get('type')}={c.get('status')} {c.get('reason')}: {c.get('message', '')}"
            for c in s.get("conditions") or []
        ]
        lines += [f"  {i}" for i in s.get("instances") or []]
        events = sorted(self.events(), key=lambda e: str(e.last_timestamp or e.event_time or ""))
        lines += [f"  event {e.type} {e.reason} x{e.count or 1}: {e.message}" for e in events[-12:]]
        return "\n".join(lines)

    def pod(self, ordinal_or_name) -> Any:
        name = ordinal_or_name if isinstance(ordinal_or_name, str) else f"{self.name}-{ordinal_or_name}"
        return self.core.read_namespaced_pod(name, self.namespace)

    def pods(self) -> list:
        """The server Pods (not the Pods of its backup, restore or delete Jobs)."""
        return self.core.list_namespaced_pod(
            self.namespace,
            label_selector=f"app.kubernetes.io/instance={self.name},app.kubernetes.io/component=database",
        ).items

    def password(self, key: str = "app-password", secret: str | None = None) -> str:
        data = self.core.read_namespaced_secret(secret or f"{self.name}-credentials", self.namespace).data
        return base64.b64decode(data[key]).decode()

    def service_ip(self, suffix: str) -> str:
        return self.core.read_namespaced_service(f"{self.name}-{suffix}", self.namespace).spec.cluster_ip

    def events(self, reason: str | None = None) -> list:
        items = self.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={self.name}"
        ).items
        return [e for e in items if reason is None or e.reason == reason]

    def roles(self) -> dict[str, str]:
        return {i["name"]: i["role"] for i in self.status().get("instances") or []}


def _container_id(c: Cluster, pod: str) -> str | None:
    """The id of the mysqld container of one of the cluster's Pods; None when there is no such Pod
    or container (deleted, not started yet)."""
    try:
        statuses = c.pod(pod).status.container_statuses or []
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    status = next((s for s in statuses if s.name == "mysqld" and s.container_id), None)
    return status.container_id.split("://", 1)[1] if status else None


def _ctr_task(
    local_cluster, c: Cluster, pod: str, *args: str, timeout: float = 30, cid: str | None = None
) -> subprocess.CompletedProcess:
    """`ctr tasks <args...>` on the mysqld container of one of the cluster's Pods (or container
    `cid`); `{id}` in args stands for that container's id."""
    cid = cid or _container_id(c, pod)
    assert cid, f"{pod} has no mysqld container"
    return subprocess.run(
        ["ctr", "--address", local_cluster.containerd_socket, "-n", "k8s.io", "tasks"]
        + [cid if a == "{id}" else a for a in args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def signal_server(
    local_cluster, c: Cluster, pod: str, sig: str, containers: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Send `sig` to every process of the mysqld container of one of the cluster's Pods (what a
    crash, a kill or a hang does to it; the kubelet sees it as the container's own doing): the
    server and start.sh, which supervises it. The processes are listed by containerd and signalled
    from here: `ctr tasks kill --all` freezes the container's cgroup first, and that once hung
    past 30 s on a SIGSTOPped server (CI, SIGKILL after a SIGSTOP). See signal_servers for
    `containers` and what is returned."""
    return signal_servers(local_cluster, c, [pod], sig, containers)


def signal_servers(
    local_cluster, c: Cluster, pods: list[str], sig: str, containers: Mapping[str, str] | None = None
) -> dict[str, str]:
    """`signal_server` for several Pods at one instant: every process is listed first (a containerd
    call each), then all are signalled in one loop, so no observation of the operator falls
    between them (it could see one Pod hung and the other still answering). Returns {Pod:
    container id} of the containers signalled. Given `containers` (what an earlier call returned:
    the SIGCONT or SIGKILL that ends a SIGSTOP), only those containers are signalled: one the
    operator has replaced meanwhile (it deletes the Pod of an old primary it cannot reach, to
    fence it) is gone, and its successor is not the process the test stopped."""
    pids, signalled = [], {}
    for pod in pods:
        cid = _container_id(c, pod)
        if containers is not None and (cid is None or containers.get(pod) != cid):
            continue  # replaced: nothing of what was stopped is left to resume
        r = _ctr_task(local_cluster, c, pod, "ps", "{id}", cid=cid)
        if containers is not None and r.returncode != 0:
            continue  # its task ended (killed as the Pod was deleted)
        assert r.returncode == 0, f"ctr tasks ps: {r.stderr}"
        found = [int(line.split()[0]) for line in r.stdout.splitlines()[1:] if line.split()]
        assert found or containers is not None, f"no process in the mysqld container of {pod}: {r.stdout}"
        pids += found
        signalled[pod] = cid
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # gone already: start.sh's child, say
            os.kill(pid, getattr(signal, sig))
    return signalled


def server_processlist(local_cluster, c: Cluster, pod: str) -> str:
    """What the server of `pod` is doing, asked from inside its container over the local socket
    (through containerd: it answers even when the operator's TCP connections time out)."""
    client = "mysql" if c.body()["spec"]["flavor"].lower() == "mysql" else "mariadb"
    r = _ctr_task(
        local_cluster,
        c,
        pod,
        "exec",
        "--exec-id",
        f"diag-{int(time.time() * 1000)}",
        "{id}",
        client,
        "--defaults-extra-file=/run/mysql-operator/client.cnf",
        "-e",
        "SELECT ID, USER, COMMAND, TIME, STATE, LEFT(INFO, 100) FROM information_schema.PROCESSLIST",
        timeout=60,
    )
    return r.stdout + r.stderr


def ready_pods(core, namespace: str) -> list[str]:
    """The names of the namespace's Pods not being deleted whose every container is ready."""
    return [
        p.metadata.name
        for p in core.list_namespaced_pod(namespace).items
        if not p.metadata.deletion_timestamp
        and p.status.container_statuses
        and all(s.ready for s in p.status.container_statuses)
    ]


def operator_metrics(api, namespace: str, release: str = "mysql-operator", port: int = 9090) -> dict:
    """One scrape of the chart's metrics Service: {(sample name, frozenset of labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    ip = client.CoreV1Api(api).read_namespaced_service(f"{release}-metrics", namespace).spec.cluster_ip
    text = urllib.request.urlopen(f"http://{ip}:{port}/metrics", timeout=5).read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def create_writes_table(c: Cluster) -> tuple[str, str]:
    """The -rw address and app password, with app.writes created through -rw."""
    rw, pw = c.service_ip("rw"), c.password()
    wait_for(lambda: try_query(rw, "app", pw, "SELECT 1"), 60, "-rw answering")
    query(rw, "app", pw, "CREATE TABLE app.writes (id INT PRIMARY KEY)")
    return rw, pw


def lost_rows(rw: str, password: str, writer: Writer, tls=None) -> list[int]:
    rows = {r[0] for r in query(rw, "app", password, "SELECT id FROM app.writes", tls=tls)}
    return [n for n in writer.ids if n not in rows]


def install_crds(api) -> None:
    """Create or update the CRDs (cluster-scoped, shared: left installed for other tests)."""
    apply_crds(api, project_crds())


def sa_kubeconfig(api, admin_kubeconfig: str, ns: str, sa: str, out: Path) -> Path:
    admin = yaml.safe_load(Path(admin_kubeconfig).read_text())
    cluster = admin["clusters"][0]["cluster"]
    token = (
        client.CoreV1Api(api)
        .create_namespaced_service_account_token(sa, ns, {"spec": {"expirationSeconds": 7200}})
        .status.token
    )
    kc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": sa, "user": {"token": token}}],
        "contexts": [{"name": sa, "context": {"cluster": "local", "user": sa, "namespace": ns}}],
        "current-context": sa,
    }
    out.write_text(yaml.safe_dump(kc))
    out.chmod(0o600)
    return out


# ------------------------------------------------------------------------------------------ kubectl
def kubectl_binary() -> str:
    from tests.support.controlplane import binary

    return str(binary("kubectl"))


def kubectl(kubeconfig: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [kubectl_binary(), "--kubeconfig", kubeconfig, *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
    )


# ------------------------------------------------------------------------------------------ namespaces
def delete_clusters(api, namespace: str, timeout: float = 300, named=lambda name: True) -> None:
    """Delete every MySQLCluster and MySQLBackup of the namespace (those `named` says yes to) and
    wait until they are gone (the running operator removes kopf's finalizer), so the namespace can
    go after them. A backup whose objects go with it is gone once its delete Job ran: the backup
    module's every-minute schedules leave about a dozen, and their Jobs took 2 minutes on the
    loaded 2-core CI node (120 s were not enough: the Jobs started 1 minute after the deletion,
    each ran 45-50 s)."""
    objs = client.CustomObjectsApi(api)

    def delete_all(plural: str) -> bool:
        """Delete what is listed; True once nothing is (a cluster's schedule may create another
        MySQLBackup meanwhile: deleted at the next look)."""
        items = [
            item
            for item in objs.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)["items"]
            if named(item["metadata"]["name"])
        ]
        for item in items:
            if item["metadata"].get("deletionTimestamp"):
                continue
            try:
                objs.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, item["metadata"]["name"]
                )
            except client.ApiException as e:
                if e.status != 404:
                    raise
        return not items

    for plural in (BACKUPS, CLUSTERS):
        try:
            objs.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)
        except client.ApiException:
            continue
        wait_for(lambda: delete_all(plural), timeout, f"{plural} of {namespace} deleted", interval=1.0)


# Every namespace an e2e fixture creates carries RUN_LABEL: the session that made it (the
# pytest-xdist controller's, which its workers inherit through RUN_VARIABLE), so that an interrupted
# session removes its own at exit and a later one removes what a killed session left.
RUN_LABEL = "mysqlop-e2e-run"
RUN_VARIABLE = "MYSQLOP_E2E_RUN"
LEFTOVER_SECONDS = 3600  # a namespace of a session no longer running, this old: removed at session start
# the custom objects the operator puts a finalizer on (removed by hand when it cannot run any more)
FINALIZED = (BACKUPS, CLUSTERS, "mysqldatabases", "mysqlusers", "mysqlgrants")

_created: dict[str, Any] = {}  # namespaces this process created and has not deleted: name -> api
_history: list[tuple[str, float]] = []  # every namespace this process created, with when (time.time())
_interrupted: list[str] = []  # set by a signal or a KeyboardInterrupt: clean up fast, then stop


def _host() -> str:
    import re
    import socket

    return re.sub(r"[^A-Za-z0-9.-]+", "-", socket.gethostname())[:40].strip(".-") or "host"


def run_id(new: bool = False) -> str:
    """This session's RUN_LABEL value: "<host>-<pid>" of the process that started the session
    (`new`: this process starts one)."""
    value = os.environ.get(RUN_VARIABLE)
    if new or not value:
        value = os.environ[RUN_VARIABLE] = f"{_host()}-{os.getpid()}"
    return value


def interrupt(why: str) -> None:
    """The session is stopping early: namespaces are deleted at once from now on, without waiting
    for the operator to delete their clusters first."""
    if not _interrupted:
        _interrupted.append(why)


def interrupted() -> bool:
    return bool(_interrupted)


def create_namespace(api, name: str) -> str:
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name, "labels": {RUN_LABEL: run_id()}}})
    _created[name] = api
    _history.append((name, time.time()))
    return name


def created_since(t: float) -> list[str]:
    """The namespaces this process created at or after `t` (time.time()), deleted since or not."""
    return [name for name, at in _history if at >= t]


def delete_namespace(api, name: str, *, fast: bool = False) -> None:
    """Delete a namespace this process made (404: gone already). `fast` (an interrupted session):
    the finalizers of the operator's objects in it removed first, so it goes even when no operator
    runs any more to remove them."""
    core = client.CoreV1Api(api)
    try:
        if fast:
            _drop_finalizers(api, name)
        core.delete_namespace(name, _request_timeout=15)
    except client.ApiException as e:
        if e.status != 404:
            raise
    finally:
        _created.pop(name, None)


def _drop_finalizers(api, namespace: str) -> None:
    """The operator's objects in the namespace deleted, then their finalizers removed (in that
    order: a running operator puts its finalizer back on an object not being deleted)."""
    objs = client.CustomObjectsApi(api)
    for plural in FINALIZED:
        try:
            items = objs.list_namespaced_custom_object(GROUP, VERSION, namespace, plural, _request_timeout=10)
        except client.ApiException:
            continue
        for item in items["items"]:
            name = item["metadata"]["name"]
            with contextlib.suppress(client.ApiException):
                objs.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, name, _request_timeout=10
                )
            with contextlib.suppress(client.ApiException):
                objs.patch_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    namespace,
                    plural,
                    name,
                    {"metadata": {"finalizers": None}},
                    _request_timeout=10,
                )


def cleanup_namespace(api, name: str) -> None:
    """The end of a namespace a test used: its MySQLClusters deleted while the operator runs
    (it removes kopf's finalizer), then the namespace; at once when the session is interrupted."""
    from e2e import evidence

    if interrupted():
        delete_namespace(api, name, fast=True)
        return
    try:
        with contextlib.suppress(Exception):  # what the test did to it, for its disruption check
            evidence.snapshot(api, name)
        delete_clusters(api, name)
    except KeyboardInterrupt:
        interrupt("KeyboardInterrupt")
        raise
    finally:
        delete_namespace(api, name, fast=interrupted())


def delete_created_namespaces() -> list[str]:
    """atexit: the namespaces this process created and did not delete (an interrupted session),
    deleted at once; and, in the process that started the session (the pytest-xdist controller
    too), every namespace labelled with its run (a worker killed before its own cleanup).
    Never raises."""
    done = []
    for name, api in list(_created.items()):
        try:
            delete_namespace(api, name, fast=True)
            done.append(name)
        except Exception:  # noqa: BLE001 - exiting: the next session removes what is left
            continue
    if _own_run_id():
        try:
            from tests.support import cluster as cluster_mod
            from mysql_operator.k8s.client import api_client

            state = cluster_mod.running_state()
            if state is not None:
                api = api_client(state["kubeconfig"])
                for ns in (
                    client.CoreV1Api(api)
                    .list_namespace(label_selector=f"{RUN_LABEL}={run_id()}", _request_timeout=10)
                    .items
                ):
                    if ns.metadata.deletion_timestamp is None:
                        delete_namespace(api, ns.metadata.name, fast=True)
                        done.append(ns.metadata.name)
        except Exception:  # noqa: BLE001
            pass
    if done:
        import sys

        print(f"e2e: deleted at exit (interrupted session): {', '.join(done)}", file=sys.stderr)
    return done


def _own_run_id() -> str | None:
    value = os.environ.get(RUN_VARIABLE, "")
    return value if value.rsplit("-", 1)[-1] == str(os.getpid()) else None


def _run_alive(value: str) -> bool:
    """Whether the session of a RUN_LABEL value still runs on this machine (another machine's:
    assumed to)."""
    host, _, pid = value.rpartition("-")
    if not pid.isdigit():
        return False
    if host != _host():
        return True
    try:
        return b"pytest" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def remove_leftovers(api, older_than: float = LEFTOVER_SECONDS) -> list[str]:
    """Namespaces (and host_operator's ClusterRoles and their bindings) an earlier session made
    and left, older than `older_than` seconds, whose session no longer runs: deleted (at once:
    its operator may be gone). Their names."""
    import datetime as dt

    now = dt.datetime.now(dt.timezone.utc)
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)

    def left(obj) -> bool:
        run = (obj.metadata.labels or {}).get(RUN_LABEL, "")
        age = (now - obj.metadata.creation_timestamp).total_seconds()
        return obj.metadata.deletion_timestamp is None and age > older_than and not _run_alive(run)

    removed = []
    for ns in core.list_namespace(label_selector=RUN_LABEL, _request_timeout=20).items:
        if left(ns):
            delete_namespace(api, ns.metadata.name, fast=True)
            removed.append(ns.metadata.name)
    for kind, lister, deleter in (
        ("ClusterRoleBinding", rbac.list_cluster_role_binding, rbac.delete_cluster_role_binding),
        ("ClusterRole", rbac.list_cluster_role, rbac.delete_cluster_role),
    ):
        for obj in lister(label_selector=RUN_LABEL, _request_timeout=20).items:
            if left(obj):
                with contextlib.suppress(client.ApiException):
                    deleter(obj.metadata.name)
                    removed.append(f"{kind}/{obj.metadata.name}")
    return removed


@contextmanager
def scenario_namespace(api, prefix: str = "e2e-sc"):
    """A fresh namespace; on exit its MySQLClusters go first (while the operator runs), then it
    (at once when the session is interrupted: cleanup_namespace)."""
    from tests.support import cluster as cluster_mod

    name = create_namespace(api, f"{prefix}-{uuid.uuid4().hex[:6]}")
    try:
        cluster_mod.ensure_pull_secret(api, cluster_mod.written_state(), name)
        yield name
    except KeyboardInterrupt:
        interrupt("KeyboardInterrupt")
        raise
    finally:
        cleanup_namespace(api, name)


# ------------------------------------------------------------------------------------------ timings
_timings: list[dict[str, Any]] = []
_slow: list[str] = []  # this process's measurements past what they usually take, since the last take_slow


def record(
    metric: str, value: float | int, unit: str = "s", scenario: str = "", usually_under: float | None = None
) -> None:
    """Keep one measured number (printed now and in the table at the end of the session). Past
    `usually_under` the test still passes (timings are no assertions), but its evidence is kept
    (e2e/conftest.py): a green run removes its audit log, and a slow outlier needs explaining."""
    _timings.append({"metric": metric, "value": value, "unit": unit, "scenario": scenario})
    shown = f"{value:.1f}" if isinstance(value, float) else str(value)
    print(f"[timing] {metric}: {shown}{unit if unit != 'count' else ''}")
    if usually_under is not None and value > usually_under:
        _slow.append(f"{metric}: {shown}{unit} (usually under {usually_under:g}{unit})")


def take_slow() -> list[str]:
    """The slow measurements recorded since the last call (one test's, read after its call)."""
    taken = list(_slow)
    _slow.clear()
    return taken


def recorded() -> list[dict[str, Any]]:
    return list(_timings)


def add_recorded(rows: list[dict[str, Any]]) -> None:
    """Timings another process recorded (a pytest-xdist worker's), for this one's table."""
    _timings.extend(rows)


def format_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no timings recorded)"
    width = max(len(r["metric"]) for r in rows)
    lines = [f"{'measurement':<{width}}  value", f"{'-' * width}  -----"]
    for r in rows:
        v = r["value"]
        shown = f"{v:.1f} s" if r["unit"] == "s" else f"{v}"
        lines.append(f"{r['metric']:<{width}}  {shown}")
    return "\n".join(lines)


def save_timings(path: Path = TIMINGS_FILE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(recorded(), indent=2))


def stopwatch() -> Callable[[], float]:
    t0 = time.monotonic()
    return lambda: time.monotonic() - t0
