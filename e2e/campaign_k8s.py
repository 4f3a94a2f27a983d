"""The fault campaign through the shipped operator and chart on the local cluster (issue 45; the
host campaign, tests/support/campaign.py, drives the operator's engine against host servers and
cannot do faults that need Kubernetes).

One 3-instance MySQLCluster of the e2e spec (e2e/helpers.py cluster_spec: semi-sync as the spec
defaults) in its own namespace ("campaign-<flavor>"), reused by every schedule: before each one
it is waited for at full strength. The chart's operator serves it (installed as the e2e tests
install it when it is not there). A schedule is `tests.support.campaign.schedule(seed, kinds=KINDS,
...)`: one to three overlapping faults, printed and replayed from its seed.

Faults (`KINDS`), each on a role resolved when it starts (the primary then, a replica, any):
- kill: SIGKILL to every process of the server's mysqld container (the kubelet restarts it)
- stop: SIGSTOP, then SIGCONT to the same processes when it ends (a container the operator
  replaced meanwhile, by deleting the Pod of an unreachable old primary, is not resumed: gone)
- pod-delete: the server Pod deleted (its StatefulSet makes it again)
- operator: the operator Pod holding the chart's Lease deleted at once (grace 0); with one
  replica the Deployment starts another, with two the standby takes the Lease over
- apiserver: the local cluster's kube-apiserver SIGSTOPped, SIGCONT when it ends (always: a
  finally, and SIGTERM turned into KeyboardInterrupt by the CLI)
- lag: a replica's applier blocked behind FLUSH TABLES WITH READ LOCK (by Pod IP), held
- cut-operator: the primary cannot talk with the operator's Pods (iptables in the primary Pod's
  network namespace, both directions); clients and replicas still reach it
- cut-replicas: the primary cannot talk with its replicas (both directions); the operator and
  clients still reach it
- isolate: one instance cut from every peer (the other servers and the operator's Pods), both
  directions; the host (the writer through -rw, the monitor) still reaches it
- one-way: as isolate, one chain only (INPUT: it hears nobody; OUTPUT: nobody hears it)
A partition's rules name Pod IPs only (inside the cluster's Pod range, never the node's address)
and are removed when it ends, always. Not a fault here: a replica's volume filling up (the
local-path volumes are directories on the host's filesystem, which cannot be bounded without
filling the host's disk).

Processes are found through containerd (`ctr`), not the API: an apiserver fault must not stop
the others from happening on time. The checker is the host campaign's: every acknowledged commit
present at the end (`lost`), never two servers writable (`two_writable`, by Pod IP from the host),
-rw never routing to a read-only server while another is writable (`misrouted`, the -rw
EndpointSlice), full strength (status Ready with 3 ready, every replica replicating from the
primary, read_only as its role, -rw on the primary) within `converge_seconds` of the last fault's
end, and the longest gap between acknowledged commits. A schedule that fails a check keeps
evidence in EVIDENCE/<flavor>-seed<N>-<time>/ (named in its error).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import pymysql
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.helpers import Cluster, cluster_spec, connect, lost_rows, query, try_query, writer_to
from mysql_operator.manifests.common import OPERATOR_PASSWORD_KEY, OPERATOR_USER, ROLE_LABEL, ROLE_PRIMARY
from tests.support import cluster as cluster_mod
from tests.support.campaign import (
    FIXED_ROLES,
    INSTANT,
    SAMPLE_SECONDS,
    Fault,
    Result,
    drive,
    read_only,
    schedule,
    settle_writes,
    take_counts,
)
from tests.support.wait import Timeout, wait_for

KINDS = (
    "kill",
    "stop",
    "pod-delete",
    "operator",
    "apiserver",
    "lag",
    "cut-operator",
    "cut-replicas",
    "isolate",
    "one-way",
)
ROLES = {
    **FIXED_ROLES,
    "cut-operator": "primary",
    "cut-replicas": "primary",
    "operator": "leader",
    "apiserver": "node",
}
K8S_INSTANT = INSTANT | {"kill", "pod-delete", "operator"}
CLUSTER_WIDE = ("operator", "apiserver")  # felt by every namespace the chart's operator serves
NAME = "db"
OPERATOR_NAMESPACE = "mysql-operator"  # e2e/conftest.py's
LEASE = "mysql-operator"  # the chart's full name for release mysql-operator
EVIDENCE = Path("/var/tmp/mysqlop-campaign")
TAG = ["-m", "comment", "--comment", "mysqlop-campaign"]
STEADY_SECONDS = 5.0  # full strength is what holds this long
API_TIMEOUT = 3  # seconds an API call may take while a fault runs (the apiserver may be stopped)


def k8s_schedule(seed: int, kinds: tuple[str, ...] = KINDS) -> list[Fault]:
    return schedule(seed, kinds=kinds, fixed_roles=ROLES, instant=K8S_INSTANT)


# ------------------------------------------------------------------------------ the node, from the host
def _start_time(pid: int) -> str | None:
    """A process's start time (field 22 of /proc/<pid>/stat): with the pid, its identity."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


Procs = list[tuple[int, str]]  # (pid, start time)


def signal_procs(procs: Procs, sig: signal.Signals) -> int:
    """Signal the processes that are still the ones listed; how many were."""
    done = 0
    for pid, started in procs:
        if _start_time(pid) == started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
                done += 1
    return done


class Node:
    """The local cluster's node as the host sees it: containerd's tasks, the kube-apiserver."""

    def __init__(self, state: dict):
        self.state = state
        self._stopped: Procs = []  # the apiserver while an apiserver fault holds it
        self._holds = 0  # apiserver faults running

    def _ctr(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ctr", "--address", self.state["containerd_socket"], "-n", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=30,
        )

    def server_procs(self, namespace: str, pod: str) -> Procs:
        """Every process of the running mysqld container of a Pod (the server and start.sh)."""
        labels = {
            "io.kubernetes.pod.namespace": namespace,
            "io.kubernetes.pod.name": pod,
            "io.kubernetes.container.name": "mysqld",
        }
        r = self._ctr("containers", "ls", "-q", ",".join(f'labels."{k}"=={v}' for k, v in labels.items()))
        out: Procs = []
        for cid in r.stdout.split():
            t = self._ctr("tasks", "ps", cid)
            for line in t.stdout.splitlines()[1:] if t.returncode == 0 else []:
                pid = int(line.split()[0])
                started = _start_time(pid)
                if started:
                    out.append((pid, started))
        return out

    def apiserver(self) -> Procs:
        """The kube-apiserver of this cluster (its --secure-port is the state's server port)."""
        port = self.state["server"].rsplit(":", 1)[1]
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[0].endswith(b"kube-apiserver") and f"--secure-port={port}".encode() in argv:
                return [(int(proc.name), _start_time(int(proc.name)) or "")]
        raise RuntimeError("no kube-apiserver process of the local cluster")

    def stop_apiserver(self) -> Callable[[], None]:
        """SIGSTOP the kube-apiserver (once for overlapping faults); returns what ends this
        fault's hold: SIGCONT once no other apiserver fault holds it."""
        if not self._stopped:
            self._stopped = self.apiserver()
            signal_procs(self._stopped, signal.SIGSTOP)
        self._holds += 1

        def release() -> None:
            self._holds -= 1
            if self._holds <= 0:
                self.resume_apiserver()

        return release

    def resume_apiserver(self) -> None:
        """SIGCONT to what stop_apiserver stopped, whatever holds it; safe to call any time."""
        procs, self._stopped, self._holds = self._stopped, [], 0
        signal_procs(procs, signal.SIGCONT)


class Partition:
    """DROP rules in one Pod's network namespace (entered through a process of it, held open by a
    file descriptor so the rules can be removed even once that process has gone)."""

    def __init__(self, pid: int, rules: list[tuple[str, str]]):
        subnet = ipaddress.ip_network(cluster_mod.POD_SUBNET)
        for _, ip in rules:  # only traffic inside the Pod range, never the node's (the kubelet's probes)
            if ipaddress.ip_address(ip) not in subnet or ip == cluster_mod.NODE_IP:
                raise ValueError(f"{ip} is not a Pod address of the local cluster")
        self.rules = rules  # (chain, peer IP)
        self.fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        self.applied: list[tuple[str, str]] = []

    def _iptables(self, op: str, chain: str, ip: str) -> subprocess.CompletedProcess:
        match = ["-s", ip] if chain == "INPUT" else ["-d", ip]
        return subprocess.run(
            [
                "nsenter",
                f"--net=/proc/self/fd/{self.fd}",
                "iptables",
                "-w",
                "5",
                op,
                chain,
                *match,
                *TAG,
                "-j",
                "DROP",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            pass_fds=(self.fd,),
        )

    def apply(self) -> None:
        for chain, ip in self.rules:
            r = self._iptables("-I", chain, ip)
            if r.returncode != 0:
                raise RuntimeError(f"iptables -I {chain} {ip}: {r.stderr.strip()}")
            self.applied.append((chain, ip))

    def heal(self) -> None:
        try:
            for chain, ip in self.applied:
                self._iptables("-D", chain, ip)
            self.applied = []
        finally:
            with contextlib.suppress(OSError):
                os.close(self.fd)


# ------------------------------------------------------------------------------ the monitor
def _read_only(conns: dict[str, Any], ip: str, password: str) -> int | None:
    """@@read_only of the server at `ip` (short timeouts); None: no answer within a sample."""
    return read_only(
        conns,
        ip,
        lambda: pymysql.connect(
            host=ip,
            port=3306,
            user=OPERATOR_USER,
            password=password,
            connect_timeout=0.5,
            read_timeout=0.5,
            autocommit=True,
            ssl_disabled=True,
        ),
    )


class Monitor:
    """Two threads. One asks the API every SAMPLE_SECONDS for the server Pods (name, IP, role
    label) and the -rw EndpointSlice (where -rw routes), and every few seconds for the operator's
    Pods; it keeps the last answer while the API does not answer. The other samples every
    SAMPLE_SECONDS each server's read_only by Pod IP (in parallel, short timeouts) and counts two
    writable servers. -rw on a read-only server while another is writable is counted when it
    stops, for the samples whose -rw is known throughout: the same in the last EndpointSlice read
    that ended before the sample began and in the first that began after it ended (the two
    threads' answers are never compared across a change they may both have missed)."""

    def __init__(self, c: Cluster, password: str):
        self.c, self.password = c, password
        self.core = client.CoreV1Api(c.api)
        self.discovery = client.DiscoveryV1Api(c.api)
        self.pods: dict[str, str] = {}  # server Pod -> IP
        self.labelled: str | None = None  # the Pod labelled primary
        self.routed: list[str] | None = None  # the Pods -rw routes to; None: not known
        self.operator_ips: list[str] = []
        self.seen: dict[str, int | None] = {}
        self.samples = self.two_writable = self.misrouted = 0
        self.bad: list[str] = []
        self.routes: list[tuple[float, float, list[str]]] = []  # (asked, answered, -rw routes to)
        self.reads: list[
            tuple[float, float, str, dict[str, int | None]]
        ] = []  # (began, ended, at, read_only)
        self.stop_event = threading.Event()
        self._threads = [
            threading.Thread(target=self._watch_api, daemon=True),
            threading.Thread(target=self._sample, daemon=True),
        ]

    def refresh(self, operator: bool = True) -> None:
        asked = time.monotonic()
        ns = self.c.namespace
        pods = self.core.list_namespaced_pod(
            ns, label_selector=f"app.kubernetes.io/instance={self.c.name}", _request_timeout=API_TIMEOUT
        ).items
        servers = [
            p for p in pods if (p.metadata.labels or {}).get("app.kubernetes.io/component") == "database"
        ]
        self.pods = {p.metadata.name: p.status.pod_ip for p in servers if p.status.pod_ip}
        self.labelled = next(
            (p.metadata.name for p in servers if (p.metadata.labels or {}).get(ROLE_LABEL) == ROLE_PRIMARY),
            None,
        )
        slices = self.discovery.list_namespaced_endpoint_slice(
            ns, label_selector=f"kubernetes.io/service-name={self.c.name}-rw", _request_timeout=API_TIMEOUT
        ).items
        by_ip = {ip: name for name, ip in self.pods.items()}
        self.routed = sorted(
            by_ip.get(a, a)
            for s in slices
            for e in s.endpoints or []
            if e.conditions is None or e.conditions.ready is not False
            for a in e.addresses
        )
        self.routes.append((asked, time.monotonic(), self.routed))
        if operator:
            self.operator_ips = [
                p.status.pod_ip
                for p in self.core.list_namespaced_pod(OPERATOR_NAMESPACE, _request_timeout=API_TIMEOUT).items
                if p.status.pod_ip and p.status.phase == "Running" and not p.metadata.deletion_timestamp
            ]

    def _watch_api(self) -> None:
        n = 0
        while not self.stop_event.wait(SAMPLE_SECONDS):
            try:
                self.refresh(operator=n % 10 == 0)
            except Exception:  # noqa: BLE001 - the apiserver may be the fault: keep the last answer
                self.routed = None
            n += 1

    def _sample(self) -> None:
        conns: dict[str, Any] = {}
        with ThreadPoolExecutor(3) as pool:
            while not self.stop_event.wait(SAMPLE_SECONDS):
                pods, began = dict(self.pods), time.monotonic()
                seen = dict(
                    zip(pods, pool.map(lambda ip: _read_only(conns, ip, self.password), pods.values()))
                )
                self.seen = seen
                writable = sorted(n for n, ro in seen.items() if ro == 0)
                self.samples += 1
                if len(writable) > 1:
                    self.two_writable += 1
                    self.bad.append(f"{time.strftime('%H:%M:%S')} two writable: {writable}")
                if writable and 1 in seen.values():
                    self.reads.append((began, time.monotonic(), time.strftime("%H:%M:%S"), seen))
        for conn in conns.values():
            with contextlib.suppress(Exception):
                conn.close()

    def primary(self) -> str | None:
        """The one writable server of the last sample, else the Pod labelled primary."""
        writable = [n for n, ro in self.seen.items() if ro == 0]
        return writable[0] if len(writable) == 1 else self.labelled

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self.stop_event.set()
        for t in self._threads:
            t.join(10)
        for began, ended, at, seen in self.reads:
            before = next((r for _, answered, r in reversed(self.routes) if answered <= began), None)
            after = next((r for asked, _, r in self.routes if asked >= ended), None)
            if before and before == after and any(seen.get(n) == 1 for n in before):
                self.misrouted += 1
                writable = sorted(n for n, ro in seen.items() if ro == 0)
                self.bad.append(f"{at} -rw on {before} while {writable} writable")


# ------------------------------------------------------------------------------ the campaign
class Campaign:
    """One MySQLCluster of `flavor` in namespace campaign-<flavor>, made once (or found), and the
    schedules run on it one after another."""

    def __init__(
        self,
        state: dict,
        flavor: str,
        converge_seconds: float = 300.0,
        kinds: tuple[str, ...] = KINDS,
        operator_replicas: int = 1,
    ):
        from mysql_operator.k8s.client import api_client

        self.state, self.flavor, self.converge_seconds, self.kinds = state, flavor, converge_seconds, kinds
        self.operator_replicas = (
            operator_replicas  # the chart's `replicas`: 2, a standby takes the Lease over
        )
        self.api = api_client(state["kubeconfig"])
        self.core = client.CoreV1Api(self.api)
        self.node = Node(state)
        self.namespace = f"campaign-{flavor}"
        self.c = Cluster(self.api, self.namespace, NAME)

    # ---------------------------------------------------------------- setup, teardown
    def ensure_operator(self) -> None:
        """The chart's release, installed as the e2e tests install it (with `replicas` set to
        operator_replicas) when no operator runs or another number of replicas is asked for (an
        e2e session that installed it uninstalls it at its end)."""
        apps = client.AppsV1Api(self.api)
        try:
            deps = apps.list_namespaced_deployment(OPERATOR_NAMESPACE).items
        except ApiException:
            deps = []
        if any(
            (d.status.ready_replicas or 0) > 0 and d.spec.replicas == self.operator_replicas for d in deps
        ):
            return
        from e2e.conftest import ClusterHandle, helm_release_lock, install_operator
        from e2e.helpers import install_crds

        with helm_release_lock():
            install_crds(self.api)
            r = install_operator(ClusterHandle(self.state), "--set", f"replicas={self.operator_replicas}")
        if r.returncode != 0:
            raise RuntimeError(f"helm install failed: {r.stderr[-2000:]}")

    def _namespace_usable(self) -> bool:
        """The namespace is not there, or is there to stay (not being deleted: a previous run's
        `delete` does not wait for it to go, and nothing can be created in it meanwhile)."""
        try:
            return self.core.read_namespace(self.namespace).metadata.deletion_timestamp is None
        except ApiException as e:
            if e.status != 404:
                raise
            return True

    def setup(self) -> None:
        self.ensure_operator()
        wait_for(self._namespace_usable, 300, f"namespace {self.namespace} deleted by a previous run")
        try:
            self.core.read_namespace(self.namespace)
        except ApiException as e:
            if e.status != 404:
                raise
            # no e2e run label: an e2e session would remove it as a leftover of a dead session
            self.core.create_namespace({"metadata": {"name": self.namespace}})
        cluster_mod.ensure_pull_secret(self.api, self.state, self.namespace)
        try:
            self.c.body()
        except ApiException as e:
            if e.status != 404:
                raise
            self.c.create(cluster_spec(3, self.flavor))
        self.c.wait_ready(900, "3 ready instances", instances=3)
        self.rw, self.password = self.c.service_ip("rw"), self.c.password()
        self.admin_password = self.c.password(OPERATOR_PASSWORD_KEY)
        wait_for(lambda: try_query(self.rw, "app", self.password, "SELECT 1"), 120, "-rw answering")
        query(self.rw, "app", self.password, "CREATE TABLE IF NOT EXISTS app.writes (id INT PRIMARY KEY)")

    def delete(self) -> None:
        from e2e.helpers import delete_clusters

        delete_clusters(self.api, self.namespace, timeout=300)
        with contextlib.suppress(ApiException):
            self.core.delete_namespace(self.namespace)

    # ---------------------------------------------------------------- full strength
    def weakness(self) -> str:
        """Why the cluster is not at full strength; "" when it is: status Ready for its generation
        with 3 ready, a running operator Pod holding the chart's Lease, the status's primary writable and behind -rw alone, every other server
        read-only and replicating from it (both threads running)."""
        b = self.c.body()
        s = b.get("status") or {}
        if s.get("phase") != "Ready" or s.get("readyInstances") != 3:
            return f"phase {s.get('phase')}, {s.get('readyInstances')} ready"
        if s.get("observedGeneration") != b["metadata"].get("generation"):
            return "status of an older generation"
        holder = (
            client.CoordinationV1Api(self.api)
            .read_namespaced_lease(LEASE, OPERATOR_NAMESPACE)
            .spec.holder_identity
        )
        running = [
            p.metadata.name
            for p in self.core.list_namespaced_pod(OPERATOR_NAMESPACE).items
            if not p.metadata.deletion_timestamp and all(x.ready for x in p.status.container_statuses or [])
        ]
        if holder not in running:
            return f"the operator's Lease is held by {holder}, not one of the running {running}"
        if len(running) < self.operator_replicas:
            return f"{len(running)} of {self.operator_replicas} operator Pods ready"
        primary = s.get("currentPrimary")
        for p in self.c.pods():
            statuses = p.status.container_statuses or []
            if p.metadata.deletion_timestamp or not statuses or not all(x.ready for x in statuses):
                return f"{p.metadata.name}: not ready or being deleted"
        m = Monitor(self.c, self.admin_password)
        m.refresh(operator=False)
        if len(m.pods) != 3:
            return f"{len(m.pods)} server Pods with an address"
        if m.routed != [primary]:
            return f"-rw routes to {m.routed}, the primary is {primary}"
        for name, ip in m.pods.items():
            with (
                contextlib.closing(connect(ip, OPERATOR_USER, self.admin_password)) as conn,
                conn.cursor(pymysql.cursors.DictCursor) as cur,
            ):
                cur.execute("SELECT @@global.read_only AS ro")
                ro = cur.fetchone()["ro"]
                if ro != (name != primary):
                    return f"{name}: read_only {ro}"
                if name == primary:
                    continue
                cur.execute("SHOW REPLICA STATUS")
                rows = cur.fetchall()
                if len(rows) != 1:
                    return f"{name}: {len(rows)} replication channels"
                r = rows[0]
                source = r.get("Source_Host") or r.get("Master_Host") or ""
                io = r.get("Replica_IO_Running") or r.get("Slave_IO_Running")
                sql = r.get("Replica_SQL_Running") or r.get("Slave_SQL_Running")
                if source.split(".")[0] != primary or io != "Yes" or sql != "Yes":
                    return f"{name}: replicating from {source} (io {io}, sql {sql})"
        return ""

    def wait_full_strength(self, timeout: float, steady: float = STEADY_SECONDS) -> float:
        """Wait until the cluster is at full strength and stays so for `steady` seconds (a status
        written before a fault's effect is seen is not a recovery); when that began (monotonic)."""
        last, since = ["not asked yet"], [0.0]

        def strong() -> bool:
            last[0] = self.weakness()
            if last[0]:
                since[0] = 0.0
                return False
            since[0] = since[0] or time.monotonic()
            return time.monotonic() - since[0] >= steady

        wait_for(strong, timeout + steady, "full strength", interval=1.0, describe=lambda: last[0])
        return since[0]

    # ---------------------------------------------------------------- faults
    def _resolve(self, role: str, m: Monitor, rnd: random.Random) -> str:
        names = sorted(m.pods)
        primary = m.primary()
        if role == "primary" and primary:
            return primary
        if role == "replica":
            names = [n for n in names if n != primary] or names
        return rnd.choice(names)

    def _apply(self, f: Fault, m: Monitor, rnd: random.Random, r: Result) -> Callable[[], None]:
        """Start fault `f`; returns what ends it (a no-op for an instant one)."""
        nothing: Callable[[], None] = lambda: None  # noqa: E731
        if f.kind == "apiserver":
            r.applied.append(f"{f}: kube-apiserver stopped")
            return self.node.stop_apiserver()
        if f.kind == "operator":
            coord = client.CoordinationV1Api(self.api)
            try:
                holder = coord.read_namespaced_lease(
                    LEASE, OPERATOR_NAMESPACE, _request_timeout=API_TIMEOUT
                ).spec.holder_identity
                self.core.delete_namespaced_pod(
                    holder, OPERATOR_NAMESPACE, grace_period_seconds=0, _request_timeout=API_TIMEOUT
                )
                r.applied.append(f"{f}: {holder} deleted")
            except Exception as e:  # noqa: BLE001 - the API may be the other fault
                r.applied.append(f"{f}: not applied ({type(e).__name__}: {str(e)[:80]})")
            return nothing
        name = self._resolve(f.role, m, rnd)
        r.applied.append(f"{f}: {name}")
        if f.kind == "pod-delete":
            try:
                self.core.delete_namespaced_pod(name, self.namespace, _request_timeout=API_TIMEOUT)
            except Exception as e:  # noqa: BLE001 - the API may be the other fault
                r.applied[-1] += f" (not applied: {type(e).__name__})"
            return nothing
        if f.kind == "lag":
            try:
                conn = connect(m.pods[name], OPERATOR_USER, self.admin_password)
                with conn.cursor() as cur:
                    cur.execute("FLUSH TABLES WITH READ LOCK")
            except Exception as e:  # noqa: BLE001 - a server already down lags anyway
                r.applied[-1] += f" (not locked: {type(e).__name__})"
                return nothing
            return lambda: _close(conn)
        procs = self.node.server_procs(self.namespace, name)
        if not procs:
            r.applied[-1] += " (no running server)"
            return nothing
        if f.kind == "kill":
            signal_procs(procs, signal.SIGKILL)
            return nothing
        if f.kind == "stop":
            signal_procs(procs, signal.SIGSTOP)
            return lambda: signal_procs(procs, signal.SIGCONT) and None
        peers = [ip for n, ip in m.pods.items() if n != name]
        if f.kind == "cut-operator":
            rules = [(chain, ip) for ip in m.operator_ips for chain in ("INPUT", "OUTPUT")]
        elif f.kind == "cut-replicas":
            rules = [(chain, ip) for ip in peers for chain in ("INPUT", "OUTPUT")]
        elif f.kind == "isolate":
            rules = [(chain, ip) for ip in peers + m.operator_ips for chain in ("INPUT", "OUTPUT")]
        else:  # one-way
            chain = rnd.choice(("INPUT", "OUTPUT"))
            rules = [(chain, ip) for ip in peers + m.operator_ips]
            r.applied[-1] += f" ({chain})"
        p = Partition(procs[0][0], rules)
        try:
            p.apply()
        except Exception:
            p.heal()
            raise
        return p.heal

    # ---------------------------------------------------------------- one schedule
    def run(self, seed: int) -> Result:
        faults = k8s_schedule(seed, self.kinds)
        r = Result(seed, self.flavor, [str(f) for f in faults])
        writer = monitor = None
        t0 = time.time()
        try:
            self.ensure_operator()
            self.wait_full_strength(self.converge_seconds)
            query(self.rw, "app", self.password, "TRUNCATE TABLE app.writes")
            failovers = self._failovers()
            writer = writer_to(self.rw, "app", self.password)
            writer.start()
            monitor = Monitor(self.c, self.admin_password)
            monitor.refresh()
            monitor.start()
            wait_for(lambda: len(writer.acked) >= 20, 60, "20 acknowledged writes")
            rnd = random.Random(seed)
            began = time.monotonic()
            drive(faults, lambda f: self._apply(f, monitor, rnd, r), lambda: None)
            healed = time.monotonic()
            try:
                r.converge_seconds = self.wait_full_strength(self.converge_seconds) - healed
                r.converged = True
            except Timeout as e:
                r.error = (
                    f"not at full strength {self.converge_seconds:.0f}s after the last fault: {str(e)[-300:]}"
                )
            settle_writes(r, writer, began)
            r.lost = len(lost_rows(self.rw, self.password, writer))
            r.failovers = sum(max(0, n - failovers.get(uid, 0)) for uid, n in self._failovers().items())
        except Exception as e:  # noqa: BLE001 - the schedule's outcome, reported
            r.error = r.error or f"{type(e).__name__}: {str(e)[:500]}"
        finally:
            self.node.resume_apiserver()
            if writer is not None:
                writer.stop()
            if monitor is not None:
                take_counts(r, monitor)
        if not r.ok:
            r.error += f" (evidence: {self.keep_evidence(r, monitor, t0)})"
        return r

    def _failovers(self) -> dict[str, int]:
        """{uid: count} of the cluster's Failover Events (one is counted up as it recurs; an Event
        past its time to live is gone: compared by uid, not summed)."""
        return {e.metadata.uid: e.count or 1 for e in self.c.events("Failover")}

    def keep_evidence(self, r: Result, monitor: Monitor | None, since: float) -> str:
        """The operator's log since the schedule began, the cluster's status and Events, the
        monitor's bad samples: in a folder under EVIDENCE."""
        folder = EVIDENCE / f"{self.flavor}-seed{r.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "schedule.txt").write_text("\n".join(r.faults + ["", *r.applied, "", r.error]) + "\n")
        if monitor is not None:
            (folder / "monitor.txt").write_text("\n".join(monitor.bad) + "\n")
        with contextlib.suppress(Exception):
            (folder / "cluster.txt").write_text(self.c.describe() + "\n")
        with contextlib.suppress(Exception):
            (folder / "network.txt").write_text(self.network_evidence(monitor) + "\n")
        seconds = int(time.time() - since) + 30
        with contextlib.suppress(Exception):
            for p in self.core.list_namespaced_pod(OPERATOR_NAMESPACE).items:
                log = self.core.read_namespaced_pod_log(
                    p.metadata.name, OPERATOR_NAMESPACE, container="operator", since_seconds=seconds
                )
                mine = [line for line in log.splitlines() if self.namespace in line or "Error" in line]
                (folder / f"operator-{p.metadata.name}.log").write_text("\n".join(mine) + "\n")
        with contextlib.suppress(Exception):
            for p in self.c.pods():
                log = self.core.read_namespaced_pod_log(
                    p.metadata.name, self.namespace, container="mysqld", since_seconds=seconds
                )
                (folder / f"{p.metadata.name}.log").write_text(log)
        return str(folder)

    def network_evidence(self, monitor: Monitor | None, probe_seconds: float = 20.0) -> str:
        """Where -rw leads now: its address, the Pods' addresses, its EndpointSlice, the node's NAT
        rules for the address, then a TCP connect to it once a second for `probe_seconds` (does a
        refused or timed-out -rw come back on its own, and when): evidence only, the schedule's
        outcome stays what it was."""
        lines = [f"-rw {self.rw}:3306"]
        if monitor is not None:
            monitor.refresh(operator=False)
            lines += [
                f"pods {monitor.pods}",
                f"primary label on {monitor.labelled}",
                f"-rw routes to {monitor.routed}",
            ]
        nat = subprocess.run(
            ["iptables-save", "-t", "nat"], capture_output=True, text=True, timeout=30
        ).stdout
        lines += ["nat rules naming it:", *[r for r in nat.splitlines() if self.rw in r]]
        t0 = time.monotonic()
        while time.monotonic() - t0 < probe_seconds:
            began = time.monotonic()
            try:
                with socket.create_connection((self.rw, 3306), timeout=2):
                    outcome = "connected"
            except OSError as e:
                outcome = f"{type(e).__name__}: {e}"
            lines.append(f"+{began - t0:4.1f}s {outcome} ({time.monotonic() - began:.2f}s)")
            time.sleep(max(0.0, 1.0 - (time.monotonic() - began)))  # one probe a second, not a wait
        return "\n".join(lines)


def _close(conn) -> None:
    with contextlib.suppress(Exception):
        conn.close()
