"""Shared by the replication integration tests (MariaDB on loopback, MySQL 8.4 in containers).

A `Cluster` runs the operator's own pass (`ReplicationEngine.reconcile`: observe -> decide ->
record -> act; reconcile.Reconciler calls it with its Kubernetes hooks); a `Writer` writes numbered rows through the primary the loop publishes (as
a client of the read-write Service would) and records which commits were acknowledged.

Servers are duck-typed: anything with `name`, `host`, `port`, `connect(user=, password=,
database=, timeout=)` and `query(sql)` - `tests/support/mariadb.MariaDBServer` and
`tests/support/mysql_container.MySQLNode` both are.

`factory` is a module-scoped fixture of real servers of each flavor (MariaDB 10.11, MySQL 9.7): a
module that imports it runs its tests once per flavor; `make_cluster` converges a `Cluster` of
new servers of a factory.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from mysql_operator import topology as t
from mysql_operator.members import ClusterState, Credentials, Member
from mysql_operator.replication import ReplicationEngine
from tests.support.mariadb import OPERATOR_USER, MariaDBFactory, missing_binaries
from tests.support.mysql import MySQLFactory, mysql_unavailable
from tests.support.wait import wait_for
from tests.support.writer import Writer

APP = Credentials("app", "app-pw-7f3a9c")
REPL = Credentials("repl", "repl-pw-91b2e4")
DB = "app"


@dataclass
class Cluster:
    servers: list[Any]
    engine: ReplicationEngine
    state: ClusterState = field(default_factory=ClusterState)
    decisions: list[t.Decision] = field(default_factory=list)
    timeline: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, kind)
    last: Any = None  # the last pass's Outcome
    steps: list[Any] = field(default_factory=list)  # every pass's steps, in order

    def server(self, name: str):
        return next(s for s in self.servers if s.name == name)

    @property
    def primary(self):
        return self.server(self.state.current_primary)

    def reconcile(self, desired: str | None = None):
        started = time.monotonic()
        out = self.engine.reconcile(self.state, desired)
        self.last = out
        self.decisions.append(out.decision)
        self.steps.extend(out.steps)
        self.timeline.append((started, time.monotonic(), out.decision.kind))
        bad = [s for s in out.steps if not s.ok and s.action != "held-out"]
        if bad:
            print(f"steps not ok: {bad}", file=sys.stderr)
        return out

    def converge(self, until=t.Healthy, desired: str | None = None, timeout: float = 30.0):
        """Run the loop until the decision is `until` (a Decision class)."""

        def step():
            d = self.reconcile(desired).decision
            return d if isinstance(d, until) else None

        what = getattr(until, "__name__", None) or "/".join(u.__name__ for u in until)
        return wait_for(step, timeout, f"the cluster to reach {what}", interval=0.1, describe=self.describe)

    def describe(self) -> str:
        """The last decisions and the last pass's view of each server, for a timeout's message."""
        kinds = [d.kind for d in self.decisions[-8:]]
        last = self.decisions[-1] if self.decisions else None
        seen = "; ".join(
            f"{s.name}: reachable={s.reachable} read_only={s.read_only} source={s.source} "
            f"io={s.io_running} sql={s.sql_running} errno={s.io_errno or s.sql_errno} {s.last_error or ''}"
            for s in (self.last.observed if self.last is not None else ())
        )
        return f"decisions {kinds}, last {last!r}\nobserved: {seen}"

    def app_conn(self, server, timeout: float = 3.0):
        return server.connect(user=APP.user, password=APP.password, database=DB, timeout=timeout)

    def rows(self, server) -> set[int]:
        return {r[0] for r in server.query(f"SELECT id FROM {DB}.t")}


def wait_replicated(c: Cluster, ids: set[int], servers=None, timeout=20.0):
    for s in servers or c.servers:
        wait_for(lambda s=s: ids <= c.rows(s), timeout, f"rows {sorted(ids)[:5]}.. on {s.name}")


def writer_for(c: Cluster) -> Writer:
    """Numbered rows into app.t through the recorded primary; acked = (id, server, time)."""
    return Writer(
        lambda name: c.app_conn(c.server(name), timeout=1.0),
        f"INSERT INTO {DB}.t VALUES (%s, %s)",
        target=lambda: c.state.current_primary,
        first_id=100_000,
    )


TIMINGS: list[str] = []


def new_factory(flavor: str) -> MariaDBFactory:
    """A factory of real servers of `flavor`; skips (printing why) where they cannot run."""
    if flavor == "mysql":
        why = mysql_unavailable()
        if why:
            pytest.skip(reason=f"no MySQL 9.7 server: {why}")
        return MySQLFactory()
    if missing_binaries():
        why = (
            f"MariaDB server binaries missing ({', '.join(missing_binaries())}): "
            "run hack/install-deps.sh (apt: mariadb-server mariadb-client mariadb-backup)"
        )
        pytest.skip(reason=why)
    return MariaDBFactory()


@pytest.fixture(scope="module", params=["mariadb", "mysql"])
def factory(request):
    f = new_factory(request.param)
    failed_before = request.session.testsfailed
    yield f
    if request.session.testsfailed > failed_before:
        print("\n" + f.logs_report(40), file=sys.stderr)
    f.close()
    if TIMINGS:
        print("\n" + "\n".join(TIMINGS), file=sys.stderr)


@pytest.fixture(autouse=True)
def stop_the_servers_of_each_test(factory):
    """A test's servers stop when it ends (their logs stay for the report): a module's ~50
    servers running at once once starved a starting one past its 60 s on a 2-core machine, and
    26 MySQL servers of another took memory the shared CI machine ran short of. Killed, not shut
    down: their data is thrown away, and a clean MySQL shutdown of a test's three servers took 15 s."""
    before = len(factory.servers)
    yield
    for s in factory.servers[before:]:
        s.kill9()


def make_cluster(
    factory: MariaDBFactory, n: int, semisync: bool = False, delay: float = 1.0, prefix: str = "db"
) -> Cluster:
    servers = factory.create(n, semisync=semisync, prefix=f"{prefix}{len(factory.servers)}")
    for k, s in enumerate(servers):
        s.name = f"db-{k}"
    c = Cluster(servers, new_engine(factory, servers, semisync, delay))
    c.converge()
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(40))")
    c.converge()
    return c


def new_engine(
    factory: MariaDBFactory, servers, semisync: bool = False, delay: float = 1.0
) -> ReplicationEngine:
    """The operator's engine over `servers` (named db-0, db-1, ...), as a new operator process has it."""
    return ReplicationEngine(
        [Member(s.name, k, s.host, s.port) for k, s in enumerate(servers)],
        Credentials(OPERATOR_USER, factory.admin_password, "127.0.0.1"),
        REPL,
        t.Settings(instances=len(servers), failover_delay_seconds=delay, semisync=semisync),
        app=APP,
        app_database=DB,
        apply_timeout=20,
    )
