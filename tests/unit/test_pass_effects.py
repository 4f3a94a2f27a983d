"""The order of a cluster pass's Kubernetes writes, against a recording KubeOps (k8s/ops.py): what
someone reading the cluster sees between two of them must never be wrong - the Event that says
why before the status that says what, never two Pods labelled primary, a forced failover
recorded before its request is removed."""

from __future__ import annotations

import datetime as dt
from typing import Any

from mysql_operator import certificates, clock, executor, tls
from mysql_operator import manifests as m
from mysql_operator import pods as podview
from mysql_operator import switchover as sw
from mysql_operator import tls_upkeep
from mysql_operator import topology as t
from mysql_operator.api import parse
from mysql_operator.certificates import TLSState
from mysql_operator.engine_hooks import force_failover_done
from mysql_operator.pass_state import Logins, Observed, Replicated
from mysql_operator.reconcile import Reconciler
from mysql_operator.members import ClusterState, Outcome, Step
from mysql_operator.summary import Summary
from tests.support.fakes import RecordingKube, RecordingReads
from tests.support.specs import body

P, R = m.ROLE_PRIMARY, m.ROLE_REPLICA
BODY = {
    "apiVersion": "mysql.operator.dev/v1alpha1",
    "kind": "MySQLCluster",
    "metadata": {"namespace": "ns", "name": "db", "uid": "u-1", "annotations": {}},
}


def reconciler(kube: RecordingKube) -> Reconciler:
    return Reconciler(None, job_image="operator:test", kube=kube)


def pod(name: str, role: str | None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {m.ROLE_LABEL: role} if role else {}},
        "status": {
            "phase": "Running",
            "podIP": "10.1.0.1",
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def test_the_event_that_says_why_is_posted_before_the_status_and_an_unchanged_status_is_not_written():
    kube = RecordingKube()
    r = reconciler(kube)
    summary = Summary(
        instances=2, generation=1, ready=2, primary="db-0", primary_serving=True, decision="Healthy"
    )
    result = r._publish(BODY, {}, summary, [("Normal", "Promoted", "db-0 serves writes")], t.Healthy("db-0"))
    assert [c[0] for c in kube.calls] == ["events", "status"]
    assert kube.calls[1][1]["currentPrimary"] == "db-0"
    kube.calls.clear()
    r._publish(BODY, result.status, summary, [], t.Healthy("db-0"))
    assert kube.calls == []


def test_what_the_backup_controller_reports_goes_out_with_the_next_pass_and_only_once():
    """The cluster's status has one writer, its pass: lastBackup and the schedule's runs are
    reported to it and published with its own fields."""
    kube = RecordingKube()
    r = reconciler(kube)
    summary = Summary(
        instances=1, generation=1, ready=1, primary="db-0", primary_serving=True, decision="Healthy"
    )
    first = r._publish(BODY, {}, summary, [], t.Healthy("db-0"))
    r.report("ns", "db", {"lastBackup": {"name": "db-1"}, "nextScheduledBackup": "2026-11-30T00:00:00Z"})
    assert kube.calls[-1][0] == "status" and "lastBackup" not in kube.calls[-1][1]
    second = r._publish(BODY, first.status, summary, [], t.Healthy("db-0"))
    assert kube.calls[-1][1]["lastBackup"] == {"name": "db-1"}
    assert kube.calls[-1][1]["nextScheduledBackup"] == "2026-11-30T00:00:00Z"
    calls = len(kube.calls)
    third = r._publish(BODY, second.status, summary, [], t.Healthy("db-0"))
    assert len(kube.calls) == calls  # nothing changed: nothing written
    r.report("ns", "db", {"nextScheduledBackup": None})  # the schedule was removed
    r._publish(BODY, third.status, summary, [], t.Healthy("db-0"))
    assert kube.calls[-1][1]["nextScheduledBackup"] is None


def labels_for(pods: list[dict[str, Any]], roles: dict[str, str | None]) -> podview.LabelMoves:
    views = podview.pod_views("db", pods)
    return podview.label_plan({p.name: p.role for p in views.values()}, roles)


def test_a_switchover_takes_labels_away_old_primary_first_says_why_writes_the_status_then_gives_labels():
    """No Service routes to a Pod in a role its status does not give it: a label is taken away
    before the status that says so, given after it."""
    kube = RecordingKube()
    summary = Summary(
        instances=3, generation=1, ready=3, primary="db-1", primary_serving=True, decision="Switchover"
    )
    labels = labels_for(
        [pod("db-0", P), pod("db-1", R), pod("db-2", R)], {"db-0": R, "db-1": P, "db-2": None}
    )
    event = ("Normal", "Switchover", "db-1 serves writes")
    reconciler(kube)._publish(
        BODY, {}, summary, [event], t.Switchover("db-0", "db-1", ("db-0", "db-2")), labels=labels
    )
    assert [c[:3] if c[0] == "label" else c[0] for c in kube.calls] == [
        ("label", "db-0", None),
        ("label", "db-1", None),
        ("label", "db-2", None),
        "events",
        "status",
        ("label", "db-0", R),
        ("label", "db-1", P),
    ]


def test_a_new_primary_whose_pod_is_gone_gets_no_label_and_nobody_gets_it_instead():
    kube = RecordingKube(gone={"db-1"})
    summary = Summary(instances=2, generation=1, ready=1, primary="db-1", decision="Failover")
    labels = labels_for(
        [pod("db-0", P), pod("db-1", R), pod("db-2", R)], {"db-0": None, "db-1": P, "db-2": R}
    )
    reconciler(kube)._publish(BODY, {}, summary, [], t.Failover("db-0", "db-1", (), ()), labels=labels)
    assert [c for c in kube.calls if c[0] == "label"] == [
        ("label", "db-0", None),
        ("label", "db-1", None),
        ("label", "db-1", P),
    ]
    assert [c[0] for c in kube.calls].count("status") == 1, "the status is written all the same"


def forced_body() -> dict[str, Any]:
    meta = {**BODY["metadata"], "annotations": {t.FORCE_FAILOVER_ANNOTATION: "alice: db-0 is gone for good"}}
    return {**BODY, "metadata": meta}


def test_a_forced_failover_is_recorded_event_then_status_before_its_request_is_removed():
    kube = RecordingKube()
    d = t.Failover("db-0", "db-1", fence=(), replicas=(), forced=True, reason="2 of 3 answer")
    force_failover_done(kube, forced_body(), d, [Step("db-1", "promote")], ["s3cret"])
    assert [c[0] for c in kube.calls] == ["events", "status", "unannotate"]
    record = kube.calls[1][1]["forcedFailover"]
    assert (record["from"], record["to"], record["requestedBy"]) == (
        "db-0",
        "db-1",
        "alice: db-0 is gone for good",
    )


def test_a_forced_failover_that_failed_or_still_waits_keeps_its_request():
    kube = RecordingKube()
    d = t.Failover("db-0", "db-1", fence=(), replicas=(), forced=True)
    force_failover_done(kube, forced_body(), d, [Step("db-1", "promote", "refused", ok=False)], [])
    force_failover_done(kube, forced_body(), t.WaitForDelay(2.0), [], [])
    assert kube.calls == []


def test_a_force_request_no_failover_needed_is_removed_and_said_so():
    kube = RecordingKube()
    force_failover_done(kube, forced_body(), t.Healthy("db-0"), [], [])
    assert kube.calls == [("events", ["ForceFailoverUnused"]), ("unannotate", t.FORCE_FAILOVER_ANNOTATION)]


def test_while_a_rotation_is_pending_the_pass_logs_in_with_what_the_servers_have_and_hides_both():
    logins = Logins(
        {"operator-password": "new-op", "replication-password": "same"},
        None,
        {"operator-password": "old-op", "replication-password": "same"},
        "v1",
        ("operator-password",),
    )
    assert logins.current == {"operator-password": "old-op", "replication-password": "same"}
    assert {"new-op", "old-op", "same"} <= set(logins.secrets)


def test_a_renewed_certificate_is_announced_then_every_pod_is_annotated_for_the_kubelet():
    kube = RecordingKube(gone=["db-1"])
    until = dt.datetime(2027, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    state = TLSState("CA", until, "expires within a third of its validity")
    executor.carry_out(kube, BODY, tls_upkeep.renewal_writes(state, [pod("db-0", P), pod("db-1", R)]))
    assert kube.calls == [
        ("events", ["CertificateRenewed"]),
        ("annotate", "db-0", tls_upkeep.TLS_ANNOTATION),
        ("annotate", "db-1", tls_upkeep.TLS_ANNOTATION),  # gone meanwhile: the others still are
    ]


def test_a_first_spec_refused_touches_nothing_and_is_said_once():
    """No spec that parsed before (status.lastValidSpec): phase Invalid, nothing applied, no
    server touched, nothing recorded; the Warning goes out before the status."""
    kube = RecordingKube()
    r = reconciler(kube)
    refused = {**BODY, "metadata": {**BODY["metadata"], "generation": 1}}
    refused["spec"] = {"instances": 1, "config": {"myCnf": "[mysqld]\n= 50\n"}}
    result = r._reconcile(refused, r._entry("ns", "db"), None)
    assert result.phase == "Invalid"
    assert [c[0] for c in kube.calls] == ["events", "status"]
    assert kube.calls[0][1] == ["InvalidSpec"]
    assert "lastValidSpec" not in kube.calls[1][1] and kube.calls[1][1]["observedGeneration"] == 1


def switchover_pass(annotation: str, previous: dict[str, Any] | None = None) -> RecordingKube:
    """A pass that reaches no server (none runs yet) of a 3-instance cluster asked to switch over."""
    kube = RecordingKube()
    r = reconciler(kube)
    meta = {**BODY["metadata"], "generation": 1, "annotations": {sw.ANNOTATION: annotation}}
    body = {**BODY, "metadata": meta, "spec": {"instances": 3}}
    seen = Observed(body, parse(body), previous or {}, Logins({}), [], None)
    r._without_servers(seen, r._entry("ns", "db"), False)
    return kube


def test_a_refused_switchover_request_is_said_then_recorded_then_its_annotation_removed():
    kube = switchover_pass("7; alice: why not")
    assert [c[0] for c in kube.calls] == ["events", "status", "unannotate"]
    assert kube.calls[0][1] == ["SwitchoverRefused"] and kube.calls[2][1] == sw.ANNOTATION
    record = kube.calls[1][1]["switchover"]
    assert (record["to"], record["requestedBy"], record["result"]) == ("db-7", "alice: why not", "Refused")
    assert "not among the 3 instances" in record["message"]


def test_a_waiting_switchover_request_is_in_the_status_and_keeps_its_annotation():
    kube = switchover_pass("db-1; alice")
    assert [c[0] for c in kube.calls] == ["status"]
    record = kube.calls[0][1]["switchover"]
    assert (record["result"], record["message"]) == ("Pending", "waits for db-1: no server observed yet")
    # the next pass (or the next operator) finds it waiting: unchanged, nothing written
    assert switchover_pass("db-1; alice", {**kube.calls[0][1]}).calls == []


def judged(decision: t.Decision, steps: list[Step], after: str, desired: str | None = "db-1", spec=None):
    """Reconciler._judge after a replication pass that began with db-0 the primary."""
    annotations = {} if spec else {sw.ANNOTATION: "db-1"}
    meta = {**BODY["metadata"], "generation": 1, "annotations": annotations}
    body = {**BODY, "metadata": meta, "spec": {"instances": 3, **(spec or {})}}
    seen = Observed(body, parse(body), {"currentPrimary": "db-0"}, Logins({}), [], None)
    observed = [t.InstanceState(f"db-{n}", n, reachable=True, read_only=n != 1) for n in range(3)]
    outcome = Outcome(decision, steps, observed)
    run = Replicated(None, t.Settings(instances=3), [], False, ClusterState(after), outcome, None, desired)  # type: ignore[arg-type]
    return Reconciler._judge(seen, run)


def test_a_requested_switchover_is_done_once_its_promotion_went_through():
    d = t.Switchover("db-0", "db-1", ("db-0", "db-2"))
    assert judged(d, [Step("db-1", "promote")], "db-1") == sw.Verdict(sw.DONE, "db-1 is the primary")
    failed = judged(d, [Step("db-1", "promote", "refused", ok=False)], "db-1")
    assert failed == sw.Verdict(sw.PENDING, "waits: switching over to db-1")
    # spec.primary: 1 (deprecated) is the same request
    assert judged(d, [], "db-1", spec={"primary": 1}).result == sw.DONE


def test_a_requested_switchover_waits_for_the_rolling_update_that_moves_the_primary_elsewhere():
    v = judged(t.Healthy("db-0"), [], "db-0", desired="db-2")
    assert v.result == sw.PENDING and "rolling update" in v.message


class ClosingEngine:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_a_cluster_created_again_under_its_name_starts_with_nothing_its_predecessor_kept():
    """The in-memory state between passes (the engine with its recorded primary, the lock) is
    the object's, not the name's: a cluster deleted and created again before the deletion was
    seen gets a new entry, and the old one's engine is closed."""
    r = reconciler(RecordingKube())
    old = r._entry("ns", "db", "uid-old")
    old.engine = ClosingEngine()  # type: ignore[assignment]
    old.routed_to = "db-2"
    assert r._entry("ns", "db", "uid-old") is old
    assert r._entry("ns", "db") is old  # callers that know only the name get the current one

    new = r._entry("ns", "db", "uid-new")
    assert new is not old and new.uid == "uid-new" and new.routed_to is None
    assert new.lock is not old.lock
    assert old.engine.closed  # type: ignore[union-attr]
    assert r._entry("ns", "db", "uid-new") is new


def test_a_new_clusters_first_pass_reads_first_then_writes_everything_through_kubeops():
    """No API client at all (`Reconciler(None, ...)`): every read goes through the pass's reads
    and every write through KubeOps, or the pass fails here. The Pods and the StatefulSet (the
    store's, and the API server's for the apply) are read before anything is written; the one
    read after is the credentials Secret's version for the record of what the servers have,
    answered from what its creation returned. The Secrets exist before the StatefulSet that
    mounts them, and the status comes last."""
    b = body({"instances": 3}, name="db", uid="u-1", generation=1)
    kube = RecordingKube()
    r = Reconciler(None, job_image="operator:test", kube=kube, reads=RecordingReads(kube, clusters=[b]))
    result = r._reconcile(b, r._entry("ns", "db", "u-1"), True)
    assert result.phase == "Pending"
    calls = [c[:3] for c in kube.calls]
    first_write = next(i for i, c in enumerate(calls) if c[0] != "read")
    assert calls[:first_write] == [
        ("read", "pods"),
        ("read", "statefulset", "db"),
        ("read", "live statefulset", "db"),
    ]
    assert [c for c in calls[first_write:] if c[0] == "read"] == [("read", "secret", "db-credentials")]
    writes = [c for c in calls if c[0] != "read"]
    assert writes[:5] == [
        ("create secret", "db-credentials"),
        ("write secret", "db-credentials-applied"),
        ("create secret", "db-ca"),
        ("create secret", "db-tls"),
        ("create secret", "db-ca-bundle"),
    ]
    applied = [c[2] for c in writes if c[0] == "apply"]
    assert applied.index("db-config") < applied.index("db") and {"db-rw", "db-ro", "db-headless"} <= set(
        applied
    )
    assert writes[-1][0] == "status" and [c[0] for c in writes].count("status") == 1
    assert kube.owners["db-tls"] == ("u-1",)  # deleted with the cluster


def test_a_new_cluster_whose_certificate_secrets_exist_reads_and_keeps_them_at_its_next_pass():
    """Secrets of an earlier object of the cluster's name (not yet collected) are never
    overwritten: the first pass creates nothing over them, the next reads them and verifies the
    servers with the CA they hold."""
    b = body({"instances": 1}, name="db", uid="u-1", generation=1)
    c = parse(b)
    earlier = RecordingKube()
    earlier_owner = {"apiVersion": "v1", "kind": "MySQLCluster", "metadata": {"name": "db", "uid": "u-0"}}
    state, writes = certificates.plan_secrets(c, earlier_owner, clock.now(), None)
    assert certificates.write_secrets(earlier, writes)
    kube = RecordingKube(secrets=earlier.secrets)
    r = Reconciler(None, job_image="operator:test", kube=kube, reads=RecordingReads(kube, clusters=[b]))
    entry = r._entry("ns", "db", "u-1")
    r._reconcile(b, entry, True)
    assert ("create secret", "db-ca") in [c[:2] for c in kube.calls] and entry.tls.state is None
    assert kube.secrets == {**earlier.secrets, **{n: kube.secrets[n] for n in kube.secrets if "cred" in n}}
    kube.calls.clear()
    r._reconcile(b, entry, None)
    reads = [c[2] for c in kube.calls if c[:2] == ("read", "secret")]
    assert {"db-ca", "db-tls", "db-ca-bundle"} <= set(reads)
    assert not [c for c in kube.calls if c[0] in ("create secret", "secret keys") and "cred" not in c[1]]
    assert entry.tls.state is not None and entry.tls.state.ca_pem == state.ca_pem


def test_at_an_operator_restart_a_ca_about_to_be_replaced_still_verifies_the_servers_it_signed():
    """A CA too old to sign a full server validity is replaced by the pass's plan, but the servers
    serve the certificate it signed until they reload: the restarted operator's first pass
    verifies them with it (TLSUpkeep.observe), and only then writes the new CA."""
    b = body({"instances": 1}, name="db", uid="u-1", generation=1, status={"phase": "Running"})
    c = parse(b)
    owner = {"apiVersion": "v1", "kind": "MySQLCluster", "metadata": {"name": "db", "uid": "u-1"}}
    old_start = clock.now() - tls.CA_VALIDITY + dt.timedelta(days=30)  # 30 days left: not enough
    _, writes = certificates.plan_secrets(c, owner, old_start, None)
    kube = RecordingKube()
    assert certificates.write_secrets(kube, writes)
    ca_then = kube.secrets["db-ca"]["ca.crt"]
    assert not tls.ca_usable(tls.KeyPair(ca_then, kube.secrets["db-ca"]["ca.key"]), clock.now())
    upkeep = tls_upkeep.TLSUpkeep()
    seen = upkeep.observe(RecordingReads(kube), c, b, 60.0, 0.0)
    assert upkeep.state is not None and upkeep.state.ca_pem == ca_then  # what verifies the servers now
    todo = upkeep.plan(c, b, seen, [])
    assert todo is not None and todo.renewal and todo.state.issued == "the cluster's CA was replaced"
    upkeep.settle(c, todo, executor.carry_out(kube, b, [todo.writes], keep_going=True), 0.0)
    assert kube.secrets["db-ca"]["ca.crt"] == upkeep.state.ca_pem != ca_then
