"""Local cluster timings (not a test): control-plane start/stop, one-node cluster up/down, and
MariaDB Pod start latency. Prints a table of min / median / max per measurement.

    .venv/bin/python -m benchmarks.local_cluster [--rounds 3] [--pods 5] [--skip-cluster]

Control plane: `--rounds` sequential start/stop cycles, then one round of two control planes
started at the same time (they must not collide: ports are chosen at run time, data in
separate temporary folders). Cluster: `--rounds` cycles of `Cluster().up()` / `.down()` with
warm caches (needs root, and no other local cluster running). Pods: on the last cluster,
`--pods` bare MariaDB Pods from the local image, each timed from the create call to Running
(the kubelet's status) and to the first SQL answer from the host over the Pod IP.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import pymysql
from kubernetes import client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.cluster import Cluster, running_state  # noqa: E402
from tests.support.controlplane import ControlPlane  # noqa: E402
from tests.support.wait import wait_for  # noqa: E402

MARIADB_IMAGE = "localhost/mariadb:10.11"
BENCH_PASSWORD = "bench-only"  # a throwaway Pod's; not anybody's secret


def timed(fn) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def control_plane_rounds(rounds: int, out: dict[str, list[float]]) -> None:
    for _ in range(rounds):
        cp = ControlPlane()
        out.setdefault("control plane: start to ready", []).append(timed(cp.start))
        out.setdefault("control plane: stop", []).append(timed(cp.stop))
    # Two at once: both must come up, on different ports, and stop cleanly.
    planes = [ControlPlane(), ControlPlane()]
    errors: list[BaseException] = []

    def start(cp):
        try:
            out.setdefault("control plane: start, two at once", []).append(timed(cp.start))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=start, args=(cp,)) for cp in planes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ports = {cp.api_port for cp in planes}
    for cp in planes:
        cp.stop()
    if errors or len(ports) != 2:
        raise SystemExit(f"two control planes at once failed: {errors or ports}")


def _mariadb_pod(name: str) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "mariadb",
                    "image": MARIADB_IMAGE,
                    "imagePullPolicy": "Never",
                    "env": [{"name": "MARIADB_ROOT_PASSWORD", "value": BENCH_PASSWORD}],
                    "ports": [{"containerPort": 3306}],
                }
            ],
        },
    }


def pod_rounds(cluster: Cluster, pods: int, out: dict[str, list[float]]) -> None:
    core = client.CoreV1Api(cluster.cp.api_client())
    ns = f"bench-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    wait_for(lambda: core.list_namespaced_service_account(ns).items, 60, "default ServiceAccount")
    try:
        for i in range(pods):
            name = f"mariadb-{i}"
            t0 = time.monotonic()
            core.create_namespaced_pod(ns, _mariadb_pod(name))
            pod = wait_for(
                lambda: (p := core.read_namespaced_pod(name, ns)).status.phase == "Running" and p,
                120,
                f"{name} Running",
                interval=0.05,
            )
            out.setdefault("MariaDB Pod: create to Running", []).append(time.monotonic() - t0)

            def answers():
                conn = pymysql.connect(
                    host=pod.status.pod_ip, user="root", password=BENCH_PASSWORD, connect_timeout=1
                )
                with conn, conn.cursor() as cur:
                    cur.execute("SELECT 1")
                    return cur.fetchone()[0] == 1

            wait_for(answers, 120, f"{name} answering SQL", interval=0.05)
            out.setdefault("MariaDB Pod: create to first SQL answer", []).append(time.monotonic() - t0)
            core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
    finally:
        core.delete_namespace(ns)


def cluster_rounds(rounds: int, pods: int, out: dict[str, list[float]]) -> None:
    if running_state() is not None:
        raise SystemExit("a local cluster is running: stop it (`make cluster-down`) first")
    for r in range(rounds):
        c = Cluster()
        c.up()
        out.setdefault("cluster up: images checked (built if changed)", []).append(c.timings["images"])
        out.setdefault("cluster up: control plane ready", []).append(c.timings["control-plane"])
        out.setdefault("cluster up: node Ready", []).append(c.timings["node-ready"])
        out.setdefault("cluster up: all (provisioner, S3)", []).append(c.timings["ready"])
        try:
            if r == rounds - 1 and pods:
                pod_rounds(c, pods, out)
        finally:
            out.setdefault("cluster down", []).append(timed(c.down))


def format_table(rows: dict[str, list[float]]) -> str:
    head = f"| {'measurement':<46} | {'n':>2} | {'min s':>6} | {'median s':>8} | {'max s':>6} |"
    lines = [head, "|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|"]
    for name, values in rows.items():
        lines.append(
            f"| {name:<46} | {len(values):>2} | {min(values):>6.1f} | "
            f"{statistics.median(values):>8.1f} | {max(values):>6.1f} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pods", type=int, default=5)
    ap.add_argument("--skip-cluster", action="store_true", help="control plane only (no root needed)")
    args = ap.parse_args()
    out: dict[str, list[float]] = {}
    try:
        control_plane_rounds(args.rounds, out)
        if not args.skip_cluster:
            cluster_rounds(args.rounds, args.pods, out)
    finally:
        if out:
            print(format_table(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
