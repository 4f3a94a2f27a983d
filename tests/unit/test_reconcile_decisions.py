"""Pure parts of the reconcile: pods, roles/labels, events, status, resolver, operator settings."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mysql_operator import manifests as m
from mysql_operator import pods as podview
from mysql_operator import status as cstatus
from mysql_operator import conditions as cconditions
from mysql_operator import instance_status as cinstances
from mysql_operator import spec_record as cspec
from mysql_operator import status_events as cevents
from mysql_operator import summary as csummary
from mysql_operator import switchover as sw
from mysql_operator import topology as t
from mysql_operator.api import parse
from mysql_operator.cli import build_parser
from mysql_operator.cli_status import format_status
from mysql_operator.db.gtid import MariaDBGtids, MySQLGtidSet
from mysql_operator.k8s.resolve import resolve
from mysql_operator.operator import OperatorConfig, settings_for
from mysql_operator.members import Step

P, R = m.ROLE_PRIMARY, m.ROLE_REPLICA
SETTINGS = t.Settings(instances=3)


def pod(name, phase="Running", ready=True, role=None, ip="10.244.0.7", deleting=False):
    meta = {"name": name, "labels": {m.ROLE_LABEL: role} if role else {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "status": {
            "phase": phase,
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def inst(name, ordinal, reachable=True, read_only=True, source=None, executed="0-1-5", origin=None):
    return t.InstanceState(
        name=name,
        ordinal=ordinal,
        reachable=reachable,
        read_only=read_only,
        source=source,
        io_running=bool(source),
        sql_running=bool(source),
        executed=MariaDBGtids.parse(executed),
        origin=origin or str(ordinal + 1),
    )


# ------------------------------------------------------------------------------------ pods
def test_pod_views_read_ordinal_readiness_role_and_ignore_foreign_pods():
    views = podview.pod_views(
        "db",
        [
            pod("db-0", role=P),
            pod("db-1", ready=False),
            pod("db-x"),
            pod("other-0"),
            pod("db-2", phase="Pending", deleting=True),
        ],
    )
    assert sorted(views) == [0, 1, 2]
    assert (views[0].ready, views[0].role, views[0].running) == (True, P, True)
    assert (views[1].ready, views[1].role) == (False, None)
    assert views[2].deleting and not views[2].running


def _stuck(status):
    return {"metadata": {"name": "db-1"}, "status": {"phase": "Pending", **status}}


@pytest.mark.parametrize(
    "status, expected",
    [
        (
            {
                "containerStatuses": [
                    {
                        "name": "mysqld",
                        "state": {
                            "waiting": {
                                "reason": "ErrImagePull",
                                "message": "failed to pull mysql:8.4: not found",
                            }
                        },
                    }
                ]
            },
            "mysqld ErrImagePull: failed to pull mysql:8.4: not found",
        ),
        (
            {
                "initContainerStatuses": [
                    {"name": "init", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                ],
                "containerStatuses": [
                    {"name": "mysqld", "state": {"waiting": {"reason": "PodInitializing"}}}
                ],
            },
            "init CrashLoopBackOff",
        ),
        (
            {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/1 nodes are available: 1 Insufficient memory.",
                    }
                ]
            },
            "Unschedulable: 0/1 nodes are available: 1 Insufficient memory.",
        ),
        # the normal way to running is not a problem worth reporting
        (
            {
                "containerStatuses": [
                    {"name": "mysqld", "state": {"waiting": {"reason": "ContainerCreating"}}}
                ]
            },
            "",
        ),
        ({"containerStatuses": [{"name": "mysqld", "state": {"running": {}}}]}, ""),
        # a container that keeps failing: why it failed last, not the back-off's delay
        (
            {
                "initContainerStatuses": [
                    {
                        "name": "seed",
                        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                        "lastState": {
                            "terminated": {
                                "exitCode": 1,
                                "message": "seed: copy 7 from db-1: the donor refused the copy: ERR refused\n",
                            }
                        },
                    }
                ]
            },
            "seed CrashLoopBackOff: seed: copy 7 from db-1: the donor refused the copy: ERR refused",
        ),
    ],
)
def test_pod_waiting_says_why_a_pod_does_not_run(status, expected):
    assert podview.pod_waiting(_stuck(status)) == expected


def test_a_new_pods_first_refusal_by_the_scheduler_is_routine_until_it_lasts():
    """Right after the StatefulSet controller made a Pod and its claim, the scheduler may not have
    the claim in its cache yet: that refusal is no reason for a Warning; one that lasts is."""
    since = dt.datetime(2026, 12, 7, 15, 57, 28, tzinfo=dt.timezone.utc)
    refused = {
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": '0/1 nodes are available: persistentvolumeclaim "data-db-0" not found.',
                "lastTransitionTime": "2026-12-07T15:57:28Z",
            }
        ]
    }
    young = since + dt.timedelta(seconds=podview.UNSCHEDULED_GRACE_SECONDS - 1)
    old = since + dt.timedelta(seconds=podview.UNSCHEDULED_GRACE_SECONDS + 1)
    assert podview.pod_waiting(_stuck(refused), young) == ""
    assert podview.pod_waiting(_stuck(refused), old).startswith("Unschedulable: 0/1 nodes are available")
    assert podview.pod_views("db", [_stuck(refused)], young)[1].waiting == ""


def test_a_stuck_pod_is_named_in_its_instance_entry_and_the_ready_condition():
    pull = {
        "containerStatuses": [
            {
                "name": "mysqld",
                "state": {
                    "waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image mysql:8.4"}
                },
            }
        ]
    }
    pods = podview.pod_views("db", [pod("db-0", role=P), _stuck(pull)])
    entries = cinstances.instance_entries([0, 1], {0: "db-0", 1: "db-1"}, pods, {}, {}, {}, None)
    assert entries[1]["waiting"] == "mysqld ImagePullBackOff: Back-off pulling image mysql:8.4"
    ready = cconditions.conditions(csummary.Summary(instances=2, ready=1, entries=tuple(entries)))[0]
    assert (ready["status"], ready["reason"]) == ("False", "InstancesNotReady")
    assert (
        ready["message"]
        == "1/2 instances ready; db-1: mysqld ImagePullBackOff: Back-off pulling image mysql:8.4"
    )


@pytest.mark.parametrize(
    "instances, pods, primary, expected",
    [
        (3, [], None, [0, 1, 2]),
        (3, [0, 1, 2, 3, 4], 0, [0, 1, 2, 3, 4]),  # leaving pods still observed
        (1, [0], 2, [0, 2]),  # the recorded primary is always observed
    ],
)
def test_member_ordinals(instances, pods, primary, expected):
    assert podview.member_ordinals(instances, pods, primary) == expected


@pytest.mark.parametrize(
    "instances, primary, current, expected",
    [
        (3, None, None, 3),
        (3, 0, 5, 3),  # scale down below replicas: fine while the primary stays
        (2, 4, 5, 5),  # primary 4 is being removed: its Pod stays until a switchover moved it
        (2, 2, 3, 3),
        (5, 1, 3, 5),  # scale up
    ],
)
def test_statefulset_replicas_never_remove_the_primary(instances, primary, current, expected):
    assert podview.statefulset_replicas(instances, primary, current) == expected


# ------------------------------------------------------------------------------------ roles
def test_roles_primary_replicas_leaving_and_errant():
    observed = [
        inst("db-0", 0, read_only=False, executed="0-1-10"),
        inst("db-1", 1, source="db-0", executed="0-1-10"),
        inst("db-2", 2, source="db-0", executed="0-1-10,0-3-1"),  # wrote on a replica
        inst("db-3", 3, source="db-0", executed="0-1-10"),  # leaving (scale down)
        inst("db-4", 4, reachable=False, executed=None),
    ]
    roles = podview.desired_roles(observed, "db-0", 3, SETTINGS, primary_ok=True)
    assert roles == {"db-0": P, "db-1": R, "db-2": None, "db-3": None, "db-4": None}


def test_an_instance_the_operator_cannot_reach_loses_its_role_at_once():
    """An old primary cut off from the operator may still take writes: -ro must not route to it
    (nor to any replica the operator cannot vouch for)."""
    observed = [
        inst("db-0", 0, reachable=False),
        inst("db-1", 1),
        inst("db-2", 2, reachable=False),
    ]
    roles = podview.desired_roles(observed, "db-1", 3, SETTINGS, primary_ok=True)
    assert roles == {"db-0": None, "db-1": P, "db-2": None}


@pytest.mark.parametrize(
    "lags, max_lag, were, expected",
    [
        ({"db-1": 61, "db-2": 60}, 60, (), {"db-1"}),  # more than the limit: out
        ({"db-1": 31, "db-2": 31}, 60, ("db-1",), {"db-1"}),  # already out: back only under half
        ({"db-1": 30}, 60, ("db-1",), set()),
        ({"db-1": None}, 60, ("db-1",), set()),  # unknown lag: judged by the other rules
        ({"db-1": 5000}, 0, (), set()),  # 0: every replica serves reads
    ],
)
def test_a_replica_lagging_past_max_read_lag_leaves_ro_until_under_half_of_it(lags, max_lag, were, expected):
    assert podview.lagging_replicas(lags, max_lag, were) == expected


def test_lagging_takes_only_serving_replicas_out_and_keeps_other_reasons():
    observed = [
        inst("db-0", 0, read_only=False, executed="0-1-10"),
        inst("db-1", 1, source="db-0", executed="0-1-10"),
        inst("db-2", 2, source="db-0", executed="0-1-10,0-3-1"),  # errant: held out, not lagging
    ]
    roles = podview.desired_roles(observed, "db-0", 3, SETTINGS, primary_ok=True)
    roles, out = podview.without_lagging(roles, {"db-1", "db-2"})
    assert roles == {"db-0": P, "db-1": None, "db-2": None} and out == {"db-1"}
    entries = cinstances.instance_entries(
        [0, 1, 2],
        {0: "db-0", 1: "db-1", 2: "db-2"},
        {},
        {i.name: i for i in observed},
        {},
        roles,
        "db-0",
        (),
        out,
    )
    assert [e["role"] for e in entries] == [P, csummary.LAGGING, "held-out"]
    assert cinstances.were_lagging({"instances": entries}) == {"db-1"}


# ------------------------------------------------------------------------ who serves after a pass
@pytest.mark.parametrize(
    "promote_ok, writes, new_primary_role",
    [
        (False, False, None),  # its promotion failed: no writes, no Pod labelled primary
        (True, True, P),  # went through (the old primary, unreachable, could not be repointed)
    ],
)
def test_after_a_failover_the_new_primary_serves_only_if_its_promotion_went_through(
    promote_ok, writes, new_primary_role
):
    observed = [
        inst("db-0", 0, reachable=False),
        inst("db-1", 1, read_only=True),
        inst("db-2", 2, source="db-1"),
    ]
    d = t.Failover("db-0", "db-1", fence=("db-2",), replicas=("db-2",))
    steps = [
        Step("db-2", "fence"),
        Step("db-1", "promote", "" if promote_ok else "read_only stays on", ok=promote_ok),
        Step("db-0", "repoint", "unreachable", ok=False),
    ]
    out = podview.serving(d, steps, observed, "db-1", SETTINGS, {"db-2": 0}, 60)
    assert (out.primary_ok, out.writes) == (promote_ok, writes)
    assert out.roles == {"db-0": None, "db-1": new_primary_role, "db-2": R}
    assert out.unreachable == ("db-0",) and out.held == ()


@pytest.mark.parametrize("reachable, writes", [(False, False), (True, True)])
def test_while_a_failover_waits_for_its_delay_the_primary_keeps_its_label(reachable, writes):
    """The operator lost the primary, not necessarily the clients: it keeps the primary label
    until the failover happens; the status says it serves writes only when it answers."""
    observed = [inst("db-0", 0, reachable=reachable, read_only=False), inst("db-1", 1, source="db-0")]
    out = podview.serving(t.WaitForDelay(2.0), [], observed, "db-0", t.Settings(instances=2), {}, 60)
    assert (out.primary_ok, out.writes) == (True, writes)
    assert out.roles == {"db-0": P, "db-1": R}


def test_a_healthy_pass_takes_a_lagging_replica_out_of_ro_and_holds_an_errant_one():
    observed = [
        inst("db-0", 0, read_only=False, executed="0-1-10"),
        inst("db-1", 1, source="db-0", executed="0-1-10"),
        inst("db-2", 2, source="db-0", executed="0-1-10,0-3-1"),  # wrote on a replica
    ]
    out = podview.serving(
        t.Healthy("db-0"), [], observed, "db-0", SETTINGS, {"db-0": None, "db-1": 90, "db-2": 0}, 60
    )
    assert (out.primary_ok, out.writes) == (True, True)
    assert out.roles == {"db-0": P, "db-1": None, "db-2": None}
    assert (out.lagging, out.held, out.unreachable) == ({"db-1"}, ("db-2",), ())


def test_a_primary_found_read_only_serves_no_writes():
    observed = [inst("db-0", 0, read_only=True), inst("db-1", 1, source="db-0")]
    out = podview.serving(t.Healthy("db-0"), [], observed, "db-0", t.Settings(instances=2), {}, 60)
    assert (out.primary_ok, out.writes, out.roles["db-0"]) == (False, False, None)


def test_roles_failed_promotion_labels_no_primary():
    observed = [inst("db-0", 0), inst("db-1", 1)]
    roles = podview.desired_roles(observed, "db-1", 2, t.Settings(instances=2), primary_ok=False)
    assert roles == {"db-0": R, "db-1": None}


def test_roles_before_bootstrap_are_empty():
    observed = [inst("db-0", 0, executed=""), inst("db-1", 1, executed="")]
    assert podview.desired_roles(observed, None, 2, t.Settings(instances=2), primary_ok=False) == {
        "db-0": None,
        "db-1": None,
    }


@pytest.mark.parametrize(
    "current, desired, take, give",
    [
        # a role changed is taken away first (before the status), given after it; primary last
        ({"a": P, "b": R}, {"a": R, "b": P}, [("a", None), ("b", None)], [("a", R), ("b", P)]),
        ({"a": None, "b": P}, {"a": P, "b": None}, [("b", None)], [("a", P)]),
        ({"a": R, "b": R}, {"a": None, "b": R}, [("a", None)], []),  # out of -ro: before the status
        ({"a": None, "b": R}, {"a": R, "b": R}, [], [("a", R)]),  # back in -ro: after it
        ({"a": P, "b": R}, {"a": P, "b": R}, [], []),  # nothing to do: no writes
        ({"a": R}, {"a": R, "gone": P}, [], []),  # Pods that do not exist are not patched
        ({"a": P, "b": R}, {"b": P}, [("a", None), ("b", None)], [("b", P)]),  # primary unmentioned
    ],
)
def test_label_plan_table(current, desired, take, give):
    assert podview.label_plan(current, desired) == podview.LabelMoves(tuple(take), tuple(give))


@given(
    st.dictionaries(st.sampled_from("abcde"), st.sampled_from([P, R, None]), min_size=1),
    st.dictionaries(st.sampled_from("abcde"), st.sampled_from([P, R, None]), min_size=1),
)
def test_label_plan_never_has_two_primaries_nor_a_role_not_wanted(current, desired):
    # at most one primary in the wanted state and in the starting state (what the operator keeps)
    if sum(v == P for v in current.values()) > 1 or sum(v == P for v in desired.values()) > 1:
        return
    labels = dict(current)
    moves = podview.label_plan(current, desired)
    for name, value in moves.take:
        labels[name] = value
        assert sum(v == P for v in labels.values()) <= 1
    # between the two parts (when the status is written) no Pod has a role it is not to have
    assert all(v is None or desired.get(n, v if v != P else None) == v for n, v in labels.items())
    for name, value in moves.give:
        labels[name] = value
        assert sum(v == P for v in labels.values()) <= 1
    assert all(labels[n] == v for n, v in desired.items() if n in current)
    assert all(labels[n] != P for n in current if desired.get(n) != P)


# ------------------------------------------------------------------------------------ events
def test_events_from_steps_redact_secrets_and_type_failures():
    steps = [
        Step("db-1", "promote", "writable primary"),
        Step("db-0", "fence", "could not connect as x with s3cret-pw", ok=False),
        Step("db-2", "held-out", "errant", ok=False),
    ]
    assert cevents.events_from_steps(steps, ["s3cret-pw"]) == [
        ("Normal", "Promote", "db-1: writable primary"),
        ("Warning", "FenceFailed", "db-0: could not connect as x with ***"),
        ("Warning", "HeldOutFailed", "db-2: errant"),
    ]


@pytest.mark.parametrize(
    "decision, expected",
    [
        (t.Failover("db-0", "db-1", (), (), reason="primary down"), ("Warning", "Failover", "primary down")),
        (t.Switchover("db-0", "db-2", (), reason="asked"), ("Normal", "Switchover", "asked")),
        (t.Bootstrap("db-0", ("db-1",), reason="new"), ("Normal", "Bootstrap", "new")),
        (t.Healthy("db-0"), None),
        (t.WaitForDelay(3.0, reason="blip"), None),
        (None, None),
    ],
)
def test_decision_event(decision, expected):
    assert cevents.decision_event(decision) == expected


# ------------------------------------------------------------------------------------ status
def S(**kw):
    base = dict(
        instances=3,
        generation=4,
        ready=3,
        primary="db-0",
        primary_serving=True,
        primary_in_service=True,
        decision="Healthy",
    )
    base.update(kw)
    return csummary.Summary(**base)


@pytest.mark.parametrize(
    "summary, phase, ready, available, progressing, degraded",
    [
        (
            csummary.Summary(instances=3, spec_error="spec.x: bad"),
            "Invalid",
            ("False", "InvalidSpec"),
            ("False", "InvalidSpec"),
            ("False", "InvalidSpec"),
            ("True", "InvalidSpec"),
        ),
        # a refused spec with the last spec that parsed in effect: the cluster runs on it
        (
            S(spec={"instances": 3}, spec_error="spec.backup.schedule: bad", refused_generation=5),
            "Ready",
            ("True", "AllInstancesReady"),
            ("True", "PrimaryServing"),
            ("False", "Stable"),
            ("False", "AsExpected"),
        ),
        (
            S(spec={"instances": 3}, spec_error="spec.x: bad", ready=2, unreachable=("db-2",)),
            "Degraded",
            ("False", "InstancesNotReady"),
            ("True", "PrimaryServing"),
            ("True", "WaitingForInstances"),
            ("True", "InstancesUnreachable"),
        ),
        (
            S(spec={"instances": 3}, spec_error="spec.x: bad", decision="Failover", primary="db-1"),
            "FailingOver",
            ("False", "FailingOver"),
            ("True", "PrimaryServing"),
            ("True", "Failover"),
            ("False", "AsExpected"),
        ),
        (
            csummary.Summary(instances=3),
            "Pending",
            ("False", "InstancesNotReady"),
            ("False", "NoPrimary"),
            ("True", "WaitingForInstances"),
            ("False", "Bootstrapping"),
        ),
        (
            csummary.Summary(instances=3, secret_error="spec.credentials.secretName: missing"),
            "Failed",
            ("False", "InstancesNotReady"),
            ("False", "NoPrimary"),
            ("False", "CredentialsSecret"),
            ("True", "CredentialsSecret"),
        ),
        (
            S(primary=None, decision="Bootstrap", ready=0, primary_serving=False),
            "Bootstrapping",
            ("False", "InstancesNotReady"),
            ("False", "NoPrimary"),
            ("True", "Bootstrap"),
            ("False", "Bootstrapping"),
        ),
        (
            S(),
            "Ready",
            ("True", "AllInstancesReady"),
            ("True", "PrimaryServing"),
            ("False", "Stable"),
            ("False", "AsExpected"),
        ),
        # every instance Ready but some Pods still run an older template: the edit is not in
        # effect yet, so not Ready (a user waiting for Ready after an edit waits for the roll)
        (
            S(rolling="restarting db-2: db-2 runs revision db-1, not db-2"),
            "Updating",
            ("False", "Updating"),
            ("True", "PrimaryServing"),
            ("True", "RollingUpdate"),
            ("False", "AsExpected"),
        ),
        # a Pod of the roll down: Degraded as for any replica down, the roll still in progress
        (
            S(ready=2, unreachable=("db-2",), rolling="waiting: db-2 is not Ready"),
            "Degraded",
            ("False", "InstancesNotReady"),
            ("True", "PrimaryServing"),
            ("True", "RollingUpdate"),
            ("True", "InstancesUnreachable"),
        ),
        # writable and all Pods Ready, but the primary is not yet labelled/Ready behind -rw: not Ready
        (
            S(primary_in_service=False),
            "Unavailable",
            ("False", "PrimaryNotInService"),
            ("True", "PrimaryServing"),
            ("True", "WaitingForService"),
            ("False", "AsExpected"),
        ),
        (
            S(decision="Failover", primary="db-1"),
            "FailingOver",
            ("False", "FailingOver"),
            ("True", "PrimaryServing"),
            ("True", "Failover"),
            ("False", "AsExpected"),
        ),
        (
            S(decision="WaitForDelay", ready=2, unreachable=("db-0",), primary_serving=False),
            "Unavailable",
            ("False", "InstancesNotReady"),
            ("False", "PrimaryNotServing"),
            ("True", "Waiting"),
            ("True", "PrimaryUnreachable"),
        ),
        (
            S(ready=2, unreachable=("db-2",)),
            "Degraded",
            ("False", "InstancesNotReady"),
            ("True", "PrimaryServing"),
            ("True", "WaitingForInstances"),
            ("True", "InstancesUnreachable"),
        ),
        (
            S(decision="Errant", held_out=("db-2",)),
            "Degraded",
            ("False", "Degraded"),
            ("True", "PrimaryServing"),
            ("False", "Stable"),
            ("True", "InstancesHeldOut"),
        ),
        (
            S(decision="Unrecoverable", decision_reason="diverged", primary_serving=False),
            "Failed",
            ("False", "Failed"),
            ("False", "PrimaryNotServing"),
            ("False", "Stable"),
            ("True", "Unrecoverable"),
        ),
        # the primary lost with too few replicas answering: held, the reason (and how to force) shown
        (
            S(
                decision="FailoverHeld",
                decision_reason="only 1 of 2 replicas answer",
                ready=1,
                unreachable=("db-0", "db-1"),
                primary_serving=False,
            ),
            "Unavailable",
            ("False", "InstancesNotReady"),
            ("False", "PrimaryNotServing"),
            ("False", "FailoverHeld"),
            ("True", "FailoverHeld"),
        ),
        (
            S(decision="ConfigureReplica", failed_steps=("db-2 replicate: refused",)),
            "Degraded",
            ("False", "Degraded"),
            ("True", "PrimaryServing"),
            ("True", "ConfigureReplica"),
            ("True", "ActionFailed"),
        ),
        # a replica out of -ro for its lag: Degraded, naming the field that sets the limit
        (
            S(lagging=("db-2",), max_read_lag_seconds=60),
            "Degraded",
            ("False", "Degraded"),
            ("True", "PrimaryServing"),
            ("False", "Stable"),
            ("True", "ReplicasLagging"),
        ),
        # every Pod Ready, yet a commit on the primary would wait (its only acknowledging replica
        # reconnecting): not Ready, and why
        (
            S(commits_wait="commits on db-0 wait for a semi-sync acknowledgement: 0 of the 1 ..."),
            "Degraded",
            ("False", "SemiSyncAcksMissing"),
            ("True", "PrimaryServing"),
            ("False", "Stable"),
            ("True", "SemiSyncAcksMissing"),
        ),
        # an owned object the API server refuses: before a primary the cluster cannot come up
        (
            csummary.Summary(instances=3, apply_error="spec.affinity: StatefulSet db refused"),
            "Failed",
            ("False", "ApplyFailed"),
            ("False", "NoPrimary"),
            ("False", "ApplyFailed"),
            ("True", "ApplyFailed"),
        ),
        # ... a running cluster keeps serving (and failing over: the decision shows), Degraded
        (
            S(apply_error="spec.affinity: StatefulSet db refused"),
            "Degraded",
            ("False", "ApplyFailed"),
            ("True", "PrimaryServing"),
            ("False", "ApplyFailed"),
            ("True", "ApplyFailed"),
        ),
        (
            S(apply_error="spec.affinity: StatefulSet db refused", decision="Failover", primary="db-1"),
            "FailingOver",
            ("False", "ApplyFailed"),
            ("True", "PrimaryServing"),
            ("True", "Failover"),
            ("True", "ApplyFailed"),
        ),
    ],
)
def test_phase_and_conditions_table(summary, phase, ready, available, progressing, degraded):
    assert cconditions.phase(summary) == phase
    got = {c["type"]: (c["status"], c["reason"]) for c in cconditions.conditions(summary)}
    spec_valid = ("False", "InvalidSpec") if summary.spec_error else ("True", "Valid")
    assert got == {
        "Ready": ready,
        "Available": available,
        "Progressing": progressing,
        "Degraded": degraded,
        "SpecValid": spec_valid,
    }


def test_conditions_keep_transition_time_until_status_changes():
    first = cstatus.build_status(S(ready=2, unreachable=("db-2",)), {}, "T1")
    again = cstatus.build_status(S(ready=2, unreachable=("db-2",)), first, "T2")
    healed = cstatus.build_status(S(), again, "T3")
    times = lambda st: {c["type"]: c["lastTransitionTime"] for c in st["conditions"]}  # noqa: E731
    assert set(times(again).values()) == {"T1"}
    assert times(healed) == {
        "Ready": "T3",
        "Available": "T1",
        "Progressing": "T3",
        "Degraded": "T3",
        "SpecValid": "T1",
    }
    assert not cstatus.status_changed(first, again)
    assert cstatus.status_changed(again, healed)
    assert healed["observedGeneration"] == 4 and healed["currentPrimary"] == "db-0"
    assert all(c["observedGeneration"] == 4 for c in healed["conditions"])


def test_keys_the_reconciler_does_not_write_never_make_the_status_look_changed():
    """lastBackup (backup handlers) and primarySince (written when the primary changes) are left
    to a merge patch: their presence alone must not cause a status patch on every pass."""
    ok = cstatus.build_status(S(), {}, "T1")
    with_others = {**ok, "lastBackup": {"name": "b-1"}, "primarySince": "2026-11-23T10:00:00.5Z"}
    again = cstatus.build_status(S(), with_others, "T2")
    assert "lastBackup" not in again and "primarySince" not in again
    assert not cstatus.status_changed(with_others, again)


@pytest.mark.parametrize(
    "status, primary, expected",
    [
        ({"primarySince": "2026-11-23T10:00:00.250000Z"}, "db-1", ("db-1", 1795428000.25)),
        ({"primarySince": "not a time"}, "db-1", None),
        ({}, "db-1", None),
        ({"primarySince": "2026-11-23T10:00:00Z"}, None, None),
    ],
)
def test_primary_since_is_read_from_the_status(status, primary, expected):
    assert cinstances.primary_since(status, primary) == expected


def test_a_degraded_warning_is_posted_once_per_cause():
    ok = cstatus.build_status(S(), {}, "T1")
    down = cstatus.build_status(S(ready=2, unreachable=("db-2",)), ok, "T2")
    still = cstatus.build_status(S(ready=2, unreachable=("db-2",)), down, "T3")
    other = cstatus.build_status(S(ready=2, unreachable=("db-1",)), still, "T4")
    [(kind, reason, said)] = cevents.degraded_events(ok, down)
    assert (kind, reason) == ("Warning", "InstancesUnreachable") and said.startswith("db-2 unreachable: ")
    assert cevents.degraded_events(down, still) == []
    [(kind, reason, said)] = cevents.degraded_events(still, other)
    assert (kind, reason) == ("Warning", "InstancesUnreachable") and said.startswith("db-1 unreachable: ")
    assert cevents.degraded_events(other, ok) == []


def test_a_reseed_is_one_warning_not_one_per_progress_report():
    ok = cstatus.build_status(S(), {}, "T1")
    start = cstatus.build_status(S(reseeding=("db-2 re-seeding: 0 of 900 MiB copied",)), ok, "T2")
    later = cstatus.build_status(S(reseeding=("db-2 re-seeding: 300 of 900 MiB copied",)), start, "T3")
    [(kind, reason, said)] = cevents.degraded_events(ok, start)
    assert (kind, reason, said) == ("Warning", "Reseeding", "db-2 re-seeding: 0 of 900 MiB copied")
    assert cevents.degraded_events(start, later) == []
    degraded = next(c for c in later["conditions"] if c["type"] == "Degraded")
    assert degraded["message"] == "db-2 re-seeding: 300 of 900 MiB copied"  # the status moves on


def test_a_stuck_pod_is_a_warning_once_per_episode_whatever_the_kubelet_says_meanwhile():
    def status(*waiting: str) -> dict:
        return {
            "instances": [{"name": f"db-{n}", **({"waiting": w} if w else {})} for n, w in enumerate(waiting)]
        }

    pulling = status("", "mysqld ErrImagePull: failed to pull registry.local/mysql:typo")
    backoff = status("", "mysqld ImagePullBackOff: Back-off pulling image registry.local/mysql:typo")
    both = status("Unschedulable: 0/1 nodes are available", "mysqld ImagePullBackOff: Back-off")
    assert cevents.waiting_events(status("", ""), pulling) == [
        (
            "Warning",
            "InstanceWaiting",
            "db-1 cannot start: mysqld ErrImagePull: failed to pull registry.local/mysql:typo",
        )
    ]
    assert cevents.waiting_events(pulling, backoff) == []  # the same episode, in other words
    assert cevents.waiting_events(backoff, both) == [
        ("Warning", "InstanceWaiting", "db-0 cannot start: Unschedulable: 0/1 nodes are available")
    ]
    assert cevents.waiting_events(both, status("", "")) == []
    assert cevents.waiting_events(status("", ""), pulling) != []  # a new episode: said again
    assert cevents.waiting_events({}, pulling) != []  # a new cluster's first status


def test_instance_entries_report_role_readiness_gtid_lag_and_redacted_errors():
    pods = podview.pod_views("db", [pod("db-0", role=P), pod("db-1", ready=False)])
    observed = {
        "db-0": inst("db-0", 0, read_only=False, executed="0-1-9"),
        "db-1": t.InstanceState("db-1", 1, reachable=False, last_error="access denied for pw-xyz"),
    }
    roles = {"db-0": P, "db-1": R}
    entries = cinstances.instance_entries(
        [0, 1, 2], {0: "db-0", 1: "db-1", 2: "db-2"}, pods, observed, {"db-1": 4}, roles, "db-0", ["pw-xyz"]
    )
    assert entries == [
        {"name": "db-0", "role": P, "ready": True, "reachable": True, "gtidExecuted": "0-1-9"},
        {
            "name": "db-1",
            "role": R,
            "ready": False,
            "reachable": False,
            "lagSeconds": 4,
            "error": "access denied for ***",
        },
        {"name": "db-2", "role": "unknown", "ready": False, "reachable": False},
    ]


@pytest.mark.parametrize(
    "flavor, gtids",
    [("mariadb", "0-1-317,0-2-400"), ("mysql", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-77")],
)
def test_a_silent_instances_last_gtids_stay_in_the_status_and_are_read_back(flavor, gtids):
    """An instance that stops answering keeps, in status.instances[].gtidExecuted, what it had
    when it last answered: a restarted operator reads it back (an entry that does not parse is
    left out)."""
    parse = MySQLGtidSet.parse if flavor == "mysql" else MariaDBGtids.parse
    silent = t.InstanceState("db-1", 1, reachable=False, last_executed=parse(gtids))
    entries = cinstances.instance_entries([1], {1: "db-1"}, {}, {"db-1": silent}, {}, {}, "db-1")
    assert entries[0]["gtidExecuted"] == str(parse(gtids)) and entries[0]["reachable"] is False
    status = {"instances": [*entries, {"name": "db-2", "gtidExecuted": "not gtids"}, {"gtidExecuted": gtids}]}
    assert cinstances.recorded_executed(status, flavor) == {"db-1": parse(gtids)}


# ------------------------------------------------------------------------------------ resolver
C = parse({"metadata": {"name": "db", "namespace": "prod"}, "spec": {"instances": 3}})


@pytest.mark.parametrize(
    "p, mode, expected",
    [
        (pod("db-0", ip="10.244.0.9"), "auto", ("10.244.0.9", 3306)),  # in a Pod too: no DNS lookup
        (pod("db-0", ip="10.244.0.9"), "ip", ("10.244.0.9", 3306)),
        (pod("db-0", ip="10.244.0.9", deleting=True), "auto", ("10.244.0.9", 3306)),  # still serving
        (pod("db-0", phase="Pending", ip=None), "auto", (None, 3306)),  # no address: unreachable
        (None, "ip", (None, 3306)),
        (pod("db-0", ip="10.244.0.9"), "dns", ("db-0.db-headless.prod.svc", 3306)),
        (None, "dns", ("db-0.db-headless.prod.svc", 3306)),
    ],
)
def test_resolver(p, mode, expected):
    assert resolve(C, 0, p, mode) == expected


def test_resolver_rejects_unknown_mode():
    with pytest.raises(ValueError, match="resolver mode"):
        resolve(C, 0, None, "magic")


# ------------------------------------------------------------------------------------ operator
def test_kopf_settings_are_explicit():
    s = settings_for(OperatorConfig(namespaces=("a",)))
    assert (s.watching.server_timeout, s.watching.client_timeout) == (300, 330)
    assert s.watching.connect_timeout and s.networking.request_timeout
    assert s.peering.standalone
    assert s.background.cancellation_polling <= 2  # a deleted cluster goes within seconds
    p = settings_for(OperatorConfig(all_namespaces=True, peering="mysql-operator", priority=5))
    assert (p.peering.standalone, p.peering.name, p.peering.clusterwide, p.peering.priority) == (
        False,
        "mysql-operator",
        True,
        5,
    )


def test_the_essence_kopf_compares_a_cluster_on_is_its_own_without_copying_the_status():
    import kopf

    from mysql_operator.operator import SpecDiffBase

    body = {
        "apiVersion": "mysql.example/v1",
        "kind": "MySQLCluster",
        "metadata": {
            "name": "c",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "7",
            "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}],
            "labels": {"team": "a"},
            "annotations": {
                "note": "kept",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
                "mysql.example/last-handled-configuration": '{"spec": {"instances": 2}}',
            },
        },
        "spec": {"instances": 3, "storage": {"size": "1Gi"}},
        "status": {"phase": "Ready", "instances": [{"name": "c-0"}]},
    }
    ours = SpecDiffBase(prefix="mysql.example", key="last-handled-configuration")
    kopfs = kopf.AnnotationsDiffBaseStorage(prefix="mysql.example", key="last-handled-configuration")
    essence = ours.build(body=kopf.Body(body))
    assert essence == kopfs.build(body=kopf.Body(body))
    assert essence == {
        "spec": {"instances": 3, "storage": {"size": "1Gi"}},
        "metadata": {"labels": {"team": "a"}, "annotations": {"note": "kept"}},
    }
    essence["spec"]["storage"]["size"] = "2Gi"  # a copy: the body kopf keeps is not changed
    assert body["spec"]["storage"]["size"] == "1Gi"
    # a field outside the essence a handler asks for is kept, as kopf keeps it
    wanted = ours.build(body=kopf.Body(body), extra_fields=[("status", "phase")])
    assert wanted == kopfs.build(body=kopf.Body(body), extra_fields=[("status", "phase")])
    assert wanted["status"] == {"phase": "Ready"}
    assert (
        settings_for(OperatorConfig(namespaces=("a",))).persistence.diffbase_storage.__class__ is SpecDiffBase
    )


@pytest.mark.parametrize(
    "annotations",
    [{}, {"note": "kept"}, {"note": "kept", "mysql.example/cluster_changed": '{"retries": 1}'}],
    ids=["none", "the user's", "a handler in progress"],
)
def test_progress_records_are_cleared_from_an_essence_as_kopf_clears_them(annotations):
    import kopf

    from mysql_operator.operator import Progress

    def essence() -> dict:
        return {"spec": {"instances": 3}, "metadata": {"annotations": dict(annotations)}}

    ours = Progress(prefix="mysql.example").clear(essence=essence())
    assert ours == kopf.AnnotationsProgressStorage(prefix="mysql.example").clear(essence=essence())
    assert "mysql.example/cluster_changed" not in str(ours)
    assert settings_for(OperatorConfig(namespaces=("a",))).persistence.progress_storage.__class__ is Progress


@pytest.mark.parametrize(
    "cfg, message",
    [
        (OperatorConfig(), "choose the scope"),
        (OperatorConfig(namespaces=("a",), all_namespaces=True), "choose the scope"),
        (OperatorConfig(namespaces=("a",), log_format="xml"), "--log-format"),
        (
            OperatorConfig(namespaces=("a",), watch_server_timeout=300, watch_client_timeout=300),
            "client timeout",
        ),
    ],
)
def test_operator_config_errors_name_the_flag(cfg, message):
    with pytest.raises(ValueError, match=message):
        cfg.check()


def test_cli_parses_run_switchover_and_status():
    a = build_parser().parse_args(["run", "-n", "a", "-n", "b", "--log-format", "json"])
    assert (a.namespace, a.log_format, a.all_namespaces) == (["a", "b"], "json", False)
    a = build_parser().parse_args(["switchover", "db", "--to", "2", "-n", "x"])
    assert (a.to, a.reason, a.wait) == ("2", "", False)
    a = build_parser().parse_args(["switchover", "db", "--to", "db-1", "--reason", "disk", "--wait"])
    assert (a.to, a.reason, a.wait, a.namespace) == ("db-1", "disk", True, None)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "-n", "a", "--all-namespaces"])


class FakeClusters:
    """CustomObjectsApi of one MySQLCluster whose operator carries an annotated request out at
    once (status.switchover says `result`)."""

    def __init__(self, result: str):
        self.result, self.patches = result, []
        # an earlier request in the same words, done: not the outcome of this one
        self.status = {
            "switchover": {"to": "db-1", "requestedBy": "alice: disk", "requestedAt": "t1", "result": "Done"}
        }

    def __call__(self, api_client=None):  # stands in for the CustomObjectsApi class
        return self

    def patch_namespaced_custom_object(self, group, version, namespace, plural, name, body):
        self.patches.append((namespace, name, body))

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        if self.patches:
            to, by, _ = sw.parse_value(self.patches[0][2]["metadata"]["annotations"][sw.ANNOTATION], name)
            record = {"to": to, "requestedBy": by, "requestedAt": "t2", "result": self.result}
            self.status = {"switchover": record}
        return {"metadata": {"name": name}, "status": self.status}


@pytest.mark.parametrize("result, code", [("Done", 0), ("Refused", 1)])
def test_cli_switchover_annotates_with_the_callers_name_and_waits_for_the_outcome(
    result, code, monkeypatch, tmp_path, capsys
):
    from kubernetes import client

    from mysql_operator import cli

    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "alice", "namespace": "p"}}],
                "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "alice", "user": {"token": "x"}}],
            }
        )
    )
    fake = FakeClusters(result)
    monkeypatch.setattr(client, "CustomObjectsApi", fake)
    monkeypatch.setattr("time.sleep", lambda s: None)
    argv = ["switchover", "db", "--to", "1", "--reason", "disk", "--wait", "--kubeconfig", str(kubeconfig)]
    assert cli.main(argv) == code
    assert fake.patches[0] == ("p", "db", {"metadata": {"annotations": {sw.ANNOTATION: "1; alice: disk"}}})
    out = capsys.readouterr().out
    assert "switchover to db-1 requested" in out and out.rstrip().endswith(f"{result}:")


def test_status_text_names_phase_primary_and_instances():
    body = {
        "metadata": {"name": "db", "namespace": "p"},
        "spec": {"instances": 2},
        "status": {
            "phase": "Ready",
            "currentPrimary": "db-0",
            "readyInstances": 2,
            "conditions": [{"type": "Ready", "status": "True", "reason": "AllInstancesReady"}],
            "instances": [
                {"name": "db-0", "role": P, "ready": True, "gtidExecuted": "0-1-3"},
                {"name": "db-1", "role": "unknown", "ready": False, "waiting": "mysqld CrashLoopBackOff"},
            ],
        },
    }
    text = format_status(body)
    assert "p/db: phase Ready, primary db-0, ready 2/2, largest replica lag -, last backup never" in text
    assert "AllInstancesReady" in text and "db-0" in text and "0-1-3" in text
    assert "waiting=mysqld CrashLoopBackOff" in text
    body["status"]["switchover"] = {
        "to": "db-1",
        "requestedBy": "alice",
        "result": "Pending",
        "message": "waits",
    }
    assert "  switchover to db-1 (alice): Pending: waits" in format_status(body)
    body["status"]["replicaLagSeconds"] = 7
    body["status"]["lastBackup"] = {"name": "nightly", "completedAt": "2026-11-25T03:00:00Z"}
    now = dt.datetime(2026, 11, 25, 5, 30, 0, tzinfo=dt.timezone.utc)
    assert "largest replica lag 7 s, last backup nightly 2h30m ago" in format_status(body, now)


@pytest.mark.parametrize(
    "status, generation, since, skip",
    [
        ({"phase": "Pending", "observedGeneration": 1}, 1, 5.0, True),
        ({"phase": "Pending", "observedGeneration": 1}, 1, 61.0, False),  # resync due
        ({"phase": "Pending", "observedGeneration": 1}, 2, 5.0, False),  # spec changed
        ({"phase": "Pending", "observedGeneration": 1, "currentPrimary": "db-0"}, 1, 5.0, False),
        ({"phase": "Ready", "observedGeneration": 1}, 1, 5.0, False),  # instances to observe
        ({}, 1, 5.0, False),  # never reconciled
    ],
)
def test_timer_skips_only_clusters_with_nothing_to_observe(status, generation, since, skip):
    assert cstatus.timer_can_skip(status, generation, since, 60.0) is skip


@pytest.mark.parametrize(
    "steps, ok",
    [
        ([Step("db-1", "promote", "writable")], True),
        ([Step("db-1", "promote", "writable"), Step("db-2", "replicate", "refused", ok=False)], True),
        ([Step("db-0", "demote", ""), Step("db-1", "switchover", "did not catch up", ok=False)], False),
        ([Step("db-1", "fence", "timeout", ok=False)], False),
    ],
)
def test_promotion_fails_only_with_a_failed_step_on_the_new_primary(steps, ok):
    assert podview.promotion_succeeded("db-1", steps) is ok


def _pod(ordinal, ready=True, role="primary", deleting=False):
    return podview.PodView(f"db-{ordinal}", ordinal, running=True, ready=ready, role=role, deleting=deleting)


@pytest.mark.parametrize(
    "pods, primary, expected",
    [
        ({0: _pod(0)}, 0, True),
        ({0: _pod(0, role=None)}, 0, False),  # label not moved yet: -rw has no endpoint
        ({0: _pod(0, role="replica")}, 0, False),
        ({0: _pod(0, ready=False)}, 0, False),  # not Ready: not a ready endpoint
        ({0: _pod(0, deleting=True)}, 0, False),
        ({1: _pod(1)}, 0, False),  # no Pod for the primary
        ({0: _pod(0)}, None, False),
    ],
)
def test_primary_in_service(pods, primary, expected):
    assert csummary.primary_in_service(pods, primary) is expected


def test_replicas_require_tls_only_once_every_server_pod_mounts_its_certificate():
    from mysql_operator.tls_upkeep import serves_tls

    new = {"spec": {"volumes": [{"name": "config"}, {"name": "tls", "secret": {"secretName": "db-tls"}}]}}
    old = {"spec": {"volumes": [{"name": "config"}]}}  # from before TLS, not yet rolled
    assert serves_tls([new, new])
    assert not serves_tls([new, old]) and not serves_tls([])


@pytest.mark.parametrize(
    "message, fields",
    [
        (
            'StatefulSet.apps "db" is invalid: spec.template.spec.containers[0].resources.requests: '
            'Invalid value: "4Gi": must be less than or equal to memory limit of 2Gi',
            ["spec.resources"],
        ),
        (
            'StatefulSet.apps "db" is invalid: spec.template.spec.affinity.nodeAffinity.'
            "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Required value",
            ["spec.affinity"],
        ),
        (
            "spec.template.spec.tolerations[0].operator: Invalid value; "
            "spec.template.spec.priorityClassName: Invalid value",
            ["spec.priorityClassName", "spec.tolerations"],
        ),
        (
            "spec.volumeClaimTemplates[0].spec.storageClassName: Invalid value",
            ["spec.storage.storageClassName"],
        ),
        ("etcdserver: request timed out", []),
    ],
)
def test_an_apply_refusal_names_the_cluster_fields_the_api_message_points_at(message, fields):
    text = cspec.apply_refusal("StatefulSet", "db", 422, message)
    assert message in text and "StatefulSet db" in text and "HTTP 422" in text
    if fields:
        assert text.startswith(", ".join(fields) + ": ")
        assert text.endswith("fix " + " and ".join(fields))
    else:
        assert text.startswith("StatefulSet db ")
    assert "not applied" in cspec.apply_refusal("Service", "db-rw", None, "no answer")


@pytest.mark.parametrize(
    "decision, phase",
    [("Failover", "FailingOver"), ("Switchover", "SwitchingOver"), ("Promote", "Unavailable")],
)
def test_a_new_primary_is_written_with_a_phase_and_conditions_that_stop_calling_the_cluster_ready(
    decision, phase
):
    """Written before the new primary is promoted: a reader of the status never sees the new
    primary's name next to Ready=True and "the old primary accepts writes"."""
    ready = cstatus.build_status(S(), {}, "T1")
    changing = S(primary="db-1", primary_serving=False, primary_in_service=False, decision=decision)
    written = cstatus.primary_change_status(changing, ready, "T2")
    assert written["currentPrimary"] == "db-1" and written["phase"] == phase
    got = {c["type"]: (c["status"], c["lastTransitionTime"]) for c in written["conditions"]}
    assert got["Ready"] == ("False", "T2") and got["Available"] == ("False", "T2")
    assert got["Progressing"] == ("True", "T2")
    available = next(c for c in written["conditions"] if c["type"] == "Available")
    assert available["message"].startswith("db-1 does not accept writes: ")


def test_a_failover_with_a_refused_spec_in_place_still_says_the_spec_is_refused():
    """The write made when a new primary is chosen carries what the last apply found (CI at
    1c26cfd: e2e/test_apply_errors read Degraded AsExpected between the failover's two writes)."""
    from mysql_operator.api import parse as parse_cluster
    from mysql_operator.pass_state import ClusterEntry
    from mysql_operator.reconcile import Reconciler
    from tests.support.specs import body

    c = parse_cluster(body({"flavor": "mariadb", "instances": 3}, name="db", namespace="prod"))
    entry = ClusterEntry(apply_error="spec.affinity: StatefulSet db refused by the API server")
    standing = Reconciler._standing(c, entry)
    assert standing["apply_error"] == entry.apply_error
    refused = cstatus.build_status(S(apply_error=entry.apply_error), {}, "T1")
    changing = S(primary="db-1", primary_serving=False, decision="Failover", **standing)
    written = cstatus.primary_change_status(changing, refused, "T2")
    degraded = next(x for x in written["conditions"] if x["type"] == "Degraded")
    assert (written["phase"], degraded["status"], degraded["reason"]) == (
        "FailingOver",
        "True",
        "ApplyFailed",
    )
    assert degraded["lastTransitionTime"] == "T1"  # the same refusal, not a new one


def test_a_bootstrap_is_bootstrapping_until_its_primary_serves():
    assert cconditions.phase(S(primary_serving=False, decision="Bootstrap")) == "Bootstrapping"
    assert cconditions.phase(S(decision="Bootstrap")) == "Ready"


def test_a_reseed_that_does_not_get_on_says_why_in_its_progress():
    i = t.InstanceState("db-2", 2, reachable=False, clone=t.CLONE_COPYING)
    assert cinstances.reseed_progress(i) == "db-2 re-seeding"
    why = "seed CrashLoopBackOff: seed: the donor did not answer"
    assert cinstances.reseed_progress(i, why) == f"db-2 re-seeding: {why}"


def test_a_copy_past_its_estimate_never_shows_more_copied_than_expected():
    """MariaDB's expected bytes are the donor's estimate; the copy carries redo written meanwhile."""
    mib = 1024 * 1024
    under = t.InstanceState(
        "db-2", 2, reachable=False, clone=t.CLONE_COPYING, clone_bytes=(5 * mib, 17 * mib)
    )
    past = t.InstanceState(
        "db-2", 2, reachable=False, clone=t.CLONE_COPYING, clone_bytes=(20 * mib, 17 * mib)
    )
    unknown = t.InstanceState("db-2", 2, reachable=False, clone=t.CLONE_COPYING, clone_bytes=(20 * mib, 0))
    assert cinstances.reseed_entry(under)["bytesTotal"] == 17 * mib
    assert (
        cinstances.reseed_entry(past)["bytesCopied"]
        == cinstances.reseed_entry(past)["bytesTotal"]
        == 20 * mib
    )
    assert cinstances.reseed_progress(past) == "db-2 re-seeding: 20 of 20 MiB copied"
    assert cinstances.reseed_entry(unknown)["bytesTotal"] == 0


def test_every_decision_says_what_it_does_to_the_primary_so_the_phase_never_guesses():
    """The phase and conditions derive from a decision's Transition: a new decision without one
    fails here rather than showing a phase picked by its name."""
    decisions = {d for d in vars(t).values() if isinstance(d, type) and issubclass(d, t.Decision)} - {
        t.Decision
    }
    assert decisions == set(t.TRANSITIONS)
    assert t.transition(None) is None
    failing_over = cconditions.phase(
        csummary.Summary(instances=3, ready=3, primary="db-1", decision="Failover")
    )
    lost = cconditions.phase(csummary.Summary(instances=3, ready=2, primary="db-0", decision="Unrecoverable"))
    assert (failing_over, lost) == ("FailingOver", "Failed")


@pytest.mark.parametrize(
    "drill, status, reason, says",
    [
        (
            {"phase": "Succeeded", "message": "restored and serving in 90s"},
            "True",
            "RestoreDrillSucceeded",
            "90s",
        ),
        (
            {"phase": "Failed", "message": "the restore failed: corrupted"},
            "False",
            "RestoreDrillFailed",
            "corrupted",
        ),
        (
            {"phase": "Running", "backup": "b2", "startedAt": "T2", "lastSucceededAt": "T1"},
            "True",
            "RestoreDrillRunning",
            "the last one passed at T1",
        ),
        (
            {"phase": "Running", "backup": "b1", "startedAt": "T0"},
            "Unknown",
            "RestoreDrillRunning",
            "runs since T0",
        ),
    ],
)
def test_condition_restorable_says_what_the_last_drill_proved(drill, status, reason, says):
    found = {c["type"]: c for c in cconditions.conditions(csummary.Summary(instances=1, drill=drill))}
    assert (found["Restorable"]["status"], found["Restorable"]["reason"]) == (status, reason)
    assert says in found["Restorable"]["message"]
    assert "Restorable" not in {c["type"] for c in cconditions.conditions(csummary.Summary(instances=1))}


@pytest.mark.parametrize(
    "pod, expected",
    [
        # no Pod (force-deleted: its containers may still run), or one being deleted whose
        # server's shutdown has not ended (it may serve until then): nothing said
        (None, ""),
        (
            {"metadata": {"deletionTimestamp": "2026-12-06T03:00:00Z"}, "status": {"phase": "Running"}},
            "",
        ),
        (
            {
                "metadata": {"deletionTimestamp": "2026-12-06T03:00:00Z"},
                "status": {
                    "phase": "Running",
                    "containerStatuses": [{"name": "mysqld", "state": {"running": {}}}],
                },
            },
            "",
        ),
        # being deleted, and the kubelet saw its server end (a Pod delete: the failover need not
        # wait the delay, when no replica still receives from it)
        (
            {
                "metadata": {"deletionTimestamp": "2026-12-06T03:00:00Z"},
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {"name": "mysqld", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}
                    ],
                },
            },
            "its container mysqld is terminated (Completed)",
        ),
        (
            {"metadata": {"deletionTimestamp": "2026-12-06T03:00:00Z"}, "status": {"phase": "Succeeded"}},
            "its Pod is Succeeded",
        ),
        ({"metadata": {}, "status": {"phase": "Pending"}}, "its Pod is Pending"),
        ({"metadata": {}, "status": {"phase": "Failed"}}, "its Pod is Failed"),
        ({"metadata": {}, "status": {"phase": "Unknown"}}, ""),  # its node does not report: silence
        (
            {
                "metadata": {},
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {"name": "exporter", "state": {"running": {}}},
                        {"name": "mysqld", "state": {"terminated": {"reason": "Error", "exitCode": 137}}},
                    ],
                },
            },
            "its container mysqld is terminated (Error)",
        ),
        (
            {
                "metadata": {},
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {"name": "mysqld", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                    ],
                },
            },
            "its container mysqld is waiting (CrashLoopBackOff)",
        ),
        # nothing said: it may well run (a status not written yet, the server running)
        ({"metadata": {}, "status": {}}, ""),
        (
            {
                "metadata": {},
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {"name": "mysqld", "state": {"running": {"startedAt": "2026-12-06T03:00:00Z"}}}
                    ],
                },
            },
            "",
        ),
        (
            {
                "metadata": {},
                "status": {
                    "phase": "Running",
                    "containerStatuses": [{"name": "exporter", "state": {"terminated": {"reason": "Error"}}}],
                },
            },
            "",
        ),
    ],
)
def test_what_a_pod_says_of_a_server_that_cannot_be_serving(pod, expected):
    assert podview.server_not_running(pod) == expected
