"""Issue 45, item 5, with the operator installed by its chart (a Pod), per flavor (MySQL 9.7,
MariaDB 10.11; the test id names it): the application's scheduled event keeps running across a
failover (the primary's container killed) and a requested switchover - its rows keep arriving
through -rw, written by the new primary - while an event the user DISABLEd never runs; then a
logical backup restored into a new cluster gives that cluster's primary the source's statuses
(the dump is taken from a replica, where every event is replica-side disabled) and its replica
holds them replica-side disabled. `event_scheduler = ON` in spec.config.myCnf: MariaDB's default
is OFF."""

from __future__ import annotations

import uuid

import pytest

from e2e.backups import backup_phase_of, create_backup
from e2e.helpers import (
    FLAVORS,
    GROUP,
    VERSION,
    Cluster,
    cluster_spec,
    query,
    record,
    signal_server,
    stopwatch,
    try_query,
)
from mysql_operator import switchover as sw
from tests.support.wait import wait_for

pytestmark = [pytest.mark.cluster]

MY_CNF = {"myCnf": "event_scheduler = ON\n"}
REPLICA_SIDE = ("SLAVESIDE_DISABLED", "REPLICA_SIDE_DISABLED")


def schedule(rw: str, pw: str) -> None:
    """The application's jobs, made through -rw as its account: `tick` writes a row naming the
    server it runs on every second; `paused`, DISABLEd, would too."""
    query(
        rw,
        "app",
        pw,
        "CREATE TABLE app.ticks (id BIGINT AUTO_INCREMENT PRIMARY KEY, host VARCHAR(64), job VARCHAR(16))",
    )
    for name, state in (("tick", "ENABLE"), ("paused", "DISABLE")):
        query(
            rw,
            "app",
            pw,
            f"CREATE EVENT app.{name} ON SCHEDULE EVERY 1 SECOND {state} "
            f"DO INSERT INTO app.ticks (host, job) VALUES (@@hostname, '{name}')",
        )


def rows_by(host: str, pw: str, writer: str, job: str = "tick") -> int:
    return query(
        host, "app", pw, "SELECT COUNT(*) FROM app.ticks WHERE host = %s AND job = %s", args=(writer, job)
    )[0][0]


def statuses(host: str, pw: str) -> dict[str, str]:
    rows = query(
        host, "app", pw, "SELECT EVENT_NAME, STATUS FROM information_schema.EVENTS WHERE EVENT_SCHEMA = 'app'"
    )
    return {name: status for name, status in rows}


def keeps_arriving(c: Cluster, pw: str, writer: str, what: str, timeout: float = 180) -> None:
    """Rows `tick` writes on `writer`, read through -rw, grow by 3 more (the event runs there)."""
    rw = c.service_ip("rw")
    before = wait_for(lambda: (n := rows_by(rw, pw, writer)) is not None and (n,), 60, "-rw answering")[0]
    wait_for(
        lambda: rows_by(rw, pw, writer) >= before + 3,
        timeout,
        f"{what}: rows of tick written by {writer}",
        describe=c.describe,
    )


def runs_only_on_the_primary(c: Cluster, pw: str, primary: str) -> None:
    """tick ENABLED on the primary and replica-side disabled on the others; paused never ran."""
    rw = c.service_ip("rw")
    got = statuses(rw, pw)
    assert got["tick"] == "ENABLED" and got["paused"] != "ENABLED", got
    assert query(rw, "app", pw, "SELECT COUNT(*) FROM app.ticks WHERE job = 'paused'")[0][0] == 0
    for p in c.pods():
        if p.metadata.name != primary:
            wait_for(
                lambda ip=p.status.pod_ip: statuses(ip, pw)["tick"] in REPLICA_SIDE,
                60,
                f"tick replica-side disabled on {p.metadata.name}",
                describe=c.describe,
            )


@pytest.mark.causes("Failover", "Switchover", "Reseed")  # asked for; the killed primary may rejoin by a copy
@pytest.mark.parametrize("flavor", FLAVORS)
def test_an_event_runs_on_through_a_failover_and_a_switchover_and_a_restore_keeps_its_status(
    local_cluster, scenario_namespace, s3_beside_cluster, flavor
):
    api = local_cluster.api_client()
    bucket = f"e2e-ev-{uuid.uuid4().hex[:10]}"
    s3_beside_cluster.create_bucket(bucket)
    c = Cluster(api, scenario_namespace, f"ev-{flavor}")
    c.core.create_namespaced_secret(
        scenario_namespace,
        {
            "metadata": {"name": "s3"},
            "stringData": {
                "AWS_ACCESS_KEY_ID": s3_beside_cluster.access_key,
                "AWS_SECRET_ACCESS_KEY": s3_beside_cluster.secret_key,
            },
        },
    )
    storage = {
        "s3": {
            "bucket": bucket,
            "prefix": "ev",
            "endpoint": s3_beside_cluster.endpoint,
            "region": "us-east-1",
            "forcePathStyle": True,
            "credentialsSecret": {"name": "s3"},
        }
    }
    c.create(cluster_spec(3, flavor, config=MY_CNF, backup={"storage": storage}))
    st = c.wait_ready(300, instances=3)
    old = st["currentPrimary"]
    rw, pw = c.service_ip("rw"), c.password()
    wait_for(lambda: try_query(rw, "app", pw, "SELECT 1"), 60, "-rw answering")
    schedule(rw, pw)
    # the operator looks every second: a few rows and it has seen the primary run tick
    wait_for(lambda: rows_by(rw, pw, old) >= 5, 60, f"rows of tick written by {old}", describe=c.describe)

    # (a) a failover: the primary's server killed
    elapsed = stopwatch()
    since = st.get("primarySince")
    signal_server(local_cluster, c, old, "SIGKILL")
    st = wait_for(
        lambda: (
            (s := c.status()).get("currentPrimary")
            and (s["currentPrimary"] != old or s.get("primarySince") != since)
            and s
        ),
        180,
        "a new primary (or the restarted one made primary again) recorded in status",
        describe=c.describe,
    )
    new = st["currentPrimary"]
    keeps_arriving(c, pw, new, "after the failover")
    record(f"failover to rows of the scheduled event written by the new primary ({flavor})", elapsed())
    if new != old:  # the operator enabled it there, and said so
        wait_for(
            lambda: any("app.tick" in (e.message or "") for e in c.events("Events")),
            60,
            "an Events Event naming app.tick",
            describe=c.describe,
        )
    c.wait_ready(600, "Ready again after the failover", instances=3, primary=new)
    runs_only_on_the_primary(c, pw, new)

    # (b) a requested switchover, to a replica
    target = sorted(n for n in c.roles() if n != new)[0]
    elapsed = stopwatch()
    c.objs.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        c.namespace,
        "mysqlclusters",
        c.name,
        {"metadata": {"annotations": {sw.ANNOTATION: f"{target}; e2e: events"}}},
    )
    c.wait_ready(240, "Ready after the requested switchover", instances=3, primary=target)
    keeps_arriving(c, pw, target, "after the switchover")
    record(f"switchover to rows of the scheduled event written by the new primary ({flavor})", elapsed())
    runs_only_on_the_primary(c, pw, target)
    source = statuses(c.service_ip("rw"), pw)

    # a logical backup (of a replica), restored into a new cluster
    create_backup(c, f"ev-{flavor}-1", "logical")
    phase = wait_for(
        lambda: (
            backup_phase_of(c, f"ev-{flavor}-1") in ("Succeeded", "Failed")
            and backup_phase_of(c, f"ev-{flavor}-1")
        ),
        300,
        "the backup finished",
    )
    assert phase == "Succeeded", c.describe()
    restored = Cluster(api, scenario_namespace, f"evr-{flavor}").create(
        cluster_spec(2, flavor, config=MY_CNF, restore={"fromBackup": {"name": f"ev-{flavor}-1"}})
    )
    st = restored.wait_ready(420, instances=2)
    r_primary, r_pw = st["currentPrimary"], restored.password()
    r_rw = restored.service_ip("rw")
    wait_for(lambda: try_query(r_rw, "app", r_pw, "SELECT 1"), 60, "the restored cluster's -rw answering")
    got = statuses(r_rw, r_pw)
    # the source's status: tick ENABLED; paused, which never ran there, DISABLED (never replica-side)
    assert source["tick"] == got["tick"] == "ENABLED", (source, got)
    assert source["paused"] != "ENABLED" and got["paused"] == "DISABLED", (source, got)
    keeps_arriving(restored, r_pw, r_primary, "on the restored cluster")
    runs_only_on_the_primary(restored, r_pw, r_primary)
