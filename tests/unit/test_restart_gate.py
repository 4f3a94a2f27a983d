"""One cluster at a time: the restarts a new operator version needs wait for any other cluster
whose Pods are being restarted (rollout.RestartGate), and the Pod template's record on the
StatefulSet (rollout.template_hash, rollout.written_template)."""

from __future__ import annotations

from mysql_operator import manifests as m
from mysql_operator import rolling as r
from mysql_operator.api import parse
from mysql_operator.rollout import RestartGate, restarting_clusters, template_hash, written_template
from tests.support.specs import body

ROLLING = r.DeletePod("db-2", "outdated")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_turn_is_taken_by_one_cluster_and_freed_when_its_roll_is_done():
    clock = Clock()
    gate = RestartGate(clock)
    assert gate.take("ns/a") is None
    assert gate.take("ns/b") == "ns/a" and gate.other("ns/b") == "ns/a"
    gate.seen("ns/a", ROLLING)
    gate.seen("ns/a", None)  # a pass that did not look: nothing changes
    assert gate.other("ns/b") == "ns/a"
    gate.seen("ns/a", r.Done())
    assert gate.other("ns/b") is None and gate.take("ns/b") is None
    assert gate.other("ns/a") == "ns/b"


def test_a_turn_ends_once_the_last_restarted_pod_is_ready():
    gate = RestartGate(Clock())
    gate.seen("ns/a", ROLLING)
    gate.seen("ns/a", r.Done(), settled=False)  # nothing outdated, the old primary's Pod starting
    assert gate.other("ns/b") == "ns/a"
    gate.seen("ns/a", r.Done(), settled=True)
    assert gate.other("ns/b") is None
    gate.seen("ns/c", r.Done(), settled=False)  # a cluster not rolling, a Pod not Ready: no turn
    assert gate.other("ns/b") is None


def test_a_roll_the_user_started_holds_the_turn_too():
    gate = RestartGate(Clock())
    gate.seen("ns/user-edited", r.Wait("db-1 is not Ready"))
    assert gate.take("ns/upgraded") == "ns/user-edited"
    gate.seen("ns/user-edited", r.Done())
    assert gate.take("ns/upgraded") is None


def test_a_fresh_turn_is_not_ended_by_a_pass_that_still_sees_the_old_template():
    clock = Clock()
    gate = RestartGate(clock)
    assert gate.take("ns/a") is None
    gate.seen("ns/a", r.Done())  # its StatefulSet not yet observed with the new template
    assert gate.other("ns/b") == "ns/a"
    clock.now += RestartGate.STARTING_SECONDS  # a write that restarted nothing does not hold forever
    gate.seen("ns/a", r.Done())
    assert gate.other("ns/b") is None


def test_a_deleted_cluster_frees_its_turn():
    gate = RestartGate(Clock())
    gate.seen("ns/a", ROLLING)
    gate.forget("ns/a")
    assert gate.take("ns/b") is None


def test_a_pass_still_running_when_its_cluster_was_deleted_does_not_keep_the_turn():
    existing = {"ns/a", "ns/b"}
    gate = RestartGate(Clock(), alive=lambda key: key in existing)
    assert gate.take("ns/a") is None
    existing.discard("ns/a")
    gate.forget("ns/a")  # the delete handler
    gate.seen("ns/a", ROLLING)  # then the end of a pass that began before the deletion
    assert gate.other("ns/b") is None
    assert gate.take("ns/b") is None
    assert gate.other("ns/c") == "ns/b"  # a cluster that exists keeps its turn


def sts(name, replicas=3, updated=3, generation=2, observed=2, component="database", ns="ns", owner=...):
    """A StatefulSet as listed; `owner`: (kind, name, uid, controller) of its ownerReference, by
    default the MySQLCluster of its name (uid `uid-<name>`), None for none."""
    labels = {"app.kubernetes.io/component": component}
    meta = {"name": name, "namespace": ns, "generation": generation, "labels": labels}
    if owner is ...:
        owner = ("MySQLCluster", name, f"uid-{name}", True)
    if owner is not None:
        kind, owner_name, uid, controller = owner
        meta["ownerReferences"] = [
            {"apiVersion": "mysql.operator.dev/v1alpha1", "kind": kind, "name": owner_name, "uid": uid}
            | ({"controller": controller} if controller is not None else {})
        ]
    return {
        "metadata": meta,
        "spec": {"replicas": replicas},
        "status": {"observedGeneration": observed, "updatedReplicas": updated},
    }


def clusters_of(*keys):
    """uid -> namespace/name of existing clusters, the uids as `sts` makes them."""
    return {f"uid-{key.split('/')[1]}": key for key in keys}


def test_a_roll_under_way_is_read_from_the_statefulsets_not_only_remembered():
    """After an operator restart the gate has not seen a roll that an earlier process started: the
    StatefulSets show it (Pods not all on the template, or a template not observed yet)."""
    listed = [
        sts("settled"),
        sts("rolling", updated=1),
        sts("just-written", generation=3),
        sts("archiver", updated=0, component="binlog-archiver"),
        sts("scaled-to-zero", replicas=0, updated=0),
    ]
    existing = clusters_of("ns/settled", "ns/rolling", "ns/just-written", "ns/archiver", "ns/scaled-to-zero")
    assert restarting_clusters(listed, existing) == {"ns/rolling", "ns/just-written"}
    gate = RestartGate(Clock())
    assert gate.take("ns/b", {"ns/rolling"}) == "ns/rolling"
    assert gate.other("ns/rolling") is None, "refused, not taken"
    assert gate.take("ns/rolling", {"ns/rolling"}) is None, "its own roll does not hold itself"
    assert gate.take("ns/b", set()) == "ns/rolling", "taken: held by the gate as before"


def test_only_a_statefulset_an_existing_cluster_controls_holds_the_turn():
    """Anyone who may create a StatefulSet can label it like the operator's and leave it rolling:
    it counts only when its controller ownerReference names an existing MySQLCluster by uid, with
    that cluster's name, in its own namespace; and then under the cluster's name, not its own."""
    existing = clusters_of("ns/db", "other/victim")
    lookalikes = [
        sts("lookalike", updated=0, owner=None),  # no owner at all
        sts("forged-uid", updated=0, owner=("MySQLCluster", "db", "uid-made-up", True)),
        sts("not-controller", updated=0, owner=("MySQLCluster", "db", "uid-db", False)),
        sts("no-controller-field", updated=0, owner=("MySQLCluster", "db", "uid-db", None)),
        sts("other-kind", updated=0, owner=("Deployment", "db", "uid-db", True)),
        sts("renamed", updated=0, owner=("MySQLCluster", "someone", "uid-db", True)),
        # another namespace's cluster, by its real uid (the garbage collector ignores such a reference)
        sts("cross-namespace", updated=0, ns="tenant", owner=("MySQLCluster", "victim", "uid-victim", True)),
        sts("gone", updated=0),  # its cluster was deleted: the uid is no longer known
    ]
    assert restarting_clusters(lookalikes, existing) == set()
    assert r.controlling_cluster(lookalikes[0], existing) is None
    real = sts("db-sts", updated=0, owner=("MySQLCluster", "db", "uid-db", True))
    assert r.controlling_cluster(real, existing) == "ns/db"
    assert restarting_clusters([*lookalikes, real], existing) == {"ns/db"}
    assert restarting_clusters([real], {}) == set(), "no cluster known: nothing holds a turn"


def cluster(**spec):
    return parse(body({"flavor": "mysql", "instances": 3, **spec}, "db", generation=3))


def test_the_template_hash_follows_the_pod_template_only():
    base = m.statefulset(cluster())
    assert template_hash(base) == template_hash(m.statefulset(cluster()))
    assert template_hash(base) != template_hash(
        m.statefulset(cluster(resources={"limits": {"memory": "2Gi"}}))
    )
    assert template_hash(base) == template_hash(m.statefulset(cluster(deletionPolicy="Delete")))
    assert template_hash(base) == template_hash(m.statefulset(cluster(operatorUpgrades="Manual")))


def test_the_record_on_the_statefulset_or_the_status_for_an_older_operators():
    notes = {
        r.APPLIED_TEMPLATE_ANNOTATION: "A",
        r.WANTED_TEMPLATE_ANNOTATION: "B",
        r.TEMPLATE_GENERATION_ANNOTATION: "7",
    }
    assert written_template({"metadata": {"annotations": notes}}, 9) == r.Written("A", "B", 7)
    assert written_template({"metadata": {}}, 9) == r.Written(None, None, 9)


def test_a_staged_restart_is_a_condition_while_staged_and_leaves_the_phase_alone():
    from mysql_operator.status import build_status
    from mysql_operator.summary import Summary

    def status(pending, previous=None):
        s = Summary(
            instances=1,
            generation=3,
            ready=1,
            primary="db-0",
            primary_serving=True,
            primary_in_service=True,
            decision="Healthy",
            restart_pending=pending,
        )
        return build_status(s, previous or {}, "2026-11-27T10:00:00Z")

    def cond(st):
        return next((c for c in st["conditions"] if c["type"] == "RestartPending"), None)

    staged = r.template_step(r.Written("A", "A", 3), "B", 3, False, r.Policy("Manual"), False, None)
    pending = status(staged)
    assert (cond(pending)["status"], cond(pending)["reason"]) == ("True", "WaitingForApproval")
    assert r.APPROVE_RESTART_ANNOTATION in cond(pending)["message"]
    assert pending["phase"] == "Ready", "the databases serve: a staged restart is reported, not the phase"
    assert cond(status(None, pending)) is None, "gone once written"
