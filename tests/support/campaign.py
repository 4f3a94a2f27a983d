"""A fault campaign on real servers (issue 45): seeded schedules of one to three overlapping
faults against a 3-instance semi-sync cluster run by the operator's own engine, under a writer
that records every acknowledged commit, and a checker.

The servers are this machine's (tests/support/mariadb.py, tests/support/mysql.py, 127.0.0.1):
the faults here need no Kubernetes. The "operator" is `ReplicationEngine.reconcile` in a loop
thread, every `OperatorConfig.loop_seconds`, with the spec defaults' settings (semi-sync, errantPolicy
Reseed: MySQL re-seeds by CLONE; a host-run MariaDB server has no Pod to copy onto, so it is held
out instead - counted apart, as `held_out`). A kubelet stand-in starts a server whose process
ended (a CLONE ends it to restart on its copy, the operator's restart_instance kills it as a Pod
deletion would), except while a kill fault holds it down.

Faults (`KINDS`), each on a role resolved when it starts (the primary then, a replica, any):
- kill: SIGKILL, restarted when the fault ends (as a container: read-only, MariaDB with
  --init-rpl-role=SLAVE so crash recovery drops what no replica acknowledged)
- stop: SIGSTOP, SIGCONT when it ends (a hung process, a paused VM)
- cut: the operator cannot reach the server, everyone else can (the engine's member points at a
  loopback address 127.0.9.<n> that takes connections and never answers; replicas keep theirs)
- lag: a replica's applier blocked behind FLUSH TABLES WITH READ LOCK (it receives and
  acknowledges, applies nothing)
- restart: the operator process replaced by a new one between two passes (what the cluster
  status keeps carries over: the recorded primary, each member's last executed GTIDs)
- full (`VOLUME_KINDS`, with `--volumes`): a replica's volume filled up - each data directory is
  a tmpfs of VOLUME_BYTES, and a file takes every byte left until the fault ends (the server's
  writes get ENOSPC: its relay log, its tables, a restart's recovery)

The checker: every acknowledged commit on the primary at the end (`lost`); samples, every
`SAMPLE_SECONDS`, of each server's read_only and of the primary the operator recorded (where
-rw routes): never two writable servers (`two_writable`), never -rw on a read-only server while
another is writable (`misrouted`); full strength - every instance a replicating replica of the
primary - within `converge_seconds` of the last fault's end, with no manual step (`converged`).
Write unavailability: the longest gap between two acknowledged commits from the first fault on.

A schedule is a function of its seed (`schedule(seed)`): printed, and replayed by its seed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pymysql

from mysql_operator import topology as t
from mysql_operator.api import GROUP, VERSION, parse
from mysql_operator.engine_config import engine_settings
from mysql_operator.operator import OperatorConfig
from mysql_operator.members import ClusterState, Credentials, Member
from mysql_operator.replication import ReplicationEngine
from tests.support.mariadb import ADMIN_USER, MariaDBFactory
from tests.support.wait import Timeout, wait_for
from tests.support.writer import Writer

KINDS = ("kill", "stop", "cut", "lag", "restart")
VOLUME_KINDS = (*KINDS, "full")  # a separate draw: a seed of KINDS gives the schedule it always gave
VOLUME_BYTES = 1 << 30
FILLER = ".campaign-filler"
ROLES = ("primary", "replica", "any")
SAMPLE_SECONDS = 0.2
APP = Credentials("app", "campaign-app-pw-3e9d")
REPL = Credentials("repl", "campaign-repl-pw-6a1f")
DB = "app"
REJOIN = {"mariadb": {"init-rpl-role": "SLAVE", "rpl_semi_sync_slave_enabled": "ON"}, "mysql": {}}


@dataclass(frozen=True)
class Fault:
    kind: str
    role: str  # resolved to an instance when the fault starts
    start: float  # seconds after the schedule starts
    duration: float

    @property
    def end(self) -> float:
        return self.start + self.duration

    def __str__(self) -> str:
        return f"{self.kind}({self.role}) {self.start:.1f}-{self.end:.1f}s"


# a kind's role when it has only one (what a lag fault needs: a replica; an operator fault: the
# operator's active Pod), and the kinds that are one instant (what heals them is the system's own
# doing: the operator started again, a Pod recreated by its StatefulSet)
FIXED_ROLES = {"lag": "replica", "full": "replica"}
INSTANT = frozenset({"restart"})


def schedule(
    seed: int,
    max_faults: int = 3,
    kinds: tuple[str, ...] = KINDS,
    fixed_roles: dict[str, str] = FIXED_ROLES,
    instant: frozenset[str] = INSTANT,
) -> list[Fault]:
    """One to `max_faults` faults drawn from `kinds`, each starting before the previous one ends
    (they overlap). The defaults are the host campaign's (a seed gives the schedule it always gave)."""
    rnd = random.Random(seed)
    count = rnd.choices(range(1, max_faults + 1), weights=[35, 35, 30][:max_faults])[0]
    out: list[Fault] = []
    at = rnd.uniform(0.0, 2.0)
    for _ in range(count):
        kind = rnd.choice(kinds)
        role = fixed_roles.get(kind) or rnd.choice(ROLES)
        duration = 0.0 if kind in instant else rnd.uniform(3.0, 12.0)
        out.append(Fault(kind, role, round(at, 1), round(duration, 1)))
        at = rnd.uniform(at, max(at + 0.5, out[-1].end - 0.5)) if duration else at + rnd.uniform(0.5, 3.0)
    return out


@dataclass
class Result:
    seed: int
    flavor: str
    faults: list[str]
    # the kinds its faults were drawn from (replay: schedule(seed, kinds))
    kinds: list[str] = field(default_factory=lambda: list(KINDS))
    applied: list[str] = field(default_factory=list)  # what each fault did, to whom
    acked: int = 0
    lost: int = 0
    two_writable: int = 0
    misrouted: int = 0
    samples: int = 0
    converged: bool = False
    held_out: str = ""  # MariaDB on this host: errant and not re-seeded (no Pod to copy onto)
    converge_seconds: float | None = None  # last fault's end -> full strength
    unavailable_seconds: float = 0.0  # the longest gap between acknowledged commits
    failovers: int = 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return (
            not self.error
            and self.lost == 0
            and self.two_writable == 0
            and self.misrouted == 0
            and (self.converged or bool(self.held_out))
        )


def drive(
    faults: list[Fault], apply: Callable[[Fault], Callable[[], None]], tick: Callable[[], None]
) -> None:
    """Start each fault at its time (`apply` returns what ends it) and end it at its end, calling
    `tick` between; whatever stops it (an error, an interrupt), every fault started is ended."""
    began = time.monotonic()
    pending = sorted(faults, key=lambda f: f.start)
    heals: list[tuple[float, Callable[[], None]]] = []
    try:
        while pending or heals:
            now = time.monotonic() - began
            for f in [f for f in pending if f.start <= now]:
                pending.remove(f)
                heals.append((f.end, apply(f)))
            for end, heal in [h for h in heals if h[0] <= now]:
                heals.remove((end, heal))
                heal()
            tick()
            time.sleep(0.05)
    finally:
        for _, heal in heals:
            with contextlib.suppress(Exception):
                heal()


def settle_writes(r: Result, writer: Writer, began: float) -> None:
    """The writer stopped (once writes go on again, if the cluster converged); its count and the
    longest gap between acknowledged commits from the first fault (`began`, monotonic) on."""
    at = len(writer.acked)
    if r.converged:
        wait_for(lambda: len(writer.acked) > at + 10, 60, "writes going on")
    writer.stop()
    acks = [a.at for a in writer.acked if a.at >= began - 1]
    r.unavailable_seconds = max((b - a for a, b in zip(acks, acks[1:])), default=0.0)
    r.acked = len(writer.acked)


def take_counts(r: Result, monitor: Any) -> None:
    """The monitor stopped, its counts in the result (its first bad samples as the error)."""
    monitor.stop()
    r.samples, r.two_writable, r.misrouted = monitor.samples, monitor.two_writable, monitor.misrouted
    if monitor.bad:
        r.error = r.error or "; ".join(monitor.bad[:3])


class Loop(threading.Thread):
    """The operator's pass every `interval` seconds; `between(fn)` runs fn(loop) between passes
    (membership changes, an operator restart: never while a pass runs)."""

    def __init__(self, engine: ReplicationEngine, interval: float, make: Callable[[], ReplicationEngine]):
        super().__init__(daemon=True)
        self.engine, self.interval, self.make = engine, interval, make
        self.state = ClusterState()
        self.last: Any = None
        self.kinds: list[str] = []
        self.errors: list[str] = []
        self._todo: list[Callable[["Loop"], None]] = []
        self._lock = threading.Lock()
        self.stop_event = threading.Event()

    def between(self, fn: Callable[["Loop"], None]) -> None:
        with self._lock:
            self._todo.append(fn)

    def restart_operator(self) -> None:
        """A new engine, knowing what the status would tell it."""
        old = self.engine
        new = self.make()
        new.set_members(list(old.members.values()))
        new.observer.recorded_executed = {n: o.executed for n, o in old.observer.last_observations.items()}
        new.observer.primary_since = old.observer.primary_since
        old.close()
        self.engine = new

    def run(self) -> None:
        while not self.stop_event.is_set():
            with self._lock:
                todo, self._todo = self._todo, []
            for fn in todo:
                fn(self)
            try:
                out = self.engine.reconcile(self.state)
            except Exception as e:  # noqa: BLE001 - the operator's timer logs and runs again
                self.errors.append(f"pass raised {type(e).__name__}: {e}")
                self.stop_event.wait(self.interval)
                continue
            self.last = out
            self.kinds.append(out.decision.kind)
            self.stop_event.wait(t.next_pass_in(out.decision, self.interval))

    def stop(self) -> None:
        self.stop_event.set()
        self.join(60)
        self.engine.close()


class Monitor(threading.Thread):
    """Every SAMPLE_SECONDS: each server's read_only (None: no answer within the sample) and
    the recorded primary. Counts two writable servers, and -rw on a read-only server while
    another is writable."""

    def __init__(self, servers, admin_password: str, routed: Callable[[], str | None]):
        super().__init__(daemon=True)
        self.servers, self.password, self.routed = servers, admin_password, routed
        self.samples = self.two_writable = self.misrouted = 0
        self.bad: list[str] = []
        self.stop_event = threading.Event()
        self._conns: dict[str, Any] = {}

    def _read_only(self, s) -> int | None:
        return read_only(
            self._conns,
            s.name,
            lambda: pymysql.connect(
                host=s.host,
                port=s.port,
                user=ADMIN_USER,
                password=self.password,
                connect_timeout=SAMPLE_SECONDS,
                read_timeout=SAMPLE_SECONDS,
                autocommit=True,
            ),
        )

    def run(self) -> None:
        while not self.stop_event.wait(SAMPLE_SECONDS):
            routed = self.routed()
            seen = {s.name: self._read_only(s) for s in self.servers}
            writable = sorted(n for n, ro in seen.items() if ro == 0)
            self.samples += 1
            if len(writable) > 1:
                self.two_writable += 1
                self.bad.append(f"two writable: {writable}")
            if routed is not None and seen.get(routed) == 1 and writable:
                self.misrouted += 1
                self.bad.append(f"-rw on read-only {routed} while {writable} writable")

    def stop(self) -> None:
        self.stop_event.set()
        self.join(10)
        for conn in self._conns.values():
            _close(conn)


def read_only(conns: dict[str, Any], key: str, connect: Callable[[], Any]) -> int | None:
    """A server's @@global.read_only over the connection kept in conns[key] (`connect` makes one);
    None: no answer within the sample (the connection is dropped, the next sample makes another)."""
    try:
        conn = conns.get(key)
        if conn is None:
            conn = conns[key] = connect()
        with conn.cursor() as cur:
            cur.execute("SELECT @@global.read_only")
            return int(cur.fetchone()[0])
    except Exception:  # noqa: BLE001 - no answer within the sample
        conn = conns.pop(key, None)
        if conn is not None:
            _close(conn)
        return None


def _close(conn) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - a dead connection is closed enough
        pass


def _fill(datadir: Path) -> Callable[[], None]:
    """A full volume: a file takes every byte left on the data directory's tmpfs (a file already
    there, from an overlapping fault of the same server, stays until that one ends)."""
    filler = datadir / FILLER
    if filler.exists():
        return lambda: None
    fd = os.open(filler, os.O_CREAT | os.O_WRONLY, 0o600)
    try:  # in ever smaller pieces: what statvfs says is free is not all a file can take
        size, chunk = 0, 64 << 20
        while chunk >= 4096:
            try:
                os.posix_fallocate(fd, size, chunk)
                size += chunk
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                chunk //= 2
    finally:
        os.close(fd)
    return lambda: filler.unlink(missing_ok=True)


def settings_for(flavor: str) -> t.Settings:
    """The operator's settings for a 3-instance cluster of the spec defaults; a host-run MariaDB
    server is never re-seeded (it has no Pod to restart on a copy)."""
    cluster = parse(
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MySQLCluster",
            "metadata": {"name": "db", "namespace": "campaign", "generation": 1},
            "spec": {"instances": 3, "flavor": flavor},
        }
    )
    return dataclasses.replace(engine_settings(cluster), reseed=flavor == "mysql")


class Run:
    """One schedule on three new servers of `factory`."""

    def __init__(
        self,
        factory: MariaDBFactory,
        flavor: str,
        seed: int,
        converge_seconds: float = 180.0,
        kinds: tuple[str, ...] = KINDS,
    ):
        self.factory, self.flavor, self.seed = factory, flavor, seed
        self.faults = schedule(seed, kinds=kinds)
        self.converge_seconds = converge_seconds
        self.volumes = "full" in kinds
        self.result = Result(seed, flavor, [str(f) for f in self.faults], list(kinds))
        self.down: set[str] = set()  # held down by a kill fault: the kubelet stand-in waits
        self.locks: dict[str, Any] = {}  # lag faults' FLUSH TABLES WITH READ LOCK sessions
        self.cut_off: set[str] = set()  # cut from the operator by a cut fault

    def _engine(self) -> ReplicationEngine:
        e = ReplicationEngine(
            [Member(s.name, k, s.host, s.port) for k, s in enumerate(self.servers)],
            Credentials(ADMIN_USER, self.factory.admin_password),
            REPL,
            settings_for(self.flavor),
            app=APP,
            app_database=DB,
        )
        e.reseeds.keep_evidence = lambda name, gtids, events: "the campaign's output (not kept)"
        e.restart_instance = self._restart
        return e

    def _restart(self, name: str) -> None:
        """The operator restarts a server (its Pod deleted): killed here, started again read-only
        by the kubelet stand-in."""
        self.by_name[name].kill9()
        self.result.applied.append(f"{name}: restarted by the operator")

    def _resolve(self, role: str, rnd: random.Random) -> str:
        names = [s.name for s in self.servers]
        primary = self.loop.state.current_primary
        if role == "primary" and primary:
            return primary
        if role == "replica":
            names = [n for n in names if n != primary] or names
        return rnd.choice(names)

    def _apply(self, f: Fault, rnd: random.Random) -> Callable[[], None]:
        """Start fault `f`; returns what ends it."""
        if f.kind == "restart":
            self.loop.between(lambda loop: loop.restart_operator())
            self.result.applied.append(f"{f}: operator restarted")
            return lambda: None
        name = self._resolve(f.role, rnd)
        s = self.by_name[name]
        self.result.applied.append(f"{f}: {name}")
        if f.kind == "kill":
            if name in self.down or not s.alive:
                return lambda: None
            self.down.add(name)
            s.kill9()

            def heal_kill() -> None:
                self.down.discard(name)
                if not s.alive:
                    s.restart(**REJOIN[self.flavor])

            return heal_kill
        if f.kind == "stop":
            if not s.alive or s.stopped:
                return lambda: None
            s.sigstop()
            return s.sigcont
        if f.kind == "cut":
            if name in self.cut_off:  # cut already (an overlapping cut of the same server)
                return lambda: None
            self.cut_off.add(name)
            member = self.loop.engine.members[name]
            # what a partition between the operator and a running server is to the operator: its
            # address (a Pod keeps its IP) takes connections and never answers. Not "no address":
            # that is a Pod that does not run, which the operator need not fence
            silent = socket.create_server((f"127.0.9.{member.ordinal + 1}", member.port), backlog=64)

            def cut(loop: Loop) -> None:
                m = loop.engine.members[name]
                loop.engine.set_members(
                    [
                        dataclasses.replace(m, host=silent.getsockname()[0], source_host=m.host)
                        if n == name
                        else x
                        for n, x in loop.engine.members.items()
                    ]
                )

            def heal_cut(loop: Loop) -> None:
                loop.engine.set_members([member if n == name else x for n, x in loop.engine.members.items()])
                silent.close()
                self.cut_off.discard(name)

            self.loop.between(cut)
            return lambda: self.loop.between(heal_cut)
        if f.kind == "full":
            return _fill(s.datadir)
        # lag: a replica's applier waits behind a global read lock held for the fault
        try:
            conn = s.connect(timeout=2)
            with conn.cursor() as cur:
                cur.execute("FLUSH TABLES WITH READ LOCK")
        except Exception as e:  # noqa: BLE001 - a server already down lags anyway
            self.result.applied[-1] += f" (not locked: {e})"
            return lambda: None
        return lambda: _close(conn)

    def _kubelet(self) -> None:
        """Start a server whose process ended, unless a kill fault holds it down."""
        for s in self.servers:
            if s.name not in self.down and not s.alive:
                s.start()

    def _full_strength(self) -> bool | str:
        out = self.loop.last
        if out is None:
            return False
        if isinstance(out.decision, t.Errant) and not self.loop.engine.settings.reseed:
            return "held out: " + "; ".join(out.decision.reasons)
        p = self.loop.state.current_primary
        return (
            isinstance(out.decision, t.Healthy)
            and all(s.reachable for s in out.observed)
            and all(s.source == p and s.io_running and s.sql_running for s in out.observed if s.name != p)
        )

    def execute(self) -> Result:
        r = self.result
        self.servers = self.factory.create(
            3, semisync=True, prefix=f"c{self.seed}-", volume_bytes=VOLUME_BYTES if self.volumes else None
        )
        for k, s in enumerate(self.servers):
            s.name = f"db-{k}"
        self.by_name = {s.name: s for s in self.servers}
        self.loop = Loop(self._engine(), OperatorConfig().loop_seconds, self._engine)
        writer = monitor = None
        try:
            self.loop.start()
            wait_for(self._full_strength, 120, "a healthy cluster", describe=lambda: str(self.loop.last))
            primary = self.by_name[self.loop.state.current_primary]
            with (
                primary.connect(user=APP.user, password=APP.password, database=DB) as conn,
                conn.cursor() as cur,
            ):
                cur.execute("CREATE TABLE t (id INT PRIMARY KEY, at VARCHAR(20))")
            writer = Writer(
                lambda name: self.by_name[name].connect(
                    user=APP.user, password=APP.password, database=DB, timeout=1.0
                ),
                f"INSERT INTO {DB}.t VALUES (%s, %s)",
                target=lambda: self.loop.state.current_primary,
            )
            writer.start()
            monitor = Monitor(
                self.servers, self.factory.admin_password, lambda: self.loop.state.current_primary
            )
            monitor.start()
            wait_for(lambda: len(writer.acked) >= 20, 30, "20 acknowledged writes")
            rnd = random.Random(self.seed)
            began = time.monotonic()
            drive(self.faults, lambda f: self._apply(f, rnd), self._kubelet)
            healed = time.monotonic()

            def strong():
                self._kubelet()
                return self._full_strength()

            try:
                state = wait_for(strong, self.converge_seconds, "full strength")
                r.converge_seconds = time.monotonic() - healed
                r.converged = state is True
                r.held_out = state if isinstance(state, str) else ""
            except Timeout:
                r.error = f"not at full strength {self.converge_seconds:.0f}s after the last fault: {self.loop.last}"
            settle_writes(r, writer, began)
            p = self.by_name[self.loop.state.current_primary]
            rows = {row[0] for row in p.query(f"SELECT id FROM {DB}.t")}
            r.lost = len(set(writer.ids) - rows)
        except Exception as e:  # noqa: BLE001 - the schedule's outcome, reported
            r.error = r.error or f"{type(e).__name__}: {e}"
        finally:
            if writer is not None:
                writer.stop()
            if monitor is not None:
                take_counts(r, monitor)
            self.loop.stop()
            r.failovers = sum(1 for k in self.loop.kinds if k == "Failover")
            for s in self.servers:
                s.sigcont()
                s.kill9()
        return r
