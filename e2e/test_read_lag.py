"""spec.replication.maxReadLagSeconds with the operator installed by its chart, per flavor: a
replica whose applier is held back (a table lock on it while writes go on through -rw) leaves the
-ro Service once it lags more than the limit, the status says so (role `lagging`, Degraded
ReplicasLagging, a Warning Event), and it comes back by itself once it caught up. No
acknowledged write is lost (the replica keeps receiving and acknowledging while it lags)."""

from __future__ import annotations

import pytest

from e2e.helpers import (
    FLAVORS,
    Cluster,
    cluster_spec,
    connect,
    create_writes_table,
    lost_rows,
    record,
    stopwatch,
    writer_to,
)
from mysql_operator import manifests as m
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_lagging_replica_leaves_ro_and_returns_when_caught_up(local_cluster, scenario_namespace, flavor):
    c = Cluster(local_cluster.api_client(), scenario_namespace, "lag")
    spec = cluster_spec(2, flavor)
    spec["replication"]["maxReadLagSeconds"] = 3
    c.create(spec)
    c.wait_ready(300, instances=2, primary="lag-0")
    rw, pw = create_writes_table(c)
    writer = writer_to(rw, "app", pw)
    writer.start()
    lock = None
    try:
        wait_for(lambda: len(writer.acked) >= 5, 60, "writes through -rw")
        lock = connect(c.pod(1).status.pod_ip, "app", pw)
        with lock.cursor() as cur:
            cur.execute("LOCK TABLES app.writes READ")  # the applier waits behind it
        elapsed = stopwatch()

        def out_of_ro():
            st, labels = c.status(), c.pod(1).metadata.labels or {}
            return (
                c.roles().get("lag-1") == "lagging"
                and m.ROLE_LABEL not in labels
                and any(
                    x["type"] == "Degraded" and x["reason"] == "ReplicasLagging"
                    for x in st.get("conditions", [])
                )
            )

        wait_for(out_of_ro, 60, "lag-1 out of -ro as lagging", describe=c.describe)
        record(f"replica lag past maxReadLagSeconds (3 s) to out of -ro ({flavor})", elapsed())
        assert c.events("ReplicasLagging"), "a Warning Event says which replica lags"
        assert c.roles().get("lag-0") == "primary"

        lock.close()
        lock = None
        elapsed = stopwatch()
        wait_for(
            lambda: (
                (c.pod(1).metadata.labels or {}).get(m.ROLE_LABEL) == m.ROLE_REPLICA
                and c.roles().get("lag-1") == "replica"
            ),
            60,
            "lag-1 back in -ro once caught up",
            describe=c.describe,
        )
        record(f"lagging replica unlocked to back in -ro ({flavor})", elapsed())
        c.wait_ready(60, "Ready again", instances=2, primary="lag-0")
    finally:
        if lock is not None:
            lock.close()
        writer.stop()
    lost = lost_rows(rw, pw, writer)
    assert not lost, f"acknowledged writes lost: {lost[:20]}"
