"""Failover benchmark (not a test): kill -9 the primary under write load, N rounds, default settings.

Three real servers, MariaDB (tests/support/mariadb.py) or MySQL (--flavor mysql,
tests/support/mysql.py), 127.0.0.1 only. The operator's own pass
(`ReplicationEngine.reconcile`, which reconcile.Reconciler calls with its Kubernetes hooks) runs in
a thread as the operator's timer runs it: observe -> decide -> record -> act, then wait the operator's default loop interval (`OperatorConfig.loop_seconds`) before the next
pass. Settings are the operator's for a 3-instance cluster of the spec defaults
(`engine_config.engine_settings` of the parsed spec: mode semisync, failover enabled, delaySeconds
as the CRD defaults it), except that a host-run MariaDB server is never re-seeded (it has no Pod
to restart on a copy).

Load:
- one application writer inserts numbered rows through the primary the loop publishes (as a client
  of the read-write Service would) and records every acknowledged commit with its time;
- one probe per server tries a write on that server directly every few tens of milliseconds and
  records which succeeded: two servers ever accepting writes at once would show as interleaved
  acknowledgements from two servers.

Each round: wait until the cluster is healthy with the writer committing on the primary, kill -9
the primary, measure kill -> first acknowledged write on a new primary, check that every row
acknowledged so far is on the new primary, then restart the killed server (read-only, with
--init-rpl-role=SLAVE so crash recovery truncates what no replica acknowledged) and wait until the
loop has it replicating again. MySQL has no crash-time truncation: a server killed while a
commit waited for its acknowledgement comes back holding it: the loop re-seeds it by CLONE
(errantPolicy Reseed, the spec default with semi-sync); the server shuts itself down on its copy
and the benchmark starts it again, as its container would be, and counts it. Bounded by --rounds
and --deadline.

    .venv/bin/python -m benchmarks.failover_bench [--flavor mariadb|mysql] [--rounds 20] [--compare] [--deadline 1500] [--fault kill|hang]

`--compare` alternates rounds: odd ones wait the failover delay whatever the operator sees (the
behaviour before evidence-graded failover, docs/design.md), even ones act as the operator does.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field

import pymysql

from mysql_operator import topology as t
from mysql_operator.api import GROUP, VERSION, parse
from mysql_operator.engine_config import engine_settings
from mysql_operator.operator import OperatorConfig
from mysql_operator.members import ClusterState, Credentials, Member, Outcome
from mysql_operator.replication import ReplicationEngine
from tests.support.mariadb import ADMIN_USER, MariaDBFactory, MariaDBServer, missing_binaries
from tests.support.mysql import MySQLFactory, mysql_unavailable
from tests.support.wait import Timeout, wait_for
from tests.support.writer import Writer

APP = Credentials("app", "bench-app-pw-5c1e")
REPL = Credentials("repl", "bench-repl-pw-8d42")
DB = "app"
REJOIN_OPTIONS = {  # what the operator's my.cnf gives a restarting server in semi-sync mode
    "mariadb": {"init-rpl-role": "SLAVE", "rpl_semi_sync_slave_enabled": "ON"},
    "mysql": {},
}


class OperatorLoop(threading.Thread):
    """engine.reconcile every `interval` seconds after the previous pass ended (kopf timer, sharp=False)."""

    def __init__(self, engine: ReplicationEngine, interval: float):
        super().__init__(daemon=True)
        self.engine, self.interval = engine, interval
        self.state = ClusterState()
        self.last: Outcome | None = None
        self.primaries: list[str] = []  # every primary the loop published, in order
        self.failed_steps: list[str] = []
        self.timeline: list[tuple[float, float, str]] = []  # (pass started, ended, decision kind)
        self.stop_event = threading.Event()

    def run(self):
        while not self.stop_event.is_set():
            began = time.monotonic()
            try:
                out = self.engine.reconcile(self.state)
            except Exception as e:  # noqa: BLE001 - the operator's timer logs and runs again
                self.failed_steps.append(f"loop pass raised {type(e).__name__}: {e}")
                self.stop_event.wait(self.interval)
                continue
            self.timeline.append((began, time.monotonic(), out.decision.kind))
            if self.state.current_primary and (
                not self.primaries or self.primaries[-1] != self.state.current_primary
            ):
                self.primaries.append(self.state.current_primary)
            self.failed_steps += [
                f"{s.instance} {s.action}: {s.detail}"
                for s in out.steps
                if not s.ok and s.action != "held-out"
            ]
            self.last = out
            self.stop_event.wait(t.next_pass_in(out.decision, self.interval))

    def stop(self):
        self.stop_event.set()
        self.join(60)


class Probe(threading.Thread):
    """Tries a write on one server directly; records (server, monotonic ack time) of successes."""

    def __init__(
        self, server: MariaDBServer, sink: list[tuple[float, str]], lock: threading.Lock, every: float = 0.05
    ):
        super().__init__(daemon=True)
        self.server, self.sink, self.lock, self.every = server, sink, lock, every
        self.stop_event = threading.Event()

    def run(self):
        conn, seq = None, 0
        while not self.stop_event.is_set():
            try:
                if conn is None:
                    conn = app_conn(self.server, timeout=1.0)
                seq += 1
                with conn.cursor() as cur:
                    cur.execute(f"INSERT INTO {DB}.probe VALUES (%s, %s)", (self.server.name, seq))
                with self.lock:
                    self.sink.append((time.monotonic(), self.server.name))
            except pymysql.err.MySQLError:
                _close(conn)
                conn = None
            self.stop_event.wait(self.every)
        _close(conn)


def _close(conn) -> None:
    if conn is not None:
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - a dead connection is closed enough
            pass


def app_conn(server: MariaDBServer, timeout: float):
    return server.connect(user=APP.user, password=APP.password, database=DB, timeout=timeout)


def collapsed(names) -> list[str]:
    out: list[str] = []
    for n in names:
        if not out or out[-1] != n:
            out.append(n)
    return out


@dataclass
class Round:
    number: int
    old: str
    new: str | None = None
    seconds: float | None = None
    decided: float | None = None  # kill -> start of the loop pass that decided the failover
    acked: int = 0
    lost: int = 0
    rejoined: str = ""
    reseeded: bool = False
    failed_steps: list[str] = field(default_factory=list)
    passes: list[str] = field(default_factory=list)  # the first passes after the kill: kind start-end
    mode: str = "evidence"  # "evidence": the operator acts on a refused connection; "delay": it waits


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, -(-len(s) * p // 100) - 1))
    return s[int(k)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flavor", choices=("mariadb", "mysql"), default="mariadb")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument(
        "--compare",
        action="store_true",
        help="odd rounds with the failover delay always waited (act_on_evidence off: the behaviour "
        "before evidence-graded failover), even rounds as the operator runs: both in one run",
    )
    ap.add_argument(
        "--deadline", type=float, default=1500.0, help="stop starting rounds after this many seconds"
    )
    ap.add_argument(
        "--fault",
        choices=("kill", "hang"),
        default="kill",
        help="kill: kill -9 of the primary; hang: SIGSTOP (it still accepts TCP, never answers), "
        "then SIGKILL and a restart once a new primary took a write (what its Pod's restart does)",
    )
    args = ap.parse_args()
    why = mysql_unavailable() if args.flavor == "mysql" else None
    if args.flavor == "mariadb" and missing_binaries():
        why = f"MariaDB server binaries missing ({', '.join(missing_binaries())}): run hack/install-deps.sh"
    if why:
        print(f"cannot run {args.flavor} servers: {why}", file=sys.stderr)
        return 2

    # the operator's own settings for a 3-instance cluster of the spec defaults
    cluster = parse(
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MySQLCluster",
            "metadata": {"name": "db", "namespace": "bench", "generation": 1},
            "spec": {"instances": 3, "flavor": args.flavor},
        }
    )
    spec = cluster.spec.replication
    loop_seconds = OperatorConfig().loop_seconds
    # a host-run MariaDB server has no Pod to restart on a copy (sh/seed.sh): no re-seed there
    settings = dataclasses.replace(engine_settings(cluster), reseed=args.flavor == "mysql")
    print(
        f"fault: {'kill -9' if args.fault == 'kill' else 'SIGSTOP (hang)'} of the primary; times are from it"
    )
    print(
        f"settings: {args.flavor}, 3 instances, mode {spec.mode}, failover delay {settings.failover_delay_seconds:g}s "
        f"(spec default), operator loop every {loop_seconds:g}s (OperatorConfig default)"
    )

    started = time.monotonic()
    factory = MySQLFactory() if args.flavor == "mysql" else MariaDBFactory()
    rounds: list[Round] = []
    loop = writer = None
    probes: list[Probe] = []
    probe_acks: list[tuple[float, str]] = []
    probe_lock = threading.Lock()
    try:
        servers = factory.create(3, semisync=settings.semisync, prefix="bench")
        for k, s in enumerate(servers):
            s.name = f"db-{k}"
        by_name = {s.name: s for s in servers}
        engine = ReplicationEngine(
            [Member(s.name, k, s.host, s.port) for k, s in enumerate(servers)],
            Credentials(ADMIN_USER, factory.admin_password),
            REPL,
            settings,
            app=APP,
            app_database=DB,
        )
        engine.reseeds.keep_evidence = lambda name, gtids, events: "the benchmark's output (not kept)"
        loop = OperatorLoop(engine, loop_seconds)
        loop.start()

        def healthy() -> bool:
            out = loop.last
            return (
                out is not None
                and isinstance(out.decision, t.Healthy)
                and all(s.reachable for s in out.observed)
            )

        wait_for(healthy, 120, "the cluster to bootstrap healthy")
        primary = by_name[loop.state.current_primary]
        with app_conn(primary, timeout=5) as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(40))")
            cur.execute("CREATE TABLE probe (server VARCHAR(20), seq INT, PRIMARY KEY (server, seq))")
        writer = Writer(
            lambda name: app_conn(by_name[name], timeout=1.0),
            f"INSERT INTO {DB}.t VALUES (%s, %s)",
            target=lambda: loop.state.current_primary,
        )
        writer.start()
        for s in servers:
            probes.append(Probe(s, probe_acks, probe_lock))
            probes[-1].start()

        for number in range(1, args.rounds + 1):
            if time.monotonic() - started > args.deadline:
                print(f"deadline of {args.deadline:g}s reached: stopping after {number - 1} rounds")
                break
            # steady state: healthy, every server replicating, the writer committing on the primary
            wait_for(healthy, 120, f"round {number}: a healthy cluster")
            old = by_name[loop.state.current_primary]
            mark = len(writer.acked)
            wait_for(
                lambda: sum(1 for _, s, _ in writer.acked[mark:] if s == old.name) >= 50,
                60,
                f"round {number}: 50 acknowledged writes on {old.name}",
            )
            r = Round(number, old.name, mode="delay" if args.compare and number % 2 else "evidence")
            engine.settings = dataclasses.replace(settings, act_on_evidence=r.mode == "evidence")
            rounds.append(r)
            steps_before = len(loop.failed_steps)
            killed_at = time.monotonic()
            if args.fault == "hang":
                old.sigstop()
            else:
                old.kill9()

            def first_new_ack():
                for _, s, ts in writer.acked[mark:]:
                    if ts > killed_at and s != old.name:
                        return (s, ts)
                return None

            try:
                r.new, ts = wait_for(first_new_ack, 120, f"round {number}: a write on a new primary")
            except Timeout as e:
                print(f"round {number}: {e}; last decision {loop.last.decision if loop.last else None}")
                break
            r.seconds = ts - killed_at
            snapshot = {n for n, _, _ in writer.acked}
            found = {row[0] for row in by_name[r.new].query(f"SELECT id FROM {DB}.t")}
            r.acked, r.lost = len(snapshot), len(snapshot - found)

            if args.fault == "hang":
                old.kill9()  # as its Pod's restart (the operator's fence of a hung old primary)
            old.restart(**REJOIN_OPTIONS[args.flavor])

            def rejoined():
                if not old.alive:  # re-seeded: it shut down on its copy (its container restarts it)
                    print(
                        f"round {number:2d}: {old.name} re-seeded by CLONE: starting it on its copy",
                        flush=True,
                    )
                    old.start()
                    r.reseeded = True
                out = loop.last
                if out is None:
                    return None
                if isinstance(out.decision, t.Errant) and old.name in out.decision.instances:
                    return "held out: " + "; ".join(out.decision.reasons)
                me = next(s for s in out.observed if s.name == old.name)
                if (
                    isinstance(out.decision, t.Healthy)
                    and me.reachable
                    and me.source == r.new
                    and me.io_running
                    and me.sql_running
                ):
                    return "rejoined"
                return None

            r.rejoined = wait_for(rejoined, 300, f"round {number}: {old.name} to rejoin")
            if r.reseeded and r.rejoined == "rejoined":
                r.rejoined = "re-seeded, rejoined"
            r.failed_steps = loop.failed_steps[steps_before:]
            r.passes = [
                f"{kind} {began - killed_at:.2f}-{ended - killed_at:.2f}"
                for began, ended, kind in list(loop.timeline)
                if ended > killed_at and kind != "Healthy"
            ][:4]
            r.decided = next(
                (
                    began - killed_at
                    for began, _, kind in list(loop.timeline)
                    if began > killed_at and kind == "Failover"
                ),
                None,
            )
            print(
                f"round {number:2d}: {r.old} killed -> {r.new} accepting writes after {r.seconds:.2f}s; "
                f"acknowledged {r.acked}, lost {r.lost}; {r.old} {r.rejoined}; passes after the kill: "
                f"{', '.join(r.passes)}",
                flush=True,
            )
            if not r.rejoined.endswith("rejoined"):
                print(f"stopping: {r.old} was not allowed back ({r.rejoined})")
                break
    finally:
        if writer is not None:
            writer.stop_event.set()
            writer.join(10)
        for p in probes:
            p.stop_event.set()
        for p in probes:
            p.join(10)
        if loop is not None:
            loop.stop()
            loop.engine.close()
        failed = any(r.lost or r.seconds is None for r in rounds)
        if failed:
            print(factory.logs_report(30), file=sys.stderr)
        factory.close()

    # ---- report -------------------------------------------------------------------------------
    done = [r for r in rounds if r.seconds is not None]
    with probe_lock:
        accepted = collapsed(s for _, s in sorted(probe_acks))
    # probes reach every server directly: if two servers ever took writes at once, their
    # acknowledgements interleave and the sequence of accepting servers has more changes than the
    # sequence of primaries the loop published: it is then no run of consecutive published ones
    # (the probes may begin after the first primary was published, which left it out: that run
    # reported two servers at once with none)
    two_at_once = not any(
        loop.primaries[i : i + len(accepted)] == accepted
        for i in range(len(loop.primaries) - len(accepted) + 1)
    )
    print()
    print(
        f"| round | mode | {'killed' if args.fault == 'kill' else 'hung'} | new primary | {args.fault} -> start of the loop pass that fails over | {args.fault} -> first write on new primary "
        "| acknowledged rows (cumulative) | lost | old primary |"
    )
    print("|---:|---|---|---|---:|---:|---:|---:|---|")
    for r in rounds:
        secs = f"{r.seconds:.2f} s" if r.seconds is not None else "no new primary"
        decided = f"{r.decided:.2f} s" if r.decided is not None else "-"
        print(
            f"| {r.number} | {r.mode} | {r.old} | {r.new or '-'} | {decided} | {secs} | {r.acked} | {r.lost} "
            f"| {r.rejoined or '-'} |"
        )
    print()
    print(f"rounds completed: {len(done)} of {args.rounds} requested")
    for mode in ("delay", "evidence"):
        secs = [r.seconds for r in done if r.mode == mode]
        if secs:
            print(
                f"{mode}: {args.fault} -> first write accepted on the new primary: p50 {statistics.median(secs):.2f} s, "
                f"p99 {percentile(secs, 99):.2f} s, max {max(secs):.2f} s, min {min(secs):.2f} s "
                f"({len(secs)} rounds)"
            )
    print(
        f"acknowledged rows: {len(writer.acked) if writer else 0}; lost acknowledged rows: "
        f"{sum(r.lost for r in rounds)}"
    )
    print(
        f"two servers accepting writes at once: {'YES' if two_at_once else 'no'} "
        f"(probe acknowledgements {len(probe_acks)}; accepting servers in order: "
        f"{' '.join(accepted)}; published primaries: {' '.join(loop.primaries)})"
    )
    steps = [s for r in rounds for s in r.failed_steps]
    if steps:
        print(f"steps not ok during rounds ({len(steps)}): " + "; ".join(steps[:5]))
    print(
        f"old primaries re-seeded by CLONE (their unacknowledged tail discarded): {sum(r.reseeded for r in rounds)}"
    )
    print(f"wall time {time.monotonic() - started:.0f} s")
    ok = len(done) == args.rounds and not any(r.lost for r in rounds) and not two_at_once
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
