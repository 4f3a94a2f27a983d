"""Switchover requests (mysql_operator/switchover.py): the annotation and an un-honoured spec.primary
become the desired primary until done or refused, once; the records, Events and the annotation's
removal that follow."""

from __future__ import annotations

import dataclasses

import pytest

from mysql_operator import switchover as sw
from mysql_operator import rules
from mysql_operator import topology as t
from mysql_operator.db.gtid import MariaDBGtids

G = MariaDBGtids.parse
NOW, EARLIER = "2026-11-25T06:40:00Z", "2026-11-25T06:30:00Z"
S3 = t.Settings(instances=3)


def inst(n, reachable=True, primary=False, gtids="0-1-10", **kw):
    return t.InstanceState(
        name=f"db-{n}",
        ordinal=n,
        reachable=reachable,
        origin=str(n + 1),
        read_only=not primary,
        source=None if primary or not reachable else "db-0",
        io_running=reachable and not primary,
        sql_running=reachable and not primary,
        executed=G(gtids) if reachable else None,
        **kw,
    )


def pending(annotations=None, spec_primary=None, status=None, instances=3, generation=4):
    return sw.pending(annotations or {}, "db", instances, spec_primary, generation, status or {}, NOW)


@pytest.mark.parametrize(
    "value, to, by, ordinal",
    [
        ("db-1", "db-1", "", 1),
        ("1", "db-1", "", 1),
        (" 2 ; alice: node maintenance ", "db-2", "alice: node maintenance", 2),
        ("db-1; bob; twice", "db-1", "bob; twice", 1),
        ("other-1", "other-1", "", None),
        ("db-\u00b2", "db-\u00b2", "", None),  # a superscript two: no ordinal
        ("", "", "", None),
    ],
)
def test_the_annotation_names_an_instance_by_name_or_ordinal_and_who_asks(value, to, by, ordinal):
    assert sw.parse_value(value, "db") == (to, by, ordinal)


def test_the_cli_writes_what_the_operator_reads():
    value = sw.annotation_value("1", "alice", "node maintenance")
    assert value == "1; alice: node maintenance"
    assert sw.parse_value(value, "db") == ("db-1", "alice: node maintenance", 1)
    assert sw.annotation_value("db-2") == "db-2"


def test_no_annotation_and_no_spec_primary_is_no_request():
    assert pending() == []


def test_an_annotation_is_a_request_its_first_sighting_dated_and_kept_while_it_waits():
    (req,) = pending({sw.ANNOTATION: "db-1; alice"})
    assert (req.to, req.requested_by, req.requested_at, req.target, req.from_spec) == (
        "db-1",
        "alice",
        NOW,
        "db-1",
        False,
    )
    waiting = {
        "switchover": {"to": "db-1", "requestedBy": "alice", "requestedAt": EARLIER, "result": "Pending"}
    }
    assert pending({sw.ANNOTATION: "1; alice"}, status=waiting)[0].requested_at == EARLIER
    # the same words after a finished request: a new request
    done = {"switchover": {**waiting["switchover"], "result": "Done"}}
    assert pending({sw.ANNOTATION: "1; alice"}, status=done)[0].requested_at == NOW


@pytest.mark.parametrize(
    "value, problem",
    [("db-3", "db-3 is not among the 3 instances"), ("x-1", "'x-1' names no instance of db")],
)
def test_an_annotation_naming_no_instance_has_no_target_and_is_refused(value, problem):
    (req,) = pending({sw.ANNOTATION: value})
    assert req.target is None and req.problem.startswith(problem)
    v = sw.judge(req, [inst(0, primary=True)], S3, "db-0", "db-0", True, "")
    assert v.result == sw.REFUSED and v.message == req.problem
    assert sw.no_servers(req).result == sw.REFUSED


@pytest.mark.parametrize(
    "record, is_request",
    [
        (None, True),  # never acted on (a cluster made before primaryRequest existed, or new)
        ({"value": 1, "generation": 2, "result": "Done"}, False),  # honoured: never again
        ({"value": 1, "generation": 2, "result": "Refused"}, False),  # refused: never again
        ({"value": 1, "generation": 2, "result": "Pending"}, True),  # still waiting
        ({"value": 0, "generation": 2, "result": "Done"}, True),  # a new value: a new request
    ],
)
def test_spec_primary_is_a_request_only_until_its_value_was_acted_on(record, is_request):
    status = {"primaryRequest": record} if record else {}
    reqs = pending(spec_primary=1, status=status)
    assert bool(reqs) == is_request
    if reqs:
        assert (reqs[0].to, reqs[0].spec_value, reqs[0].from_spec) == ("db-1", 1, True)
        # the generation that asked: the record's while it waits, else the spec's
        same = record is not None and record["value"] == 1
        assert reqs[0].generation == (2 if same else 4)


def test_the_annotation_goes_first_and_a_waiting_spec_primary_is_superseded():
    reqs = pending({sw.ANNOTATION: "db-2"}, spec_primary=1)
    assert [r.to for r in reqs] == ["db-2", "db-1"]
    settled = sw.settle(reqs, sw.Verdict(sw.PENDING, "waits"), {}, 1, NOW)
    assert settled.fields["switchover"]["result"] == sw.PENDING
    assert settled.fields["primaryRequest"]["result"] == sw.REFUSED
    assert "superseded" in settled.fields["primaryRequest"]["message"]
    assert not settled.remove_annotation  # the annotation's request still waits


# ------------------------------------------------------------------------------------- judging
def judge(req, observed, before="db-0", after="db-0", promoted=True, why="the cluster must settle first"):
    return sw.judge(req, observed, S3, before, after, promoted, why)


REQ = sw.Request("db-1", "alice", NOW)


def test_done_once_the_target_is_the_recorded_primary_and_its_promotion_went_through():
    cluster = [inst(0), inst(1, primary=True), inst(2)]
    v = judge(REQ, cluster, before="db-0", after="db-1")
    assert (v.result, v.already) == (sw.DONE, False)
    assert judge(REQ, cluster, before="db-1", after="db-1").already
    assert judge(REQ, cluster, after="db-1", promoted=False).result == sw.PENDING


def test_a_target_that_is_down_waits_then_is_refused():
    down = t.InstanceState("db-1", 1, reachable=False, unreachable_for=12.0)
    cluster = [inst(0, primary=True), down, inst(2)]
    v = judge(REQ, cluster)
    assert v.result == sw.PENDING and "db-1: unreachable" in v.message
    late = t.InstanceState("db-1", 1, reachable=False, unreachable_for=sw.WAIT_SECONDS)
    v = judge(REQ, [inst(0, primary=True), late, inst(2)])
    assert v.result == sw.REFUSED and "unreachable for more than 300 s" in v.message
    # no primary yet (spec.primary at creation, a slow first image pull): it waits for the bootstrap
    assert judge(REQ, [inst(0), late, inst(2)], before=None, after=None).result == sw.PENDING


def test_a_held_out_or_reseeding_target_is_refused():
    errant = inst(1, gtids="0-1-10,0-2-3")
    v = judge(REQ, [inst(0, primary=True), errant, inst(2)])
    assert v.result == sw.REFUSED and "held out" in v.message and "0-2-3" in v.message
    copying = inst(1, clone=t.CLONE_COPYING)
    v = judge(REQ, [inst(0, primary=True), copying, inst(2)])
    assert v.result == sw.REFUSED and "re-seeded" in v.message


def test_a_usable_target_waits_with_a_message_that_does_not_change_every_pass():
    cluster = [inst(0, primary=True), inst(1), inst(2)]
    assert judge(REQ, cluster, why="x").message == "waits: x"
    assert judge(REQ, []).message == "waits for db-1: not observed yet"
    assert sw.no_servers(REQ) == sw.Verdict(sw.PENDING, "waits for db-1: no server observed yet")


@pytest.mark.parametrize(
    "decision, desired, says",
    [
        (t.Switchover("db-0", "db-1", ()), "db-1", "switching over to db-1"),
        (t.Healthy("db-0"), "db-2", "the rolling update goes first"),
        (t.Healthy("db-0"), None, "the rolling update goes first"),
        (t.WaitForDelay(2.0, reason="primary db-0 unreachable for 1.0s"), "db-1", "(WaitForDelay)"),
    ],
)
def test_why_a_usable_target_waits(decision, desired, says):
    assert says in sw.waiting(decision, desired, "db-1")


# ------------------------------------------------------------------------------------- records
def test_a_finished_annotation_request_is_recorded_said_and_its_annotation_removed():
    (req,) = pending({sw.ANNOTATION: "1; alice: s3cret maintenance"})
    done = sw.settle([req], sw.Verdict(sw.DONE, "db-1 is the primary"), {}, None, NOW, ["s3cret"])
    assert done.fields == {
        "switchover": {
            "to": "db-1",
            "requestedBy": "alice: *** maintenance",
            "requestedAt": NOW,
            "result": "Done",
            "message": "db-1 is the primary",
            "finishedAt": NOW,
        }
    }
    assert done.remove_annotation
    assert [(e[0], e[1]) for e in done.events] == [("Normal", "SwitchoverDone")]
    assert "s3cret" not in done.events[0][2] and "alice" in done.events[0][2]
    refused = sw.settle([req], sw.Verdict(sw.REFUSED, "db-1 is being re-seeded"), {}, None, NOW)
    assert [(e[0], e[1]) for e in refused.events] == [("Warning", "SwitchoverRefused")]
    assert refused.remove_annotation and refused.fields["switchover"]["result"] == "Refused"


def test_a_waiting_request_keeps_its_annotation_and_says_nothing():
    (req,) = pending({sw.ANNOTATION: "db-1"})
    settled = sw.settle([req], sw.Verdict(sw.PENDING, "waits for db-1: unreachable"), {}, None, NOW)
    assert settled.events == () and not settled.remove_annotation
    assert "finishedAt" not in settled.fields["switchover"]


def test_a_spec_primary_request_is_recorded_with_its_value_and_generation_never_an_annotation():
    (req,) = pending(spec_primary=1)
    settled = sw.settle([req], sw.Verdict(sw.DONE, "db-1 is the primary"), {}, 1, NOW)
    assert settled.fields["primaryRequest"] == {
        "value": 1,
        "generation": 4,
        "requestedAt": NOW,
        "result": "Done",
        "message": "db-1 is the primary",
        "finishedAt": NOW,
    }
    assert not settled.remove_annotation and [e[1] for e in settled.events] == ["SwitchoverDone"]
    # an upgraded cluster's spec.primary: 0 on the primary it already has: recorded, not said
    quiet = sw.settle([req], sw.Verdict(sw.DONE, "db-1 is the primary already", already=True), {}, 1, NOW)
    assert quiet.events == () and quiet.fields["primaryRequest"]["result"] == "Done"


def test_spec_primary_removed_takes_its_record_along():
    status = {"primaryRequest": {"value": 1, "generation": 2, "result": "Done"}}
    assert sw.settle([], None, status, None, NOW).fields == {"primaryRequest": None}
    assert sw.settle([], None, status, 1, NOW).fields == {}


def test_the_cli_waits_for_the_outcome_of_its_own_request():
    before = {"to": "db-1", "requestedBy": "alice", "requestedAt": EARLIER, "result": "Done"}
    assert not sw.finished(before, before, "db-1", "alice")  # an earlier one, the same words
    assert not sw.finished({**before, "requestedAt": NOW, "result": "Pending"}, before, "db-1", "alice")
    assert sw.finished({**before, "requestedAt": NOW}, before, "db-1", "alice")
    assert not sw.finished({**before, "requestedAt": NOW}, before, "db-2", "alice")
    assert sw.finished({**before, "result": "Refused"}, None, "db-1", "alice")


def test_a_request_followed_over_passes_switches_once_and_never_back():
    """The whole life of a request, pass after pass through rules.decide: it waits for its
    target (the replicas are repaired meanwhile), is done once, and the failover that follows
    is not undone (nothing is asked any more)."""
    status: dict = {}
    ann = {sw.ANNOTATION: "db-1; alice"}
    down = t.InstanceState("db-1", 1, reachable=False, unreachable_for=5.0)
    broken = dataclasses.replace(inst(2), source=None, io_running=False, sql_running=False)
    recorded = "db-0"
    for cluster, want in (
        ([inst(0, primary=True), down, broken], t.ConfigureReplica),  # waits; repairs go on
        ([inst(0, primary=True), inst(1), inst(2)], t.Switchover),  # back: switched over
    ):
        reqs = sw.pending(ann, "db", 3, None, 1, status, NOW)
        d = rules.decide(cluster, S3, recorded, reqs[0].target)
        assert isinstance(d, want), d
        after = d.to if isinstance(d, t.Switchover) else recorded
        v = sw.judge(reqs[0], cluster, S3, recorded, after, True, sw.waiting(d, reqs[0].target, "db-1"))
        settled = sw.settle(reqs, v, status, None, NOW)
        status.update(settled.fields)
        if settled.remove_annotation:
            ann = {}
        recorded = after
    assert status["switchover"]["result"] == "Done" and ann == {}
    # db-1 fails, db-0 takes over; db-1 returns: nobody asks for it any more
    assert sw.pending(ann, "db", 3, None, 1, status, NOW) == []
    d = rules.decide([inst(0, primary=True), inst(1), inst(2)], S3, "db-0", None)
    assert isinstance(d, t.Healthy), d
