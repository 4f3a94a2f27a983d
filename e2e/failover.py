"""A failover under a write load on the local cluster, measured and checked: no acknowledged row lost."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Callable

from e2e.helpers import (
    Cluster,
    cluster_spec,
    create_writes_table,
    lost_rows,
    query,
    record,
    replica_state,
    writer_to,
)
from tests.support.wait import wait_for


# seconds to the first write on the new primary that a run usually stays under (past it, the
# test's evidence is kept for a look: e2e/helpers.py record): a crash or a deleted Pod takes 1-5 s.
# With the operator's own Pod force-deleted in the middle of a hang, the new operator waits out
# the old one's Lease (16 s), then sees the hung primary time out before it fails over: 33.8-35.0 s
# in the CI runs of 2026-12-06/07 on both flavors, every evidence bundle explained so
USUALLY_UNDER = {"2": 10.0, "6": 40.0}


def failover_under_load(
    c: Cluster,
    disrupt: Callable[[str], float | None],
    label: str,
    during: Callable[[], None] | None = None,
    flavor: str = "mariadb",
) -> tuple[str, str]:
    """Returns (the old primary, the new one)."""
    label = f"{label}, {flavor}"
    c.create(cluster_spec(3, flavor))
    st = c.wait_ready(300, instances=3, primary=f"{c.name}-0")
    old = st["currentPrimary"]
    rw, pw = create_writes_table(c)
    writer = writer_to(rw, "app", pw)
    writer.start()
    try:
        wait_for(lambda: len(writer.acked) >= 50, 60, "50 acknowledged writes before the failure")
        t0, wall0 = time.monotonic(), time.time()
        t_last = disrupt(old) or t0
        if during is not None:
            during()

        def decided(s: dict) -> bool:
            if s.get("currentPrimary") not in (None, old):
                return True
            # MySQL: a restarted primary holding a transaction of its own that no replica has (its
            # unacknowledged tail) stays primary - promoting a replica would make it errant; it is
            # made primary again (primarySince moves), never losing an acknowledged row
            since = s.get("primarySince")
            return (
                flavor == "mysql"
                and s.get("currentPrimary") == old
                and bool(since)
                and datetime.fromisoformat(since).timestamp() > wall0
            )

        st = wait_for(
            lambda: (lambda s: s if decided(s) else None)(c.status()),
            180,
            "a new primary (or the restarted one made primary again) recorded in status",
            describe=c.describe,
        )
        new = st["currentPrimary"]
        # when it was made primary is recorded (a restarted operator compares server starts with it)
        since = wait_for(lambda: c.status().get("primarySince"), 30, "status.primarySince")
        assert datetime.fromisoformat(since).timestamp() > wall0 - 1, (since, wall0)
        at_failover = len(writer.acked)
        wait_for(lambda: len(writer.acked) > at_failover + 20, 120, "writes accepted by the new primary")
        to_write = writer.first_ack_after_outage(t0)
        to_write_last = writer.first_ack_after_outage(t_last)
    finally:
        writer.stop()
    assert to_write is not None, "writes never failed: the primary was not disrupted"
    scenario = "2" if "operator" not in label else "6"
    record(
        f"failover ({label}) to first accepted write",
        to_write,
        scenario=scenario,
        usually_under=USUALLY_UNDER[scenario],
    )
    if t_last != t0 and to_write_last is not None:
        record(
            f"failover ({label}) last disruption to first accepted write on the new primary",
            to_write_last,
            scenario=scenario,
        )
    lost = lost_rows(rw, pw, writer)
    record(f"rows lost ({label}; {len(writer.acked)} acknowledged)", len(lost), unit="count")
    assert not lost, f"acknowledged writes lost: {lost[:20]}"
    assert query(rw, "app", pw, "SELECT @@hostname")[0][0] == new

    if new == old:  # MySQL kept the restarted primary (see decided)
        record(
            f"old primary after the failover ({label}): kept as primary (own unacknowledged tail)",
            1,
            unit="count",
        )
        c.wait_ready(300, "Ready again with the restarted primary", instances=3, primary=old)
        return old, new
    # the old primary comes back as a read-only replica with every acknowledged row (MySQL: after
    # a re-seed when it held a transaction of its own)
    c.wait_ready(420, "Ready again after the failover", instances=3, primary=new)
    if flavor == "mysql":
        reseeded = [e for e in c.events("Reseed") if old in (e.message or "")]
        outcome = "re-seeded, rejoined" if reseeded else "rejoined"
        record(f"old primary after the failover ({label}): {outcome}", 1, unit="count")
        if any("errant transactions" in (e.message or "") for e in reseeded):
            kept = c.core.list_namespaced_config_map(
                c.namespace, label_selector="app.kubernetes.io/component=evidence"
            ).items
            assert kept and kept[0].data["instance"] == old and kept[0].data["gtids"], kept
    roles = c.roles()
    assert roles[old] == "replica" and roles[new] == "primary", roles
    old_ip = c.pod(old).status.pod_ip
    total = query(rw, "app", pw, "SELECT COUNT(*) FROM app.writes")[0][0]
    assert total >= len(writer.acked)
    wait_for(
        lambda: replica_state(old_ip, "app", pw) == (old, 1, total),
        60,
        f"{old} read-only with all {total} rows",
    )
    assert c.events("Failover"), "a Failover Event on the MySQLCluster"
    return old, new
