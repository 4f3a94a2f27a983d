"""Rolling update decisions: replicas first (highest ordinal first), one at a time, the primary
last and only after a switchover to an updated replica."""

from __future__ import annotations

import pytest

from mysql_operator import manifests as m
from mysql_operator import rolling as r
from mysql_operator.api import parse

NEW, OLD = "rev-new", "rev-old"


def pods(*specs):
    """'0:old', '1:new:notready', '2:old:lagging', '1:new:deleting', '0:old:stuck' -> RollPods
    named db-N."""
    out = []
    for s in specs:
        ordinal, rev, *flags = s.split(":")
        out.append(
            r.RollPod(
                f"db-{ordinal}",
                int(ordinal),
                {"old": OLD, "new": NEW}[rev],
                ready="notready" not in flags,
                deleting="deleting" in flags,
                replicating="lagging" not in flags,
                stuck="ImagePullBackOff: 401 Unauthorized" if "stuck" in flags else "",
            )
        )
    return out


@pytest.mark.parametrize(
    "specs, primary, instances, expected",
    [
        # nothing outdated
        (("0:new", "1:new", "2:new"), "db-0", 3, r.Done()),
        # replicas first, highest ordinal first
        (("0:old", "1:old", "2:old"), "db-0", 3, r.DeletePod("db-2", "")),
        (("0:old", "1:old", "2:new"), "db-0", 3, r.DeletePod("db-1", "")),
        # the primary is not deleted while it is primary: switchover to an updated replica (lowest)
        (("0:old", "1:new", "2:new"), "db-0", 3, r.SwitchTo("db-1", "")),
        (("0:new", "1:old", "2:new"), "db-1", 3, r.SwitchTo("db-0", "")),
        # after the switchover the old primary is an outdated replica: deleted
        (("0:old", "1:new", "2:new"), "db-1", 3, r.DeletePod("db-0", "")),
        # one at a time: a restarting Pod, a not-Ready Pod, a missing Pod or a lagging replica waits
        (("0:old", "1:old", "2:new:notready"), "db-0", 3, r.Wait("")),
        (("0:old", "1:old", "2:new:deleting"), "db-0", 3, r.Wait("")),
        (("0:old", "1:old"), "db-0", 3, r.Wait("")),
        (("0:old", "1:old", "2:new:lagging"), "db-0", 3, r.Wait("")),
        (("0:old", "1:new", "2:new:lagging"), "db-0", 3, r.Wait("")),
        # a primary that is not replicating is fine (it is the source)
        (("0:old:lagging", "1:new", "2:old"), "db-0", 3, r.DeletePod("db-2", "")),
        # no primary known: wait
        (("0:old", "1:old", "2:old"), None, 3, r.Wait("")),
        # a single instance restarts in place (nothing to switch to)
        (("0:old",), "db-0", 1, r.DeletePod("db-0", "")),
        # Pods beyond spec.instances (leaving after a scale down) are not rolled
        (("0:new", "1:new", "2:old"), "db-0", 2, r.Done()),
    ],
)
def test_next_step(specs, primary, instances, expected):
    got = r.next_step(pods(*specs), NEW, primary, instances)
    assert type(got) is type(expected)
    if isinstance(expected, (r.DeletePod, r.SwitchTo)):
        assert got.name == expected.name
    assert got.reason  # every step says why


def test_without_a_known_revision_nothing_is_deleted():
    assert isinstance(r.next_step(pods("0:old", "1:old"), None, "db-0", 2), r.Wait)


def test_a_full_roll_deletes_replicas_then_switches_then_deletes_the_old_primary():
    """Simulate: each DeletePod comes back updated, SwitchTo moves the primary."""
    state = {o: OLD for o in range(3)}
    primary = "db-0"
    trace = []
    for _ in range(10):
        step = r.next_step(
            [r.RollPod(f"db-{o}", o, rev, True, False, True) for o, rev in state.items()], NEW, primary, 3
        )
        if isinstance(step, r.Done):
            break
        trace.append((type(step).__name__, step.name))
        if isinstance(step, r.DeletePod):
            state[int(step.name.split("-")[1])] = NEW
        else:
            primary = step.name
    assert trace == [
        ("DeletePod", "db-2"),
        ("DeletePod", "db-1"),
        ("SwitchTo", "db-1"),
        ("DeletePod", "db-0"),
    ]
    assert primary == "db-1"


def test_every_step_of_a_roll_is_in_progress_for_the_status_until_done():
    """The status says Updating (not Ready) from the first outdated Pod until the last one ran."""
    steps = [
        r.next_step(pods("0:old", "1:old", "2:old"), NEW, "db-0", 3),
        r.next_step(pods("0:old", "1:old", "2:new:notready"), NEW, "db-0", 3),
        r.next_step(pods("0:old", "1:new", "2:new"), NEW, "db-0", 3),
    ]
    assert [type(s).__name__ for s in steps] == ["DeletePod", "Wait", "SwitchTo"]
    said = [r.in_progress(s) for s in steps]
    assert said[0].startswith("restarting db-2: ") and "not Ready" in said[1] and "db-1" in said[2]
    assert r.in_progress(r.next_step(pods("0:new", "1:new", "2:new"), NEW, "db-1", 3)) == ""
    assert r.in_progress(None) == ""


@pytest.mark.parametrize(
    "sts, expected",
    [
        (None, None),
        ({"metadata": {"generation": 3}, "status": {"observedGeneration": 3, "updateRevision": "x"}}, "x"),
        ({"metadata": {"generation": 4}, "status": {"observedGeneration": 3, "updateRevision": "x"}}, None),
        ({"metadata": {"generation": 1}, "status": {}}, None),
    ],
)
def test_update_revision_only_once_the_controller_observed_the_template(sts, expected):
    assert r.update_revision(sts) == expected


def test_statefulset_is_on_delete_so_the_operator_orders_restarts():
    c = parse(
        {
            "apiVersion": "mysql.operator.dev/v1alpha1",
            "kind": "MySQLCluster",
            "metadata": {"name": "db", "namespace": "ns", "generation": 1},
            "spec": {"instances": 3, "flavor": "mariadb"},
        }
    )
    assert m.statefulset(c)["spec"]["updateStrategy"] == {"type": "OnDelete"}


# ------------------------------------------------------------------ reconcile glue (pure parts)
from mysql_operator import rollout as rc  # noqa: E402
from mysql_operator import topology as t  # noqa: E402


def raw_pod(name, rev, ready=True):
    return {
        "metadata": {"name": name, "labels": {r.REVISION_LABEL: rev}},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_roll_pods_reads_revision_readiness_and_replication_from_the_source_primary():
    listed = [
        raw_pod("db-0", OLD),
        raw_pod("db-1", NEW),
        raw_pod("db-2", NEW, ready=False),
        raw_pod("x-0", OLD),
    ]
    observed = [
        t.InstanceState("db-0", 0, True, read_only=False),
        t.InstanceState("db-1", 1, True, source="db-0", io_running=True, sql_running=True),
        t.InstanceState("db-2", 2, True, source="db-0", io_running=False, sql_running=True),
    ]
    got = {p.name: p for p in rc.roll_pods("db", listed, observed, "db-0")}
    assert set(got) == {"db-0", "db-1", "db-2"}
    assert got["db-0"].revision == OLD and got["db-1"].revision == NEW
    assert got["db-1"].replicating and not got["db-2"].replicating and not got["db-2"].ready
    # replicating from another source than the primary does not count
    observed[1] = t.InstanceState("db-1", 1, True, source="db-2", io_running=True, sql_running=True)
    assert not {p.name: p for p in rc.roll_pods("db", listed, observed, "db-0")}["db-1"].replicating


@pytest.mark.parametrize(
    "pinned, roll, pinned_rev, expected",
    [
        (None, None, OLD, None),
        ("db-0", None, OLD, "db-0"),  # no roll: the pin stands
        ("db-0", r.Done(), OLD, "db-0"),
        (None, r.SwitchTo("db-1", "why"), OLD, "db-1"),  # the roll moves the primary
        ("db-0", r.SwitchTo("db-1", "why"), OLD, "db-1"),
        ("db-0", r.DeletePod("db-0", "why"), OLD, None),  # not back to an outdated pin
        ("db-0", r.Wait("why"), OLD, None),
        ("db-0", r.DeletePod("db-2", "why"), NEW, "db-0"),  # updated pin: switch back
    ],
)
def test_roll_desired(pinned, roll, pinned_rev, expected):
    assert rc.roll_desired(pinned, roll, NEW, [raw_pod("db-0", pinned_rev), raw_pod("db-1", NEW)]) == expected


@pytest.mark.parametrize(
    "specs, expected",
    [
        # the first Pod of a new cluster cannot pull its image; the spec was fixed since
        (("0:old:notready:stuck",), "db-0"),
        # any stuck outdated Pod, primary or not, Ready others or not: the highest ordinal first
        (("0:old:stuck", "1:old:stuck", "2:new"), "db-1"),
        (("0:old", "1:new:notready", "2:old:notready:stuck"), "db-2"),
        # stuck on the current template: replacing it would change nothing
        (("0:new:notready:stuck",), None),
        # outdated but not stuck (starting, or running): the ordered roll's business
        (("0:old:notready", "1:old"), None),
        # already going
        (("0:old:stuck:deleting",), None),
    ],
)
def test_an_outdated_pod_that_does_not_run_is_replaced_at_once(specs, expected):
    step = r.replace_stuck(pods(*specs), NEW)
    assert (step.name if step else None) == expected
    if step:
        assert "401 Unauthorized" in step.reason and NEW in step.reason
    assert r.replace_stuck(pods(*specs), None) is None, "no revision observed yet: nothing to compare"


# -- which Pod template is written: a restart a new operator version needs is staged -------------
W = r.Written(applied="A", wanted="A", generation=4)


@pytest.mark.parametrize(
    "written, desired, generation, same, policy, approved, elsewhere, expected",
    [
        # a new StatefulSet, an unchanged template: written (nothing restarts)
        (None, "B", 1, False, "Manual", False, None, ("write", False)),
        (W, "A", 4, False, "Manual", False, "ns/other", ("write", False)),
        # an older operator's StatefulSet (no hashes) whose template the API server says is the same
        (r.Written(None, None, 4), "B", 4, True, "Manual", False, "ns/other", ("write", False)),
        # the user changed the spec: the roll they asked for starts at once, whatever the policy
        (W, "B", 5, False, "Manual", False, "ns/other", ("write", False)),
        # the operator changed the template (same generation)
        (W, "B", 4, False, "Auto", False, None, ("write", True)),
        (W, "B", 4, False, "Auto", False, "ns/other", ("stage", "WaitingForOtherCluster")),
        (W, "B", 4, False, "Manual", False, None, ("stage", "WaitingForApproval")),
        (W, "B", 4, False, "Manual", True, None, ("write", True)),
        (W, "B", 4, False, "Manual", True, "ns/other", ("stage", "WaitingForOtherCluster")),
        # an older operator's StatefulSet with another template: the operator's change too
        (r.Written(None, None, 4), "B", 4, False, "Auto", False, None, ("write", True)),
        (r.Written(None, None, 4), "B", 4, False, "Manual", False, None, ("stage", "WaitingForApproval")),
        # staged at generation 4; a spec edit that leaves the template alone does not release it...
        (r.Written("A", "B", 5), "B", 6, False, "Manual", False, None, ("stage", "WaitingForApproval")),
        # ...one that changes it again does (the user asked for a restart)
        (r.Written("A", "B", 5), "C", 6, False, "Manual", False, None, ("write", False)),
    ],
)
def test_template_step(written, desired, generation, same, policy, approved, elsewhere, expected):
    step = r.template_step(written, desired, generation, same, r.Policy(policy), approved, elsewhere)
    if expected[0] == "write":
        assert isinstance(step, r.WriteTemplate) and step.operator_change is expected[1], step
    else:
        assert isinstance(step, r.StageTemplate) and step.reason == expected[1], step
        assert step.message


def test_a_staged_restart_says_what_it_waits_for_and_how_to_go_on():
    manual = r.template_step(W, "B", 4, False, r.Policy("Manual"), False, None)
    assert r.APPROVE_RESTART_ANNOTATION in manual.message and "spec.operatorUpgrades" in manual.message
    default = r.template_step(W, "B", 4, False, r.Policy("Manual", from_spec=False), False, None)
    assert "chart value operatorUpgrades" in default.message, "a Manual the spec did not set names its source"
    other = r.template_step(W, "B", 4, False, r.Policy("Auto"), False, "shop/orders")
    assert "shop/orders" in other.message and "one cluster at a time" in other.message
