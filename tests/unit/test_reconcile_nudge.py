"""Passes asked for while one runs: one more pass runs at its end, and it applies the owned
objects only when one of those asking said to (a new cluster's create handler applied them, then
its loop's first tick and its StatefulSet's first event each had everything applied again)."""

from __future__ import annotations

from mysql_operator.reconcile import Reconciler
from tests.support.fakes import RecordingKube

BODY = {"metadata": {"namespace": "ns", "name": "db", "uid": "u-1"}}


class OneCluster:
    def cluster(self, namespace, name):
        return BODY


def passes_with(asked_during_the_first: list[bool | None], first: bool | None) -> list[bool | None]:
    """The `apply` of each pass nudge(apply=first) ran, with nudges(apply=a) for each a of
    `asked_during_the_first` arriving while its first pass ran."""
    r = Reconciler(None, job_image="operator:test", kube=RecordingKube(), reads=OneCluster())
    ran: list[bool | None] = []

    def one_pass(body, entry, apply):
        ran.append(apply)
        if len(ran) == 1:
            for asked in asked_during_the_first:
                assert r.nudge("ns", "db", apply=asked) is None  # busy: asked for, not run
        return "result"

    r._reconcile = one_pass
    assert r.nudge("ns", "db", apply=first) == "result"
    return ran


def test_a_pass_asked_for_during_an_applying_pass_runs_once_and_applies_only_when_due():
    assert passes_with([None, None], first=True) == [True, None]


def test_a_pass_asked_to_apply_during_a_pass_applies():
    assert passes_with([None, True, None], first=None) == [None, True]
    assert passes_with([True], first=True) == [True, True]


def test_nothing_asked_for_during_a_pass_runs_no_second_pass():
    assert passes_with([], first=True) == [True]
