"""The pure parts of the e2e evidence (e2e/evidence.py): the operator's disruption Events against
what a test declares, its status history read from an audit log, and the audit policy that
records the operator's writes with their bodies but never a Secret's (tests/support/audit.py)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from e2e import evidence
from tests.support import audit

UTC = dt.timezone.utc


def event(reason: str, last: str, message: str = "m", first: str | None = None, **extra) -> dict:
    return {
        "metadata": {"name": f"c.{reason}", "namespace": "ns"},
        "involvedObject": {"kind": "MySQLCluster", "name": "c"},
        "reason": reason,
        "type": extra.get("type", "Normal"),
        "message": message,
        "firstTimestamp": first or last,
        "lastTimestamp": last,
        "count": extra.get("count", 1),
    }


# ------------------------------------------------------------------------------ disruptions
def test_only_the_disruption_reasons_count_oldest_first():
    found = evidence.disruptions(
        [
            event("Switchover", "2026-01-01T10:00:05Z", "c-0 -> c-2"),
            event("Bootstrap", "2026-01-01T10:00:00Z"),
            event("Failover", "2026-01-01T10:00:03Z", "c-0 unreachable", type="Warning"),
            event("ReseedFailed", "2026-01-01T10:00:09Z"),
            event("RestartStuck", "2026-01-01T10:00:07Z"),
            event("Demote", "2026-01-01T10:00:04Z"),
            event("Promote", "2026-01-01T10:00:06Z"),
        ]
    )
    assert [(d.reason, d.kind) for d in found] == [
        ("Failover", "Failover"),
        ("Switchover", "Switchover"),
        ("RestartStuck", None),  # listed, never failing
        ("ReseedFailed", "Reseed"),
    ]
    assert found[0].namespace == "ns" and found[0].involved == "MySQLCluster/c"
    assert found[0].line() == "2026-01-01T10:00:03Z ns MySQLCluster/c Warning Failover x1: c-0 unreachable"


def test_events_before_the_test_began_are_not_its_own():
    since = dt.datetime(2026, 1, 1, 10, 0, 5, 700_000, tzinfo=UTC)  # Events keep whole seconds
    found = evidence.disruptions(
        [
            event("Failover", "2026-01-01T10:00:04Z"),
            event("Failover", "2026-01-01T10:00:05Z"),  # the same second as the start
            event("Reseed", "2026-01-01T10:00:30Z", first="2026-01-01T09:00:00Z", count=3),  # seen again
        ],
        since,
    )
    assert [(d.reason, d.last) for d in found] == [
        ("Reseed", "2026-01-01T10:00:30Z"),
        ("Failover", "2026-01-01T10:00:05Z"),
    ]


def test_client_objects_are_read_like_their_dicts():
    from kubernetes import client

    e = client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="x", namespace="ns"),
        involved_object=client.V1ObjectReference(kind="MySQLCluster", name="c"),
        reason="FailoverForced",
        type="Warning",
        message="c-2 promoted on request",
        first_timestamp=None,
        last_timestamp=None,
        event_time=dt.datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC),
        count=None,
    )
    (d,) = evidence.disruptions([e])
    assert (d.kind, d.first, d.last, d.count) == (
        "Failover",
        "2026-01-01T10:00:00Z",
        "2026-01-01T10:00:00Z",
        1,
    )


def test_an_undeclared_kind_is_reported_a_declared_one_is_not():
    found = evidence.disruptions(
        [
            event("Failover", "2026-01-01T10:00:03Z"),
            event("Reseed", "2026-01-01T10:00:04Z"),
            event("RestartStuck", "2026-01-01T10:00:05Z"),
        ]
    )
    assert [d.reason for d in evidence.undeclared(found, {"Failover"})] == ["Reseed"]
    assert evidence.undeclared(found, {"Failover", "Reseed"}) == []
    assert [d.reason for d in evidence.undeclared(found, set())] == ["Failover", "Reseed"]
    text = evidence.report(found, {"Failover"})
    assert text.splitlines()[0] == "declared (@pytest.mark.causes): Failover"
    assert [line.startswith("UNDECLARED") for line in text.splitlines()[1:]] == [False, True, False]


def test_the_markers_args_are_kinds():
    assert evidence.declared_kinds([("Failover", "Reseed"), ("Switchover",)]) == {
        "Failover",
        "Reseed",
        "Switchover",
    }
    assert evidence.declared_kinds([]) == set()
    with pytest.raises(ValueError, match="Failovr"):
        evidence.declared_kinds([("Failovr",)])


# ------------------------------------------------------------------------------ audit log
OPERATOR = "system:serviceaccount:mysql-operator:mysql-operator"


def audit_entry(
    verb, resource, name, ns="ns", sub=None, body=None, response=None, user=OPERATOR, code=200, t=0
):
    ref = {"resource": resource, "namespace": ns, "name": name, "apiVersion": "v1"}
    if sub:
        ref["subresource"] = sub
    if resource == "mysqlclusters":
        ref["apiGroup"] = "mysql.operator.dev"
    e = {
        "kind": "Event",
        "level": "RequestResponse" if body is not None else "Metadata",
        "stage": "ResponseComplete",
        "verb": verb,
        "user": {"username": user, "groups": ["system:serviceaccounts"]},
        "objectRef": ref,
        "responseStatus": {"metadata": {}, "code": code},
        "stageTimestamp": f"2026-01-01T10:00:{t:02d}.000000Z",
    }
    if body is not None:
        e["requestObject"] = body
    if response is not None:
        e["responseObject"] = response
    return json.dumps(e, separators=(",", ":"))  # as the API server writes it


LOG = [
    audit_entry("get", "mysqlclusters", "c", t=1),
    audit_entry(
        "patch",
        "mysqlclusters",
        "c",
        sub="status",
        body={"status": {"phase": "Creating"}},
        response={"status": {"phase": "Creating", "readyInstances": 0}},
        t=2,
    ),
    audit_entry("patch", "mysqlclusters", "c", body={"metadata": {"annotations": {"x": None}}}, t=3),
    audit_entry(
        "patch", "mysqlclusters", "c", sub="status", body={"status": {"phase": "Ready"}}, ns="other", t=4
    ),
    audit_entry(
        "patch", "mysqlclusters", "c", sub="status", body={"status": {"phase": "Ready"}}, user="admin", t=5
    ),
    "{not json",
    audit_entry(
        "create",
        "events",
        "",
        body={"kind": "Event", "reason": "Failover", "message": "c-0 -> c-1"},
        response={"metadata": {"name": "c.17a"}},
        code=201,
        t=6,
    ),
    audit_entry(
        "patch",
        "mysqlclusters",
        "c",
        sub="status",
        body={"status": {"phase": "Ready", "currentPrimary": "c-1"}},
        response={"status": {"phase": "Ready", "currentPrimary": "c-1", "readyInstances": 3}},
        t=7,
    ),
    audit_entry("patch", "secrets", "c-credentials", t=8),
]


def test_the_operators_requests_on_a_namespace_and_its_status_history_in_order():
    events = list(evidence.audit_events(LOG, ["ns"]))
    assert [e["stageTimestamp"][17:19] for e in events] == ["01", "02", "03", "06", "07", "08"]
    history = evidence.status_history(events)
    assert [(h["time"][17:19], h["cluster"], h["patch"], h["code"]) for h in history] == [
        ("02", "c", {"phase": "Creating"}, 200),
        ("07", "c", {"phase": "Ready", "currentPrimary": "c-1"}, 200),
    ]
    assert history[1]["status"]["readyInstances"] == 3 and history[1]["user"] == OPERATOR
    lines = [evidence.request_line(e) for e in events]
    assert lines[0] == "2026-01-01T10:00:01.000000Z get mysqlclusters.mysql.operator.dev ns/c -> 200"
    assert lines[3] == "2026-01-01T10:00:06.000000Z create events ns/c.17a -> 201 reason=Failover"


def test_the_label_patches_of_the_operator_in_order():
    role = "mysql.operator.dev/role"
    log = [
        audit_entry("patch", "pods", "c-1", body={"metadata": {"labels": {role: "primary"}}}, t=1),
        audit_entry("patch", "pods", "c-1", body={"metadata": {"labels": {"other": "x"}}}, t=2),
        audit_entry("patch", "pods", "c-1", body={"metadata": {"labels": {role: None}}}, t=3),
        audit_entry(
            "patch", "pods", "c-0", body={"metadata": {"labels": {role: "replica"}}}, user="admin", t=4
        ),
        audit_entry("get", "pods", "c-0", t=5),
    ]
    got = evidence.label_history(evidence.audit_events(log, ["ns"]), role)
    assert [(w[17:19], pod, value) for w, pod, value in got] == [
        ("01", "c-1", "primary"),
        ("03", "c-1", None),
    ]


def test_another_namespaces_requests_are_not_read():
    assert [e["objectRef"]["namespace"] for e in evidence.audit_events(LOG, ["other"])] == ["other"]
    assert list(evidence.audit_events(LOG, [])) == []


def test_permissions_read_the_richer_entries_as_before(tmp_path):
    log = tmp_path / "audit.log"
    log.write_text("\n".join(LOG) + "\n")
    used, denied = audit.permissions([log])
    assert (
        used
        == {
            ("mysql.operator.dev", "mysqlclusters", "get"),
            ("mysql.operator.dev", "mysqlclusters", "patch"),
            ("mysql.operator.dev", "mysqlclusters/status", "patch"),
            ("", "events", "create"),
            ("", "secrets", "patch"),
        }
        and not denied
    )


# ------------------------------------------------------------------------------ the audit policy
def level(user: str, groups: list[str], verb: str, group: str, resource: str) -> str:
    """The level the API server's policy checker gives a request: the first rule that matches."""
    for rule in audit.POLICY["rules"]:
        if rule.get("users") and user not in rule["users"]:
            continue
        if rule.get("userGroups") and not set(groups) & set(rule["userGroups"]):
            continue
        if rule.get("verbs") and verb not in rule["verbs"]:
            continue
        if "resources" in rule and not any(
            r.get("group", "") == group and (not r.get("resources") or resource in r["resources"])
            for r in rule["resources"]
        ):
            continue
        return rule["level"]
    return "None"


SA_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:mysql-operator", "system:authenticated"]


@pytest.mark.parametrize(
    "verb,group,resource,expected",
    [
        ("patch", "mysql.operator.dev", "mysqlclusters/status", "RequestResponse"),
        ("create", "", "events", "RequestResponse"),
        ("patch", "mysql.operator.dev", "mysqlbackups/status", "RequestResponse"),
        ("patch", "apps", "statefulsets", "Request"),
        ("patch", "", "configmaps", "Request"),
        ("update", "", "pods", "Request"),
        ("get", "mysql.operator.dev", "mysqlclusters", "Metadata"),
        ("watch", "", "pods", "Metadata"),
        ("create", "", "secrets", "Metadata"),
        ("patch", "", "secrets", "Metadata"),
        ("get", "", "secrets", "Metadata"),
        ("create", "", "serviceaccounts/token", "Metadata"),
        ("update", "coordination.k8s.io", "leases", "Metadata"),
        ("create", "authorization.k8s.io", "subjectaccessreviews", "Metadata"),
    ],
)
def test_the_operators_writes_have_bodies_a_secrets_never(verb, group, resource, expected):
    assert level(OPERATOR, SA_GROUPS, verb, group, resource) == expected
    in_a_test_namespace = "system:serviceaccount:e2e-1a2b3c4d:mysql-operator"  # host_operator's
    assert level(in_a_test_namespace, SA_GROUPS, verb, group, resource) == expected


def test_others_are_not_recorded_with_bodies():
    controllers = ["system:serviceaccounts", "system:serviceaccounts:kube-system"]
    assert level(
        "system:serviceaccount:kube-system:statefulset-controller", controllers, "patch", "", "pods"
    ) == ("None")
    assert level("kubernetes-admin", ["kubeadm:cluster-admins"], "patch", "", "pods") == "None"
    assert level("system:node:n", ["system:nodes"], "patch", "", "pods") == "None"
    bodies = [rule for rule in audit.POLICY["rules"] if rule["level"] in ("Request", "RequestResponse")]
    assert len(bodies) == 2
    assert all(r["omitManagedFields"] and r["userGroups"] == ["system:serviceaccounts"] for r in bodies)


def test_a_measurement_past_what_it_usually_takes_is_taken_once_for_its_test():
    from e2e import helpers

    helpers.take_slow()  # (whatever an earlier test in this process left)
    helpers.record("failover (kill) to first accepted write", 2.0, usually_under=10.0)
    helpers.record("rows lost", 3, unit="count")
    helpers.record("failover (delete) to first accepted write", 20.2, usually_under=10.0)
    assert helpers.take_slow() == ["failover (delete) to first accepted write: 20.2s (usually under 10s)"]
    assert helpers.take_slow() == []
