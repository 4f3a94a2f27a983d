"""Passes asked for while one runs: one more pass runs at its end, and it applies the owned
objects only when one of those asking said to (a new cluster's create handler applied them, then
its loop's first tick and its StatefulSet's first event each had everything applied again)."""

from __future__ import annotations

from mysql_operator.pass_state import apply_still_wanted, merge_asks
from mysql_operator.reconcile import Reconciler
from tests.support.fakes import RecordingKube

BODY = {"metadata": {"namespace": "ns", "name": "db", "uid": "u-1"}}


class OneCluster:
    def cluster(self, namespace, name):
        return BODY


def passes_with(
    asked_during_the_first: list,
    first: bool | None,
    first_applies: str = "",
    version: str | None = None,
) -> list[bool | None]:
    """The `apply` of each pass nudge(apply=first, version=version) ran, with nudges for each of
    `asked_during_the_first` (an `apply`, or (apply, version)) arriving while its first pass
    ran. `first_applies`: the cluster body version the first pass applied (its apply went
    through; "": it applied nothing)."""
    r = Reconciler(None, job_image="operator:test", kube=RecordingKube(), reads=OneCluster())
    ran: list[bool | None] = []

    def one_pass(body, entry, apply):
        ran.append(apply)
        if len(ran) == 1:
            if first_applies:
                entry.applied_version = first_applies
            for asked in asked_during_the_first:
                apply_, seen = asked if isinstance(asked, tuple) else (asked, None)
                assert r.nudge("ns", "db", apply=apply_, version=seen) is None  # busy: asked for, not run
        return "result"

    r._reconcile = one_pass
    assert r.nudge("ns", "db", apply=first, version=version) == "result"
    return ran


def test_a_pass_asked_for_during_an_applying_pass_runs_once_and_applies_only_when_due():
    assert passes_with([None, None], first=True) == [True, None]


def test_a_pass_asked_to_apply_during_a_pass_applies():
    assert passes_with([None, True, None], first=None) == [None, True]
    assert passes_with([True], first=True) == [True, True]


def test_nothing_asked_for_during_a_pass_runs_no_second_pass():
    assert passes_with([], first=True) == [True]


def test_an_ask_to_apply_a_body_the_running_pass_applied_a_newer_one_of_applies_nothing_again():
    # a new cluster: its loop's first pass applied everything (due) with body version 12 while
    # the create handler, which had seen version 11, asked to apply
    assert passes_with([(True, "11")], first=None, first_applies="12") == [None, None]
    assert passes_with([(True, "12")], first=None, first_applies="12") == [None, None]


def test_an_ask_to_apply_a_newer_body_or_any_body_applies_again():
    assert passes_with([(True, "13")], first=None, first_applies="12") == [None, True]
    assert passes_with([(True, None)], first=None, first_applies="12") == [None, True]
    # of two asks, the newer one counts
    assert passes_with([(True, "13"), (True, "11")], first=None, first_applies="12") == [None, True]
    # a first pass whose apply did not go through (refused) met no ask
    assert passes_with([(True, "11")], first=None) == [None, True]


def test_an_ask_to_apply_what_an_earlier_pass_applied_runs_a_pass_that_applies_nothing():
    r = Reconciler(None, job_image="operator:test", kube=RecordingKube(), reads=OneCluster())
    ran: list[bool | None] = []
    r._reconcile = lambda body, entry, apply: ran.append(apply)
    r._entry("ns", "db", "u-1").applied_version = "12"
    r.nudge("ns", "db", apply=True, version="12")
    r.nudge("ns", "db", apply=True, version="13")
    r.nudge("ns", "db", apply=True)
    assert ran == [None, True, True]


def test_asks_merge_to_the_newest_version_or_to_any():
    assert merge_asks(None, "5") == "5"
    assert merge_asks(None, None) == ""
    assert merge_asks("5", "7") == "7"
    assert merge_asks("7", "5") == "7"
    assert merge_asks("", "7") == ""
    assert merge_asks("7", None) == ""
    assert apply_still_wanted("", "9")
    assert apply_still_wanted("9", "")
    assert not apply_still_wanted("9", "9")
    assert apply_still_wanted("10", "9")
