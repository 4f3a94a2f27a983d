"""Operator scale benchmark (not a test): 100 MySQLClusters against the local control plane.

Starts a control plane (tests/support/controlplane.py), installs the CRDs, runs
`mysql-operator run` as a process, creates N clusters and prints a table:
time until every owned object of every cluster exists, the operator's peak RSS, its
steady-state CPU after settling, and the API requests per second it causes in steady state (the
apiserver's own apiserver_request_total, minus the control plane's rate measured over the same
window length before the operator started). No node: Pods never run (the replication engine stays idle),
so this measures the Kubernetes side of the reconcile loop. The steady state is measured once the
control plane is done too: every Pod and claim of every cluster created (the controller manager's
own request rate limit makes that take minutes at 300 clusters, and each Pod it creates wakes the
cluster's pass).

    .venv/bin/python -m benchmarks.operator_scale [--clusters 100] [--settle 30] [--measure 60]
        [--profile FILE]   (py-spy's samples of the operator over the window, if py-spy is installed:
                            the thread holding the GIL only, so the samples are Python's CPU)
        [--profile-creating FILE]  (the same from the first create call until every status is published)
        [--until-published]  (stop there: the creation's rows only)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import threading
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import yaml
from kubernetes import client, watch

from mysql_operator.api import GROUP, VERSION
from mysql_operator.operator import OperatorConfig
from tests.support import host_operator
from tests.support.controlplane import ControlPlane
from tests.support.wait import wait_for

REPO = Path(__file__).resolve().parents[1]
OWNED = "app.kubernetes.io/managed-by=mysql-operator"  # the label selector of what the operator made
OWNED_PER_CLUSTER = 7  # Secret, ConfigMap, 3 Services, StatefulSet, PDB


def print_table(rows: list[tuple[str, str]]) -> None:
    """The benchmarks' output: one metric per line, its value aligned."""
    width = max(len(k) for k, _ in rows)
    print(f"\n{'metric':<{width}}  value")
    print(f"{'-' * width}  -----")
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


def proc_stat(pid: int) -> tuple[float, int, int]:
    """(cpu seconds, RSS kB, peak RSS kB) of one process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return cpu, int(status["VmRSS"].split()[0]), int(status["VmHWM"].split()[0])


def _apiserver_requests(api) -> Counter:
    """apiserver_request_total by (verb, resource), every verb but WATCH (a watch is one long
    request)."""
    headers = (
        {"Authorization": api.configuration.api_key["authorization"]} if api.configuration.api_key else {}
    )
    resp = api.rest_client.request("GET", api.configuration.host + "/metrics", headers=headers)
    resp.read()
    out: Counter = Counter()
    for line in resp.data.decode().splitlines():
        if line.startswith("apiserver_request_total{") and 'verb="WATCH"' not in line:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
            key = (
                labels.get("verb", ""),
                labels.get("resource", "")
                + (f"/{labels['subresource']}" if labels.get("subresource") else ""),
            )
            out[key] += float(line.rsplit(" ", 1)[1])
    return out


def request_rate(api, seconds: float) -> tuple[float, Counter]:
    """Requests per second over `seconds`: in all, and by (verb, resource)."""
    r0, t0 = _apiserver_requests(api), time.monotonic()
    time.sleep(seconds)
    r1, elapsed = _apiserver_requests(api), time.monotonic() - t0
    by = Counter({k: (r1[k] - r0[k]) / elapsed for k in r1})
    return sum(by.values()), by


class Tally(threading.Thread):
    """Which objects of one kind meet `counts`, by name, kept current by one watch. The benchmark
    waits on these instead of polling: a poll lists up to 7,000 objects, and once a second that
    cost the API server (and the 2 cores it shares with the operator) more than the operator's
    own work; the watch sends each change once."""

    def __init__(self, list_call, selector: str = OWNED, counts=lambda obj: True):
        super().__init__(daemon=True)
        self.list_call, self.selector, self.counts = list_call, selector, counts
        self.state: dict[str, bool] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        version = None
        while not self.stopped.is_set():
            try:
                # a lambda, not the client's method: the events stay plain JSON (no models)
                for event in watch.Watch().stream(
                    lambda **kw: self.list_call(**kw),
                    label_selector=self.selector,
                    resource_version=version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=60,
                    _request_timeout=(5, 90),
                ):
                    obj, kind = event["raw_object"], event["type"]
                    if kind == "ERROR":
                        version = None
                        break
                    version = obj["metadata"].get("resourceVersion") or version
                    if kind in ("ADDED", "MODIFIED"):
                        self.state[obj["metadata"]["name"]] = bool(self.counts(obj))
                    elif kind == "DELETED":
                        self.state.pop(obj["metadata"]["name"], None)
            except Exception as e:  # noqa: BLE001 - a connection the server closed: watch again
                if not self.stopped.is_set():
                    print(f"watch: {type(e).__name__}; again", file=sys.stderr)
                self.stopped.wait(1.0)

    def count(self) -> int:
        return sum(self.state.values())


def _tallies(api, ns: str) -> dict[str, Tally]:
    """One started Tally per kind the benchmark waits on."""
    core, apps, policy = client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)
    objs = client.CustomObjectsApi(api)
    out = {
        "secrets": Tally(lambda **kw: core.list_namespaced_secret(ns, **kw)),
        "configmaps": Tally(lambda **kw: core.list_namespaced_config_map(ns, **kw)),
        "services": Tally(lambda **kw: core.list_namespaced_service(ns, **kw)),
        "statefulsets": Tally(lambda **kw: apps.list_namespaced_stateful_set(ns, **kw)),
        "pdbs": Tally(lambda **kw: policy.list_namespaced_pod_disruption_budget(ns, **kw)),
        "pods": Tally(lambda **kw: core.list_namespaced_pod(ns, **kw)),
        # StatefulSets whose status counts all their replicas
        "full": Tally(
            lambda **kw: apps.list_namespaced_stateful_set(ns, **kw),
            counts=lambda o: (o.get("status") or {}).get("replicas", 0) == o["spec"]["replicas"],
        ),
        "statuses": Tally(
            lambda **kw: objs.list_namespaced_custom_object(GROUP, VERSION, ns, "mysqlclusters", **kw),
            selector="",
            counts=lambda o: (o.get("status") or {}).get("observedGeneration") == 1,
        ),
    }
    for t in out.values():
        t.start()
    return out


def _record(spy: str, pid: int, out: Path, seconds: float) -> subprocess.Popen:
    """py-spy recording the process's thread that holds the GIL (Python's CPU) for `seconds`."""
    return subprocess.Popen(
        [spy, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "50"]
        + ["-f", "raw", "-o", str(out), "--nonblocking", "--gil"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", type=int, default=100)
    ap.add_argument("--settle", type=float, default=30.0, help="seconds after creation before measuring CPU")
    ap.add_argument(
        "--measure",
        type=float,
        default=float(OperatorConfig().resync_seconds),
        help="measurement window, seconds (default: exactly one resync period of the operator, so "
        "that it holds each cluster's resync once, whenever the window starts)",
    )
    ap.add_argument("--loop-seconds", type=float, default=1.0, help="the operator's default")
    ap.add_argument(
        "--until-published",
        action="store_true",
        help="stop once every status is published (no wait for the Pods, no steady state)",
    )
    ap.add_argument("--profile", type=Path, help="write py-spy's samples of the window here (raw format)")
    ap.add_argument(
        "--profile-creating",
        type=Path,
        help="the same, from the first create until every status is published",
    )
    args = ap.parse_args(argv)
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if (args.profile or args.profile_creating) and not spy:
        ap.error("--profile needs py-spy (pip install py-spy)")

    cp = ControlPlane()
    cp.start()
    proc, tally = None, {}
    try:
        api = cp.api_client()
        ext = client.ApiextensionsV1Api(api)
        for path in sorted((REPO / "crds").glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            ext.create_custom_resource_definition(crd)
            wait_for(
                lambda: any(
                    c.type == "Established" and c.status == "True"
                    for c in ext.read_custom_resource_definition(crd["metadata"]["name"]).status.conditions
                    or []
                ),
                30,
                "CRD established",
            )
        ns = "bench"
        client.CoreV1Api(api).create_namespace({"metadata": {"name": ns}})
        objs = client.CustomObjectsApi(api)
        wait_for(
            lambda: objs.list_namespaced_custom_object(GROUP, VERSION, ns, "mysqlclusters") is not None,
            30,
            "mysqlclusters served",
        )
        baseline, _ = request_rate(api, 30.0)  # the control plane alone
        log_path = Path(cp.workdir) / "operator.log"
        proc = host_operator.start(
            ns, cp.admin_kubeconfig, log_path, "--loop-seconds", str(args.loop_seconds), cwd=REPO
        )
        wait_for(
            lambda: b"Initial authentication has finished" in log_path.read_bytes(), 60, "operator started"
        )
        _, rss_idle, _ = proc_stat(proc.pid)

        tally = _tallies(api, ns)
        cpu_start, requests_start = proc_stat(proc.pid)[0], _apiserver_requests(api)
        # every process on the 2 cores while clusters are created: the operator is one of them
        others = {c.name: c.proc.pid for c in cp.components if c.proc is not None}
        others["benchmark (its watches)"] = os.getpid()
        others_start = {name: proc_stat(pid)[0] for name, pid in others.items()}
        creating_profiler = (
            _record(spy, proc.pid, args.profile_creating, 1800) if args.profile_creating else None
        )
        t0 = time.monotonic()
        for n in range(args.clusters):
            objs.create_namespaced_custom_object(
                GROUP,
                VERSION,
                ns,
                "mysqlclusters",
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "MySQLCluster",
                    "metadata": {"name": f"c{n:03d}"},
                    "spec": {"flavor": "mariadb", "instances": 3, "storage": {"size": "1Gi"}},
                },
            )
        created = time.monotonic() - t0
        want = args.clusters * OWNED_PER_CLUSTER
        owned = ("secrets", "configmaps", "services", "statefulsets", "pdbs")
        wait_for(
            lambda: sum(tally[kind].count() for kind in owned) >= want,
            900,
            f"{want} owned objects",
            interval=0.2,
        )
        all_owned = time.monotonic() - t0

        wait_for(
            lambda: tally["statuses"].count() == args.clusters, 900, "every status published", interval=0.2
        )
        all_status = time.monotonic() - t0
        cpu_creating = proc_stat(proc.pid)[0] - cpu_start
        others_cpu = {name: proc_stat(pid)[0] - others_start[name] for name, pid in others.items()}
        print(
            f"every status published after {all_status:.1f} s (operator CPU {cpu_creating:.1f} s); "
            "waiting for the control plane's Pods",
            flush=True,
        )
        if creating_profiler is not None:
            creating_profiler.send_signal(signal.SIGINT)  # py-spy writes what it has, then exits
            creating_profiler.wait(60)
        requests_end = _apiserver_requests(api)
        creating = Counter({k: requests_end[k] - requests_start[k] for k in requests_end})
        creating_rows = [
            ("clusters", f"{args.clusters}"),
            ("owned objects", f"{want}"),
            ("create calls for all clusters", f"{created:.1f} s"),
            ("all owned objects exist", f"{all_owned:.1f} s"),
            ("all statuses published", f"{all_status:.1f} s"),
            ("operator CPU until every status was published", f"{cpu_creating:.1f} s"),
            *((f"  CPU of {name} meanwhile", f"{cpu:.1f} s") for name, cpu in others_cpu.items()),
            (
                "API requests per cluster until then (every client: the operator, the control plane, the benchmark)",
                f"{sum(creating.values()) / args.clusters:.1f}",
            ),
            *(
                (f"  {verb} {resource}", f"{n / args.clusters:.1f}")
                for (verb, resource), n in creating.most_common(12)
                if n >= args.clusters / 10
            ),
        ]
        if args.until_published:
            print_table([*creating_rows, ("machine", f"{os.cpu_count()} cores")])
            return 0
        pods = args.clusters * 3
        wait_for(
            lambda: (tally["pods"].count(), tally["full"].count()) == (pods, args.clusters),
            1800,
            f"{pods} Pods created by the control plane",
            interval=2.0,
        )
        all_pods = time.monotonic() - t0

        time.sleep(args.settle)
        profiler = _record(spy, proc.pid, args.profile, args.measure) if args.profile else None
        cpu0, _, _ = proc_stat(proc.pid)
        w0 = time.monotonic()
        rate, by_kind = request_rate(api, args.measure)
        cpu1, rss, peak = proc_stat(proc.pid)
        if profiler is not None:
            profiler.wait(60)
        cpu_pct = 100.0 * (cpu1 - cpu0) / (time.monotonic() - w0)
        # Pods of these clusters never schedule (no node): the scheduler and the StatefulSet
        # controller keep updating their Events (PATCH events). The operator only creates Events.
        operator_rate = max(0.0, rate - baseline - by_kind[("PATCH", "events")])

        rows = [
            *creating_rows,
            ("all Pods created (control plane; then settle and measure)", f"{all_pods:.1f} s"),
            ("operator RSS idle (0 clusters)", f"{rss_idle / 1024:.0f} MiB"),
            ("operator RSS after settling", f"{rss / 1024:.0f} MiB"),
            ("operator peak RSS", f"{peak / 1024:.0f} MiB"),
            (
                f"steady-state CPU ({args.measure:.0f} s window, loop {args.loop_seconds:g} s)",
                f"{cpu_pct:.1f} % of one core",
            ),
            (
                "API requests/s, steady state (operator's share: less the control plane alone and its PATCH events)",
                f"{operator_rate:.1f}",
            ),
            ("API requests/s per cluster", f"{operator_rate / args.clusters:.3f}"),
            ("API requests/s of the control plane alone", f"{baseline:.1f}"),
            *(
                (f"  {verb} {resource}", f"{per_s:.1f}/s")
                for (verb, resource), per_s in by_kind.most_common(8)
                if per_s >= 0.05
            ),
            ("machine", f"{os.cpu_count()} cores"),
        ]
        print_table(rows)
    finally:
        for t in tally.values():
            t.stopped.set()
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
