"""The fault campaigns' schedules are functions of their seed (issue 45): a recorded result is
replayed by its seed, the host campaign's and the local cluster's alike."""

from __future__ import annotations

import json
from pathlib import Path


from e2e.campaign_k8s import K8S_INSTANT, KINDS, ROLES, k8s_schedule
from tests.support.campaign import KINDS as HOST_KINDS
from tests.support.campaign import VOLUME_KINDS, schedule

KEPT = Path(__file__).resolve().parents[2] / "benchmarks" / "campaign"


def _kept(k8s: bool) -> list[dict]:
    """The results kept: benchmarks.k8s_campaign's (k8s-<flavor>.jsonl) or the host campaign's."""
    return [
        json.loads(line)
        for f in sorted(KEPT.glob("*.jsonl"))
        if f.name.startswith("k8s-") == k8s
        for line in f.read_text().splitlines()
    ]


def test_every_kept_host_result_is_replayed_by_its_seed():
    rows = _kept(False)
    assert rows, f"no results kept in {KEPT}"
    assert [[str(f) for f in schedule(r["seed"], kinds=tuple(r.get("kinds", HOST_KINDS)))] for r in rows] == [
        r["faults"] for r in rows
    ]


def test_the_volume_kinds_leave_every_earlier_seeds_schedule_as_it_was():
    """Drawing from VOLUME_KINDS is asked for (--volumes), so a seed without it replays as before;
    a full volume is always a replica's."""
    assert [str(f) for f in schedule(2)] == [str(f) for f in schedule(2, kinds=HOST_KINDS)]
    drawn = [f for seed in range(1, 300) for f in schedule(seed, kinds=VOLUME_KINDS)]
    full = [f for f in drawn if f.kind == "full"]
    assert full and all(f.role == "replica" and f.duration > 0 for f in full)


def test_every_kept_cluster_result_is_replayed_by_its_seed_and_kinds():
    rows = _kept(True)
    assert rows, f"no benchmarks.k8s_campaign results kept in {KEPT}"
    assert [[str(f) for f in k8s_schedule(r["seed"], tuple(r["kinds"]))] for r in rows] == [
        r["faults"] for r in rows
    ]


def test_a_cluster_schedule_overlaps_faults_of_the_kinds_asked_with_their_roles():
    for seed in range(1, 200):
        faults = k8s_schedule(seed)
        assert 1 <= len(faults) <= 3 and faults == k8s_schedule(seed), seed
        for f in faults:
            assert f.kind in KINDS
            assert (f.duration == 0) == (f.kind in K8S_INSTANT), f
            assert f.role == ROLES.get(f.kind, f.role), f
        for before, after in zip(faults, faults[1:]):  # each starts before the previous one ends
            assert after.start <= max(before.end, before.start + 3.0), faults
        assert {f.kind for f in k8s_schedule(seed, ("lag", "isolate"))} <= {"lag", "isolate"}
    assert {f.kind for seed in range(1, 100) for f in k8s_schedule(seed)} == set(KINDS)
