"""observer.Observer: what rounds of observations leave behind, read without any server."""

from __future__ import annotations

import dataclasses

from mysql_operator.db.observation import Observation, ReplicaStatus
from mysql_operator.members import Member
from mysql_operator.observer import Observer

MEMBERS = {f"db-{i}": Member(f"db-{i}", i, f"db-{i}", 3306) for i in range(2)}


def replica(io_errno: int = 0, received: str = "", io_state: str = "Yes") -> ReplicaStatus:
    return ReplicaStatus("db-0", 3306, io_state, True, io_errno, "", 0, "", 0, received)


def round_(observer: Observer, at: float, **observations: Observation):
    states = observer.states(MEMBERS, observations, {}, started=at, now=at + 0.5, wall=1000.0 + at)
    return {s.name: s for s in states}


def test_an_outage_is_timed_from_the_first_round_that_saw_it_and_ends_when_the_member_answers():
    o = Observer()
    up = Observation(reachable=True, read_only=False, executed="x", uptime=50.0)
    round_(o, 0.0, **{"db-0": up})
    down = Observation(reachable=False, error="(2003, 'Connection refused')")
    assert round_(o, 10.0, **{"db-0": down})["db-0"].unreachable_for == 0.5
    seen = round_(o, 20.0, **{"db-0": down})["db-0"]
    assert seen.unreachable_for == 10.5 and seen.last_executed == "x"  # what it had when it answered
    assert o.down_for("db-0", 25.0) == 15.0 and o.last_error["db-0"] == down.error
    round_(o, 30.0, **{"db-0": up})
    assert o.down_for("db-0", 40.0) == 30.0  # the outage that ended still times a failover...
    assert o.down_for("db-0", 31.0 + Observer.RECENT_OUTAGE_SECONDS) is None  # ...for a while


def test_a_member_silent_in_its_first_failed_observation_only_is_said_so():
    """rules: a failover on silence waits for a second observation (one slow round is not an
    outage); an answer starts the count again."""
    o = Observer()
    up = Observation(reachable=True, read_only=False, executed="x", uptime=50.0)
    down = Observation(reachable=False, error="(2013, 'timed out')")
    assert not round_(o, 0.0, **{"db-0": up})["db-0"].missed_once
    assert round_(o, 1.0, **{"db-0": down})["db-0"].missed_once
    assert not round_(o, 4.0, **{"db-0": down})["db-0"].missed_once
    round_(o, 5.0, **{"db-0": up})
    assert round_(o, 6.0, **{"db-0": down})["db-0"].missed_once


def test_a_replication_error_is_timed_while_its_errnos_stay_and_again_when_they_change():
    o = Observer()
    r1 = round_(o, 0.0, **{"db-1": Observation(reachable=True, replica=replica(io_errno=2003))})
    assert r1["db-1"].error_for == 0.5 and r1["db-1"].source == "db-0"
    r2 = round_(o, 5.0, **{"db-1": Observation(reachable=True, replica=replica(io_errno=2003))})
    assert r2["db-1"].error_for == 5.5
    r3 = round_(o, 9.0, **{"db-1": Observation(reachable=True, replica=replica(io_errno=1236))})
    assert r3["db-1"].error_for == 0.5
    r4 = round_(o, 12.0, **{"db-1": Observation(reachable=True, replica=replica())})
    assert r4["db-1"].error_for == 0.0


def test_a_replica_heard_from_its_source_while_what_it_received_changed_in_the_last_seconds():
    """Passes may come faster than heartbeats (one a second when the primary is idle): a round
    that saw nothing new since the last one, a moment after a change, still hears the source
    (CI: both replicas of a serving primary taken for deaf between two passes 0.1 s apart)."""
    o = Observer()
    window = Observer.HEARD_SECONDS

    def heard(at: float, received: str, heartbeats: int, io: bool = True) -> bool:
        r = replica(received=received, io_state="Yes" if io else "No")
        seen = Observation(reachable=True, replica=r, heartbeats=heartbeats)
        return round_(o, at, **{"db-1": seen})["db-1"].source_heard

    assert not heard(0.0, "a", 1)  # nothing to compare with
    assert not heard(1.0, "a", 1)
    assert heard(2.0, "a", 2)  # a heartbeat
    assert heard(3.0, "ab", 2)  # a transaction
    assert heard(3.1, "ab", 2)  # nothing new in 0.1 s: the next heartbeat is not due yet
    assert heard(3.0 + window, "ab", 2)
    assert not heard(3.1 + window, "ab", 2)  # silent for longer than the window
    assert heard(7.0, "ab", 3)
    assert not heard(7.1, "ab", 3, io=False)  # its receiver stopped


def test_a_primary_that_booted_again_after_it_was_seen_serving_has_restarted():
    o = Observer()
    serving = Observation(reachable=True, read_only=False, uptime=100.0)
    assert not round_(o, 0.0, **{"db-0": serving})["db-0"].restarted
    same_boot = Observation(reachable=True, read_only=True, uptime=110.0)
    assert not round_(o, 10.0, **{"db-0": same_boot})["db-0"].restarted
    booted_again = Observation(reachable=True, read_only=True, uptime=3.0)
    assert round_(o, 20.0, **{"db-0": booted_again})["db-0"].restarted


def test_a_primary_made_before_this_process_started_is_judged_by_when_it_was_promoted():
    o = Observer()
    o.primary_since = ("db-0", 900.0)  # wall clock, from the cluster status
    read_only = Observation(reachable=True, read_only=True, uptime=50.0)  # booted at 1000 - 50 + 20
    assert round_(o, 20.0, **{"db-0": read_only})["db-0"].restarted
    o2 = Observer()
    o2.primary_since = ("db-0", 990.0)
    assert not round_(o2, 20.0, **{"db-0": read_only})["db-0"].restarted


def test_only_a_refusal_or_the_pod_shows_that_a_server_is_not_running():
    """A refused connection (nothing listens) or what the Pod says is evidence, about the Pod the
    member last answered in; a timeout, a reset, an unreachable host, a full server, no address
    are not (a stalled or cut off server, or a force-deleted Pod whose server may still run)."""
    from mysql_operator.observer import down_evidence

    member = MEMBERS["db-0"]
    seen = {"db-0": None}  # it answered in the Pod it has (none: a member without a Pod)
    refused = "db-0: cannot connect: (2003, \"Can't connect to MySQL server on '10.1.0.7' ([Errno 111] Connection refused)\")"
    assert "refused" in down_evidence(Observation(reachable=False, error=refused), member, seen)
    for silent in (
        "db-0: cannot connect: (2003, \"Can't connect to MySQL server on '10.1.0.7' (timed out)\")",
        "db-0: cannot connect: (2003, \"Can't connect to MySQL server on '10.1.0.7' ([Errno 113] No route to host)\")",
        "db-0: observing failed: (2013, 'Lost connection to MySQL server during query (timed out)')",
        "db-0: cannot connect: (1040, 'Too many connections')",
        "db-0: cannot connect: (2003, \"Can't connect to MySQL server on 'db-0.db' ([Errno -3] Temporary failure in name resolution)\")",
        "db-0: cannot connect: (2005, 'no address (its Pod has no IP)')",
        None,
    ):
        assert down_evidence(Observation(reachable=False, error=silent), member, seen) == "", silent
    ended = Member(
        "db-0", 0, "10.1.0.7", 3306, uid="u1", pod_down="its container mysqld is terminated (Error)"
    )
    assert down_evidence(Observation(reachable=False), ended, {"db-0": "u1"}) == ended.pod_down
    assert down_evidence(Observation(reachable=True), ended, {"db-0": "u1"}) == ""  # it answers: it runs
    # a Pod other than the one it answered in, or never seen answering: the old server may run on
    assert down_evidence(Observation(reachable=False, error=refused), ended, {"db-0": "u0"}) == ""
    assert down_evidence(Observation(reachable=False, error=refused), ended, {}) == ""
    o = Observer()
    up = Observation(reachable=True, read_only=False, executed="x", uptime=50.0)
    o.states({"db-0": ended}, {"db-0": up}, {}, 0.0, 0.5, 1000.0)
    states = o.states(
        {"db-0": ended}, {"db-0": Observation(reachable=False, error=refused)}, {}, 1.0, 1.5, 1001.0
    )
    assert states[0].down_evidence.startswith("its server refused")
    recreated = dataclasses.replace(ended, uid="u2")
    states = o.states(
        {"db-0": recreated}, {"db-0": Observation(reachable=False, error=refused)}, {}, 2.0, 2.5, 1002.0
    )
    assert states[0].down_evidence == ""


def test_a_pod_deleted_after_its_server_ended_stays_evidence_once_another_replaces_it():
    """A Pod deleted gracefully goes once the kubelet saw its server end, and the StatefulSet makes
    a new one at once: until the new one's server answers, what the old one said last stands
    (about the Pod the member last answered in only). A force-deleted Pod (removed while it ran:
    its server may run on the node) is no evidence."""
    from mysql_operator.observer import down_evidence
    from mysql_operator.pods import ended_pod

    deleted = {
        "metadata": {"uid": "u1", "deletionTimestamp": "2026-12-06T14:44:26Z"},
        "status": {"phase": "Failed"},
    }
    forced = {
        "metadata": {"uid": "u1", "deletionTimestamp": "2026-12-06T14:44:26Z"},
        "status": {"phase": "Running"},
    }
    assert ended_pod(deleted) == ("u1", "its Pod is Failed")
    assert ended_pod(forced) is None and ended_pod(None) is None
    timeout = "db-0: cannot connect: (2003, \"Can't connect to MySQL server on '10.1.0.9' (timed out)\")"
    for pod_uid in ("u2", None):  # a new Pod (Pending, no answer yet), or none yet
        replaced = Member("db-0", 0, None, 3306, uid=pod_uid, ended_before=ended_pod(deleted))
        said = down_evidence(Observation(reachable=False, error=timeout), replaced, {"db-0": "u1"})
        assert said == "its Pod is Failed and was deleted (its server ended)"
        assert down_evidence(Observation(reachable=True), replaced, {"db-0": "u1"}) == ""
        # it last answered in another Pod than the one that ended: nothing known of that one's server
        assert down_evidence(Observation(reachable=False, error=timeout), replaced, {"db-0": "u0"}) == ""
        forced_member = dataclasses.replace(replaced, ended_before=ended_pod(forced))
        assert down_evidence(Observation(reachable=False, error=timeout), forced_member, {"db-0": "u1"}) == ""
