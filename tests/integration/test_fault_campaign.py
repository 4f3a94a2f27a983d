"""The fault campaign's smoke (issue 45): a few seeded schedules of overlapping faults on real
servers of each flavor, the operator's own engine running them (tests/support/campaign.py; the
campaign itself is benchmarks/fault_campaign.py). Each must lose no acknowledged write, never
have two writable servers nor route -rw to a read-only one while another is writable, and be
back at full strength without a manual step. A failure prints the schedule: replay it with
`python -m benchmarks.fault_campaign --flavor F --seed N --count 1`."""

from __future__ import annotations

import sys

import pytest

from tests.integration.helpers_replication import new_factory
from tests.support.campaign import Run, schedule

# per flavor: a schedule of three overlapping faults (the primary killed, a replica cut off
# from the operator, the operator restarted) and one of two (the primary cut off from the
# operator, a replica lagging); the campaign runs hundreds (benchmarks/fault_campaign.py)
SEEDS = (2, 12)


@pytest.fixture(scope="module", params=["mariadb", "mysql"])
def factory(request):
    f = new_factory(request.param)
    yield f
    f.close()


@pytest.mark.parametrize("seed", SEEDS)
def test_a_seeded_schedule_of_overlapping_faults_loses_nothing_and_heals(factory, seed):
    flavor = factory.flavor.value
    r = Run(factory, flavor, seed).execute()
    print(f"\n{flavor} seed {seed}: {'; '.join(r.applied)}; {r}")
    if not r.ok:
        print(factory.logs_report(20), file=sys.stderr)
    assert r.lost == 0, r
    assert r.two_writable == 0 and r.misrouted == 0, r
    assert r.converged or r.held_out, r
    assert not r.error, r
    assert [str(f) for f in schedule(seed)] == r.faults  # a function of its seed: replayable
