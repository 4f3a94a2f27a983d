"""Hostile-neighbour benchmark (issue 53; not a test): does a real cluster's failover stay as fast
with hostile tenants' servers beside it, in one operator process?

One `mysql-operator run` (tests/support/host_operator.py) against a real control plane
(tests/support/controlplane.py, no node) manages:
- `real`: 3 real MariaDB 10.11 servers on this host, one per Pod, each on its Pod's own loopback
  address 127.0.100.N:3306, started as the Pod's containers would start them (its init.sh and
  start.sh, its Secret, its certificate: tests/support/standin_kubelet.py, which also writes the
  Pods' status as a kubelet would: Running, podIP, Ready while the server answers);
- `--idle` idle MariaDB clusters whose Pods never get an address (as benchmarks/operator_scale.py);
- in the second phase, 5 hostile MySQL clusters whose Pods' addresses (127.0.101-105.N) are fake
  servers (tests/support/fake_mysql.py, speaking TLS with their own cluster's certificate, as a
  tenant's server would): a 200 MB VERSION(), a byte every 3 s, a GTID set of 10,000 intervals,
  no answer at all after the login, a server_id that is not the Pod's.

Each phase measures `--rounds` failovers of `real`: kill -9 of the primary's server -> the
cluster's status names another primary and a write through that primary (its Pod IP, the app
account, TLS) succeeds. Between rounds the old primary's server starts again (read-only, as a
restarted container) and the benchmark waits until it replicates from the new primary. Phases run
in order: without the hostile clusters, then with them. Prints p50 and max of each phase and their
ratio, the operator's peak RSS, whether it restarted (pid unchanged, liveness answering), and the
PassOverdue Events and conditions of the hostile clusters.

    .venv/bin/python -m benchmarks.hostile_neighbours [--idle 50] [--rounds 5] [--settle 30]

Runs as root (the servers run as the host's mysql user, each in a mount namespace of its own whose
/etc/hosts names the Pods: replicas reach their source by its DNS name).
"""

from __future__ import annotations

import argparse
import base64
import os
import ssl
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

import pymysql
from kubernetes import client

from benchmarks.operator_scale import proc_stat, print_table
from mysql_operator.api import GROUP, VERSION
from tests.support import host_operator
from tests.support.controlplane import ControlPlane, stop_group
from tests.support.crds import apply_crds, project_crds
from tests.support.fake_mysql import Drip, FakeMySQL, Huge, Silent, on_version, serving, version_rows
from tests.support.standin_kubelet import HostServer, StandInKubelet
from tests.support.ports import free_port
from tests.support.wait import Timeout, wait_for

NS = "hostile"
REAL = "real"
REAL_IPS = [f"127.0.100.{o + 1}" for o in range(3)]
APP_DB, APP_USER = "app", "app"
UUID = "9f1c3a52-0b1e-4d7e-8a5e-4f2d1c0b9a77"
FAST = ["--sync-binlog=0", "--innodb-flush-log-at-trx-commit=2", "--innodb-buffer-pool-size=32M"]


def gapped_gtids(intervals: int, offset: int = 0) -> str:
    """A MySQL GTID set of `intervals` intervals (any root can write gapped GTIDs)."""
    return UUID + ":" + ":".join(f"{2 * i + 1 + offset}" for i in range(intervals))


def hostile_answers(name: str, ordinal: int) -> Callable[[str], Any]:
    """What each hostile cluster's fake servers answer (by cluster name)."""
    me = {"hostname": f"{name}-{ordinal}", "report_host": f"{name}-{ordinal}.{name}-headless.{NS}.svc"}
    return {
        "h-huge": lambda: on_version(Huge(200 * 1024 * 1024)),
        "h-drip": lambda: on_version(Drip(version_rows(), every=3.0)),
        "h-gtid": lambda: serving(server_id=str(ordinal + 1), executed=gapped_gtids(10_000, ordinal), **me),
        "h-silent": lambda: on_version(Silent()),
        "h-wrongid": lambda: serving(server_id="4242", **me),
    }[name]()


HOSTILE = ("h-huge", "h-drip", "h-gtid", "h-silent", "h-wrongid")


def cluster_body(name: str, flavor: str, **spec: Any) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLCluster",
        "metadata": {"name": name},
        "spec": {"flavor": flavor, "instances": 3, "storage": {"size": "1Gi"}, **spec},
    }


def secret_data(core: client.CoreV1Api, name: str) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in (core.read_namespaced_secret(name, NS).data or {}).items()}


def exists(read: Callable[[], Any]) -> bool:
    try:
        read()
        return True
    except client.ApiException as e:
        if e.status == 404:
            return False
        raise


class Real:
    """The real cluster: its servers, and what the benchmark asks of them."""

    def __init__(self, api: client.ApiClient, workdir: Path):
        self.core = client.CoreV1Api(api)
        self.objs = client.CustomObjectsApi(api)
        hosts = "127.0.0.1 localhost\n" + "".join(
            f"{ip} {REAL}-{o}.{REAL}-headless.{NS}.svc {REAL}-{o}\n" for o, ip in enumerate(REAL_IPS)
        )
        self.servers = [
            HostServer(self.core, NS, workdir / f"{REAL}-{o}", ip, hosts, FAST)
            for o, ip in enumerate(REAL_IPS)
        ]
        self.start_errors: list[str] = []

    def on_pod(self, ordinal: int, pod: dict) -> None:
        """A new Pod of `ordinal`: its server (re)starts, as its containers would (not while the
        benchmark holds it down)."""
        server = self.servers[ordinal]

        def run() -> None:
            server.stop()
            server.pod = pod
            for _ in range(3):  # a kubelet starts a failed init container again
                if server.held:
                    return
                try:
                    server.start(pod)
                    return
                except Exception as e:  # noqa: BLE001 - reported in the table
                    self.start_errors.append(f"{REAL}-{ordinal}: {type(e).__name__}: {e}"[:300])

        threading.Thread(target=run, daemon=True).start()

    def status(self) -> dict:
        body = self.objs.get_namespaced_custom_object(GROUP, VERSION, NS, "mysqlclusters", REAL)
        return body.get("status") or {}

    def passwords(self) -> dict[str, str]:
        return {k: v.decode() for k, v in secret_data(self.core, f"{REAL}-credentials").items()}

    def root_sql(self, ordinal: int, sql: str) -> list[dict]:
        conn = pymysql.connect(
            unix_socket=str(self.servers[ordinal].socket),
            user="root",
            password=self.passwords()["root-password"],
            connect_timeout=3,
            read_timeout=5,
            cursorclass=pymysql.cursors.DictCursor,
        )
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            conn.close()

    def write(self, ordinal: int) -> bool:
        """An INSERT through that server, as the application does (its Pod IP, TLS)."""
        try:
            conn = pymysql.connect(
                host=REAL_IPS[ordinal],
                port=3306,
                user=APP_USER,
                password=self.passwords()["app-password"],
                database=APP_DB,
                connect_timeout=2,
                read_timeout=5,
                write_timeout=5,
                autocommit=True,
                ssl={"ca": str(self.servers[ordinal].root / "tls" / "ca.crt"), "check_hostname": False},
            )
        except pymysql.err.MySQLError:
            return False
        try:
            with conn.cursor() as cur:
                cur.execute("CREATE TABLE IF NOT EXISTS t (id INT AUTO_INCREMENT PRIMARY KEY, at DOUBLE)")
                cur.execute("INSERT INTO t (at) VALUES (%s)", (time.time(),))
            return True
        except pymysql.err.MySQLError:
            return False
        finally:
            conn.close()

    def primary(self) -> int | None:
        name = self.status().get("currentPrimary") or ""
        return int(name.rsplit("-", 1)[1]) if name.startswith(f"{REAL}-") else None

    def replicating(self, ordinal: int, source: int) -> bool:
        try:
            rows = self.root_sql(ordinal, "SHOW SLAVE STATUS")
        except pymysql.err.MySQLError:
            return False
        return bool(rows) and (
            rows[0]["Slave_IO_Running"] == "Yes"
            and rows[0]["Slave_SQL_Running"] == "Yes"
            and rows[0]["Master_Host"].startswith(f"{REAL}-{source}.")
        )

    def healthy(self) -> tuple[int] | None:
        """(the primary,), once it takes writes and both others replicate from it."""
        p = self.primary()
        if p is None or not self.write(p):
            return None
        return (p,) if all(self.replicating(o, p) for o in range(3) if o != p) else None

    def failover(self, timeout: float) -> float:
        """kill -9 of the primary's server; seconds until the status names another primary and
        a write through it succeeds. The old primary starts again and rejoins before returning."""
        (old,) = wait_for(
            self.healthy, 300, "the real cluster healthy (a primary, two replicas)", interval=0.5
        )
        began = time.monotonic()
        self.servers[old].kill9()

        def moved() -> bool:
            p = self.primary()
            return p is not None and p != old and self.write(p)

        wait_for(moved, timeout, "a new primary that takes writes", interval=0.1)
        took = time.monotonic() - began
        self.servers[old].start()
        new = self.primary()
        assert new is not None
        wait_for(lambda: self.replicating(old, new), 300, f"{REAL}-{old} replicating again", interval=0.5)
        return took


class Hostile:
    """The hostile clusters' fake servers, each with its cluster's certificate."""

    def __init__(self, api: client.ApiClient, workdir: Path):
        self.core = client.CoreV1Api(api)
        self.workdir = workdir
        self.servers: dict[str, list[FakeMySQL]] = {}

    def ips(self, name: str) -> list[str]:
        return [f"127.0.{101 + HOSTILE.index(name)}.{o + 1}" for o in range(3)]

    def start(self, name: str) -> None:
        wait_for(
            lambda: exists(lambda: self.core.read_namespaced_secret(f"{name}-tls", NS)), 120, f"{name}-tls"
        )
        files = secret_data(self.core, f"{name}-tls")
        folder = self.workdir / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tls.crt").write_bytes(files["tls.crt"])
        (folder / "tls.key").write_bytes(files["tls.key"])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(folder / "tls.crt", folder / "tls.key")
        self.servers[name] = [
            FakeMySQL(answer=hostile_answers(name, o), tls=ctx, host=ip, port=3306).__enter__()
            for o, ip in enumerate(self.ips(name))
        ]

    def stop(self) -> None:
        for servers in self.servers.values():
            for s in servers:
                s.__exit__(None, None, None)
        self.servers.clear()


class Sampler:
    """Every second: the operator alive (same pid, liveness answering) and the hostile clusters'
    PassOverdue conditions seen True."""

    def __init__(self, proc, liveness: str, objs: client.CustomObjectsApi):
        self.proc, self.liveness, self.objs = proc, liveness, objs
        self.pid = proc.pid
        self.liveness_failures = 0
        self.overdue_seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            try:
                with urllib.request.urlopen(self.liveness, timeout=5) as r:
                    if r.status != 200:
                        self.liveness_failures += 1
            except OSError:
                self.liveness_failures += 1
            try:
                items = self.objs.list_namespaced_custom_object(GROUP, VERSION, NS, "mysqlclusters")["items"]
            except client.ApiException:
                continue
            for c in items:
                for cond in (c.get("status") or {}).get("conditions") or []:
                    if cond.get("type") == "PassOverdue" and cond.get("status") == "True":
                        self.overdue_seen.add(c["metadata"]["name"])

    def start(self) -> "Sampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def summary(times: list[float]) -> str:
    return (
        f"p50 {statistics.median(times):.2f} s, max {max(times):.2f} s ({len(times)} rounds)"
        if times
        else "-"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle", type=int, default=50, help="idle clusters (Pods without an address)")
    ap.add_argument("--rounds", type=int, default=5, help="failovers per phase")
    ap.add_argument(
        "--settle", type=float, default=30.0, help="seconds the hostile clusters run before measuring"
    )
    ap.add_argument("--failover-timeout", type=float, default=180.0)
    ap.add_argument("--loop-seconds", type=float, default=1.0, help="the operator's default")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        ap.error("run as root: the servers run as the mysql user in mount namespaces of their own")

    workdir = Path(tempfile.mkdtemp(prefix="hostile-"))
    workdir.chmod(0o755)  # the servers' user reaches its folder below
    cp = ControlPlane()
    cp.start()
    # no node: the stand-in kubelet is the node, and the scheduler would only mark every Pod
    # Unschedulable over the status it writes
    next(c for c in cp.components if c.name == "kube-scheduler").stop()
    proc = kubelet = sampler = None
    real: Real | None = None
    hostile = Hostile(cp.api_client(), workdir / "fakes")
    rows: list[tuple[str, str]] = []
    try:
        api = cp.api_client()
        apply_crds(api, project_crds())
        core, objs = client.CoreV1Api(api), client.CustomObjectsApi(api)
        core.create_namespace({"metadata": {"name": NS}})
        wait_for(
            lambda: objs.list_namespaced_custom_object(GROUP, VERSION, NS, "mysqlclusters") is not None,
            30,
            "mysqlclusters served",
        )
        kubelet = StandInKubelet(api, NS).start()
        real = Real(api, workdir)
        kubelet.serve(REAL, REAL_IPS, ready=lambda o: real.servers[o].ready(), on_pod=real.on_pod)

        liveness = f"http://127.0.0.1:{free_port()}/healthz"
        log_path = workdir / "operator.log"
        proc = host_operator.start(
            NS,
            cp.admin_kubeconfig,
            log_path,
            "--liveness",
            liveness,
            "--loop-seconds",
            str(args.loop_seconds),
        )
        sampler = Sampler(proc, liveness, objs)
        wait_for(
            lambda: b"Initial authentication has finished" in log_path.read_bytes(), 120, "operator started"
        )
        sampler.start()

        create = lambda body: objs.create_namespaced_custom_object(GROUP, VERSION, NS, "mysqlclusters", body)  # noqa: E731
        create(cluster_body(REAL, "mariadb", version="10.11", database={"name": APP_DB, "user": APP_USER}))
        for n in range(args.idle):
            create(cluster_body(f"idle{n:03d}", "mariadb"))
        t0 = time.monotonic()
        wait_for(real.healthy, 600, "the real cluster bootstrapped by the operator", interval=1.0)
        rows.append(("real cluster bootstrapped (3 servers, replication)", f"{time.monotonic() - t0:.1f} s"))

        def phase(label: str) -> list[float]:
            out = []
            for r in range(args.rounds):
                took = real.failover(args.failover_timeout)
                print(f"{label} round {r + 1}: failover {took:.2f} s", flush=True)
                out.append(took)
            return out

        without = phase("without")
        _, rss_before, peak_before = proc_stat(proc.pid)

        for name in HOSTILE:
            create(cluster_body(name, "mysql", version="8.4"))
        for name in HOSTILE:
            hostile.start(name)
            kubelet.serve(name, hostile.ips(name), ready=lambda o: True)
        time.sleep(args.settle)  # the operator works on the hostile clusters before we measure
        with_hostile = phase("with")

        events = core.list_namespaced_event(NS, field_selector="reason=PassOverdue").items
        by_cluster: dict[str, int] = {}
        for e in events:
            by_cluster[e.involved_object.name] = by_cluster.get(e.involved_object.name, 0) + (e.count or 1)
        statuses = {
            c["metadata"]["name"]: c.get("status") or {}
            for c in objs.list_namespaced_custom_object(GROUP, VERSION, NS, "mysqlclusters")["items"]
        }
        _, rss, peak = proc_stat(proc.pid)
        live = proc.poll() is None and proc.pid == sampler.pid
        ratio = statistics.median(with_hostile) / statistics.median(without)
        rows += [
            ("idle clusters (Pods without an address)", f"{args.idle}"),
            ("failover without hostile clusters", summary(without)),
            ("failover with 5 hostile clusters", summary(with_hostile)),
            ("ratio of p50s, with / without (goal <= 1.2)", f"{ratio:.2f}"),
            ("ratio of maxima, with / without", f"{max(with_hostile) / max(without):.2f}"),
            (
                "operator RSS before the hostile clusters (peak)",
                f"{rss_before / 1024:.0f} MiB ({peak_before / 1024:.0f})",
            ),
            ("operator RSS at the end", f"{rss / 1024:.0f} MiB"),
            ("operator peak RSS", f"{peak / 1024:.0f} MiB"),
            ("operator restarted", "no (same pid)" if live else "YES"),
            ("liveness probes failed (1/s)", f"{sampler.liveness_failures}"),
            ("PassOverdue Events", ", ".join(f"{k} {v}" for k, v in sorted(by_cluster.items())) or "none"),
            ("PassOverdue condition seen True on", ", ".join(sorted(sampler.overdue_seen)) or "none"),
            *(
                (
                    f"  {name}: phase",
                    f"{statuses.get(name, {}).get('phase')}; "
                    + "; ".join(
                        f"{c['type']}={c['status']} {c.get('reason', '')}"
                        for c in statuses.get(name, {}).get("conditions") or []
                        if c["type"] in ("Available", "Degraded", "PassOverdue")
                    ),
                )
                for name in HOSTILE
            ),
            *(
                (
                    f"  {name}: what its 3 fake servers saw",
                    f"{sum(f.logins for f in hostile.servers[name])} logins, "
                    f"{sum(len(f.queries) for f in hostile.servers[name])} queries",
                )
                for name in HOSTILE
            ),
            (
                "stand-in kubelet errors, server start errors",
                f"{len(kubelet.errors)}, {len(real.start_errors)}",
            ),
            ("machine", f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"),
        ]
        print_table(rows)
        for e in kubelet.errors[:5] + real.start_errors[:5]:
            print("error:", e)
    except Timeout as e:
        print_table(rows or [("result", "incomplete")])
        print(f"\nBLOCKED: {e}", file=sys.stderr)
        if real is not None:
            print("server start errors:", real.start_errors[:5], file=sys.stderr)
        if kubelet is not None:
            print("kubelet errors:", kubelet.errors[:5], file=sys.stderr)
        print(f"operator log: {workdir / 'operator.log'}; servers: {workdir}", file=sys.stderr)
        return 1
    finally:
        if sampler is not None:
            sampler.stop()
        if proc is not None:
            stop_group(proc, 30)
        if kubelet is not None:
            kubelet.stop()
        hostile.stop()
        if real is not None:
            for s in real.servers:
                s.kill9()
        cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
