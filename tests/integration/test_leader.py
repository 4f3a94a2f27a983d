"""Leader election (mysql_operator/leader.py) on a real kube-apiserver's coordination.k8s.io
Lease: one holder at a time, a standby takes over only once the holder stopped renewing (or at
once when it released the Lease), a write from a stale read loses, and a holder that sees
another replica in its Lease stops acting."""

from __future__ import annotations

import threading

import pytest
from kubernetes import client

from mysql_operator.leader import Elector
from tests.support.wait import wait_for

pytestmark = pytest.mark.controlplane


class FakeClock:
    """The standby's monotonic clock, moved by the test (the API calls are real)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _elector(control_plane, namespace, identity, monotonic=None, **kw) -> Elector:
    kw = {"duration": 15.0, "deadline": 10.0, "renew_every": 0.2, **kw}
    if monotonic is not None:
        kw["monotonic"] = monotonic
    return Elector(control_plane.api_client(), namespace, "mysql-operator", identity, **kw)


def _holder(control_plane, namespace) -> str | None:
    lease = client.CoordinationV1Api(control_plane.api_client()).read_namespaced_lease(
        "mysql-operator", namespace
    )
    return lease.spec.holder_identity


def test_one_holder_and_a_standby_takes_over_only_after_the_lease_duration(control_plane, namespace):
    a = _elector(control_plane, namespace, "op-a")
    clock = FakeClock()
    b = _elector(control_plane, namespace, "op-b", monotonic=clock)
    assert a.try_acquire_or_renew()  # creates the Lease
    assert not b.try_acquire_or_renew()  # b sees a's record for the first time
    assert a.try_acquire_or_renew()  # renewed: a new record
    clock.t += 14.9
    assert not b.try_acquire_or_renew()  # a renewed since b last looked: b's count starts again
    clock.t += 14.9
    assert not b.try_acquire_or_renew(), "14.9 s without a renewal is not yet the duration"
    clock.t += 0.2
    assert b.try_acquire_or_renew(), "a stopped renewing for the lease duration: b takes over"
    assert _holder(control_plane, namespace) == "op-b"
    assert not a.try_acquire_or_renew(), "a, back, sees b's record and waits"
    lease = client.CoordinationV1Api(control_plane.api_client()).read_namespaced_lease(
        "mysql-operator", namespace
    )
    assert lease.spec.lease_transitions == 1


def test_a_released_lease_is_taken_at_once(control_plane, namespace):
    a = _elector(control_plane, namespace, "op-a")
    b = _elector(control_plane, namespace, "op-b", monotonic=FakeClock())
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert _holder(control_plane, namespace) is None
    assert b.try_acquire_or_renew(), "no holder: no need to wait for the duration"


def test_a_write_from_a_stale_read_loses(control_plane, namespace):
    a = _elector(control_plane, namespace, "op-a")
    b = _elector(control_plane, namespace, "op-b")
    assert a.try_acquire_or_renew()
    coord = client.CoordinationV1Api(control_plane.api_client())
    stale = coord.read_namespaced_lease("mysql-operator", namespace)
    assert a.try_acquire_or_renew()  # the Lease moves on
    assert not b._write(stale, 0.0), "compare-and-swap: 409 Conflict"
    assert _holder(control_plane, namespace) == "op-a"


def test_two_replicas_racing_for_a_free_lease_get_exactly_one_holder(control_plane, namespace):
    electors = [_elector(control_plane, namespace, f"op-{n}") for n in range(4)]
    won: list[str] = []
    start = threading.Barrier(len(electors))

    def race(e: Elector) -> None:
        start.wait()
        if e.try_acquire_or_renew():
            won.append(e.identity)

    threads = [threading.Thread(target=race, args=(e,)) for e in electors]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and _holder(control_plane, namespace) == won[0], won


def test_a_holder_that_finds_another_in_its_lease_stops_acting(control_plane, namespace):
    lost = threading.Event()
    a = _elector(control_plane, namespace, "op-a", on_lost=lost.set)
    a.acquire()
    a.keep()
    coord = client.CoordinationV1Api(control_plane.api_client())
    lease = coord.read_namespaced_lease("mysql-operator", namespace)
    lease.spec.holder_identity = "op-intruder"  # e.g. a's renewals failed long enough for a standby
    coord.replace_namespaced_lease("mysql-operator", namespace, lease)
    wait_for(lost.is_set, 30, "op-a calls on_lost")
    a.stopping.set()
    assert _holder(control_plane, namespace) == "op-intruder"
