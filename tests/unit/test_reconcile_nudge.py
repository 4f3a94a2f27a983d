"""Passes asked for while one runs: one more pass runs at its end, and it applies the owned
objects only when one of those asking said to (a new cluster's create handler applied them, then
its loop's first tick and its StatefulSet's first event each had everything applied again)."""

from __future__ import annotations

from mysql_operator.pass_state import KOPF_RECORD, apply_still_wanted, essence, merge_asks
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
    seen: str | None = None,
) -> list[bool | None]:
    """The `apply` of each pass nudge(apply=first, seen=seen) ran, with nudges for each of
    `asked_during_the_first` (an `apply`, or (apply, seen)) arriving while its first pass
    ran. `first_applies`: the essence the first pass applied (its apply went through; "": it
    applied nothing)."""
    r = Reconciler(None, job_image="operator:test", kube=RecordingKube(), reads=OneCluster())
    ran: list[bool | None] = []

    def one_pass(body, entry, apply):
        ran.append(apply)
        if len(ran) == 1:
            if first_applies:
                entry.applied_essence = first_applies
            for asked in asked_during_the_first:
                apply_, saw = asked if isinstance(asked, tuple) else (asked, None)
                assert r.nudge("ns", "db", apply=apply_, seen=saw) is None  # busy: asked for, not run
        return "result"

    r._reconcile = one_pass
    assert r.nudge("ns", "db", apply=first, seen=seen) == "result"
    return ran


def test_a_pass_asked_for_during_an_applying_pass_runs_once_and_applies_only_when_due():
    assert passes_with([None, None], first=True) == [True, None]


def test_a_pass_asked_to_apply_during_a_pass_applies():
    assert passes_with([None, True, None], first=None) == [None, True]
    assert passes_with([True], first=True) == [True, True]


def test_nothing_asked_for_during_a_pass_runs_no_second_pass():
    assert passes_with([], first=True) == [True]


def test_an_ask_to_apply_what_the_running_pass_applied_applies_nothing_again():
    # a new cluster: its loop's first pass applied everything (due) while the create handler,
    # which had seen the same essence, asked to apply
    assert passes_with([(True, "E1")], first=None, first_applies="E1") == [None, None]


def test_an_ask_to_apply_another_essence_or_any_applies_again():
    assert passes_with([(True, "E2")], first=None, first_applies="E1") == [None, True]
    assert passes_with([(True, None)], first=None, first_applies="E1") == [None, True]
    # of two asks the later counts: the pass reads the newest body
    assert passes_with([(True, "E1"), (True, "E2")], first=None, first_applies="E1") == [None, True]
    assert passes_with([(True, "E2"), (True, "E1")], first=None, first_applies="E1") == [None, None]
    # one asking whatever was applied keeps its ask
    assert passes_with([(True, None), (True, "E1")], first=None, first_applies="E1") == [None, True]
    # a first pass whose apply did not go through (refused) met no ask
    assert passes_with([(True, "E1")], first=None) == [None, True]


def test_an_ask_to_apply_what_an_earlier_pass_applied_runs_a_pass_that_applies_nothing():
    r = Reconciler(None, job_image="operator:test", kube=RecordingKube(), reads=OneCluster())
    ran: list[bool | None] = []
    r._reconcile = lambda body, entry, apply: ran.append(apply)
    r._entry("ns", "db", "u-1").applied_essence = "E1"
    r.nudge("ns", "db", apply=True, seen="E1")
    r.nudge("ns", "db", apply=True, seen="E2")
    r.nudge("ns", "db", apply=True)
    assert ran == [None, True, True]


def test_the_essence_is_the_generation_labels_and_annotations_not_kopfs_record_nor_the_status():
    body = {
        "metadata": {
            "generation": 1,
            "resourceVersion": "10",
            "labels": {"team": "a"},
            "annotations": {"note": "x"},
        },
        "status": {"phase": "Pending"},
    }
    same = {
        "metadata": {
            **body["metadata"],
            "resourceVersion": "12",
            "finalizers": ["kopf.zalando.org/KopfFinalizerMarker"],
            "annotations": {"note": "x", KOPF_RECORD: "{}"},
        },
        "status": {"phase": "Running"},
    }
    assert essence(same) == essence(body)
    for changed in ({"generation": 2}, {"labels": {"team": "b"}}, {"annotations": {"note": "y"}}):
        assert essence({"metadata": {**body["metadata"], **changed}}) != essence(body), changed


def test_asks_merge_to_the_later_one_or_to_any():
    assert merge_asks(None, "E1") == "E1"
    assert merge_asks(None, None) == ""
    assert merge_asks("E1", "E2") == "E2"
    assert merge_asks("E2", "E1") == "E1"
    assert merge_asks("", "E1") == ""
    assert merge_asks("E1", None) == ""
    assert apply_still_wanted("", "E1")
    assert apply_still_wanted("E1", "")
    assert not apply_still_wanted("E1", "E1")
    assert apply_still_wanted("E2", "E1")
