"""Steady-state cost of running clusters (not a test): API requests per second and CPU the
operator spends on clusters whose servers run and where nothing changes.

Needs root and the local cluster (`make cluster-up`; started here and stopped after if none
runs). Creates `--clusters` MySQLClusters of `--instances` MariaDB servers in their own namespace,
runs the operator of a checkout (`--repo`, default this one: compare two checkouts on the same
machine) as a host process for that namespace at the default loop (1 s) and resync (300 s), waits
until every cluster is Ready, lets it settle, then measures over `--measure` seconds (default one
resync period and then some): the operator's CPU, and the API requests per second from the
apiserver's own apiserver_request_total (every verb but WATCH), less the same rate measured with
the operator stopped (the kubelet, controllers and probes go on either way).

    .venv/bin/python -m benchmarks.steady_requests [--clusters 3] [--instances 2] [--repo PATH]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from kubernetes import client

from mysql_operator.k8s.client import api_client

from benchmarks.operator_scale import proc_stat, request_rate, print_table
from e2e.helpers import Cluster, cluster_spec, install_crds
from tests.support import cluster as cluster_mod
from tests.support import host_operator
from tests.support.wait import wait_for

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "bench-steady"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", type=int, default=3)
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--settle", type=float, default=30.0)
    ap.add_argument("--measure", type=float, default=310.0)
    ap.add_argument("--baseline", type=float, default=60.0, help="seconds measured with the operator stopped")
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout whose operator runs")
    args = ap.parse_args(argv)

    started = None
    state = cluster_mod.running_state()
    if state is None:
        started = cluster_mod.Cluster()
        started.up()
        state = cluster_mod.running_state()
    assert state is not None
    kubeconfig = state["kubeconfig"]
    api = api_client(kubeconfig)
    core = client.CoreV1Api(api)
    proc = None
    try:
        install_crds(api)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        log_path = Path(f"/tmp/steady-requests-{os.getpid()}.log")
        proc = host_operator.start(NAMESPACE, kubeconfig, log_path, "--resolver", "ip", cwd=args.repo)
        clusters = [Cluster(api, NAMESPACE, f"steady{n}") for n in range(args.clusters)]
        t0 = time.monotonic()
        for c in clusters:
            c.create(cluster_spec(args.instances, "mariadb"))
        for c in clusters:
            c.wait_ready(600, instances=args.instances)
        ready = time.monotonic() - t0
        time.sleep(args.settle)  # a settling period before measuring, not a condition
        cpu0, _, _ = proc_stat(proc.pid)
        w0 = time.monotonic()
        with_operator, by_kind = request_rate(api, args.measure)
        cpu1, rss, _ = proc_stat(proc.pid)
        cpu = 100.0 * (cpu1 - cpu0) / (time.monotonic() - w0)
        phases = [c.status().get("phase") for c in clusters]
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
        proc = None
        without, _ = request_rate(api, args.baseline)
        operator = max(0.0, with_operator - without)
        rows = [
            ("checkout", str(args.repo)),
            ("clusters x instances (MariaDB, running)", f"{args.clusters} x {args.instances}"),
            ("created to all Ready", f"{ready:.0f} s"),
            ("phases after the window", ", ".join(p or "-" for p in phases)),
            ("operator CPU, steady state", f"{cpu:.1f} % of one core"),
            ("operator RSS", f"{rss / 1024:.0f} MiB"),
            ("API requests/s with the operator", f"{with_operator:.2f}"),
            ("API requests/s with it stopped", f"{without:.2f}"),
            ("operator's API requests/s", f"{operator:.2f}"),
            ("operator's API requests/s per cluster", f"{operator / args.clusters:.3f}"),
            *(
                (f"  {verb} {res}", f"{per_s:.2f}/s")
                for (verb, res), per_s in by_kind.most_common(10)
                if per_s >= 0.01
            ),
            ("machine", f"{os.cpu_count()} cores"),
        ]
        print_table(rows)
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
        # no operator runs any more to remove its finalizer: remove it by hand (as the README says)
        objs = client.CustomObjectsApi(api)
        for item in objs.list_namespaced_custom_object(
            "mysql.operator.dev", "v1alpha1", NAMESPACE, "mysqlclusters"
        )["items"]:
            name = item["metadata"]["name"]
            objs.patch_namespaced_custom_object(
                "mysql.operator.dev",
                "v1alpha1",
                NAMESPACE,
                "mysqlclusters",
                name,
                {"metadata": {"finalizers": None}},
            )
        core.delete_namespace(NAMESPACE)
        wait_for(lambda: not _exists(core, NAMESPACE), 300, "namespace deleted")
        if started is not None:
            started.down()
    return 0


def _exists(core: client.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespace(name)
        return True
    except client.ApiException as e:
        if e.status == 404:
            return False
        raise


if __name__ == "__main__":
    sys.exit(main())
