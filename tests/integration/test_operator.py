"""The operator (`mysql-operator run`, a real process running kopf) against the real kube-apiserver,
authenticated as a ServiceAccount bound to exactly `mysql_operator.k8s.rbac.OPERATOR_RULES`: a
permission the operator uses but does not declare fails these tests (403 in its log, or objects
that never appear).

There is no node here: Pods are created by the StatefulSet controller but never run, so the
status must honestly say 0 ready and Progressing; replication is proven in e2e/.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Callable

import pytest
from kubernetes import client

from mysql_operator import manifests as m
from mysql_operator import rolling
from mysql_operator.manifests.common import CONFIG_HASH_ANNOTATION as CONFIG_HASH
from mysql_operator.api import GROUP, VERSION, parse
from tests.support import host_operator
from tests.support.controlplane import stop_group
from tests.support.crds import apply_crds, cluster_crd_before_issue_45, project_crds
from tests.support.operator_account import operator_kubeconfig
from tests.support.ports import free_port
from tests.support.specs import CHANGES, FULL, RECONCILE_INPUTS, changed_spec, is_immutable
from tests.support.wait import wait_for

pytestmark = pytest.mark.controlplane

REPO = Path(__file__).resolve().parents[2]
PLURAL = "mysqlclusters"
USER_PASSWORDS = {
    m.ROOT_PASSWORD_KEY: "user-root-Zq8",
    m.OPERATOR_PASSWORD_KEY: "user-op-Xk2",
    m.REPLICATION_PASSWORD_KEY: "user-repl-Wv5",
    m.APP_PASSWORD_KEY: "user-app-Tt7",
}


@pytest.fixture(scope="module")
def crds(control_plane):
    ext = client.ApiextensionsV1Api(control_plane.api_client())
    apply_crds(control_plane.api_client(), project_crds())
    objs = client.CustomObjectsApi(control_plane.api_client())
    wait_for(
        lambda: objs.list_cluster_custom_object(GROUP, VERSION, PLURAL) is not None,
        30,
        "mysqlclusters served",
    )
    return ext


class Operator:
    def __init__(self, start: Callable[[], subprocess.Popen], log_path: Path, liveness: str, namespace: str):
        self.start, self.log_path, self.liveness, self.namespace = start, log_path, liveness, namespace
        self.proc = start()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def live(self) -> bool:
        assert self.proc.poll() is None, f"operator exited {self.proc.returncode}:\n{self.log()[-4000:]}"
        with urllib.request.urlopen(self.liveness, timeout=2) as r:
            return r.status == 200

    def restart(self) -> None:
        """A new operator process (nothing kept in memory), as after a crash or a rollout."""
        stop_group(self.proc, 20)
        self.proc = self.start()
        wait_for(self.live, 60, "the restarted operator's liveness endpoint")


@pytest.fixture(scope="module")
def operator(control_plane, crds, tmp_path_factory):
    """`mysql-operator run --namespace NS` as ServiceAccount NS/mysql-operator with a Role made of
    OPERATOR_RULES (what the chart grants for a namespaced install)."""
    api = control_plane.api_client()
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    ns = f"op-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": ns}})
    kubeconfig = operator_kubeconfig(control_plane, ns)
    port = free_port()
    log_path = tmp_path_factory.mktemp("operator") / "operator.log"
    liveness = f"http://127.0.0.1:{port}/healthz"
    options = ("--liveness", liveness, "--log-format", "json", "--loop-seconds", "2", "--resync-seconds", "5")
    op = Operator(lambda: host_operator.start(ns, kubeconfig, log_path, *options), log_path, liveness, ns)
    wait_for(op.live, 60, "the operator's liveness endpoint")
    yield op
    stop_group(op.proc, 20)
    core.delete_namespace(ns)
    rbac.delete_cluster_role_binding(f"mysql-operator-{ns}")
    rbac.delete_cluster_role(f"mysql-operator-{ns}")


@pytest.fixture
def ns(operator, control_plane):
    """The operator's namespace; clusters made by a test are deleted after it."""
    yield operator.namespace
    print(f"\n----- operator log (tail) -----\n{operator.log()[-6000:]}", file=sys.stderr)
    objs = client.CustomObjectsApi(control_plane.api_client())
    for c in objs.list_namespaced_custom_object(GROUP, VERSION, operator.namespace, PLURAL)["items"]:
        if c["metadata"].get("deletionTimestamp"):
            continue  # an earlier test's, its finalizer still running
        try:
            objs.delete_namespaced_custom_object(
                GROUP, VERSION, operator.namespace, PLURAL, c["metadata"]["name"]
            )
        except client.ApiException as e:
            if e.status != 404:  # gone between the list and the delete
                raise


def _body(name: str, spec: dict) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLCluster",
        "metadata": {"name": name},
        "spec": copy.deepcopy(spec),
    }


def _get(objs, ns, name) -> dict:
    return objs.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)


OWNED = 11  # credentials and the applied record, 3 TLS Secrets, ConfigMap, 3 Services, StatefulSet, PDB


def _owned_objects(api, ns: str, cluster: str) -> dict[str, dict]:
    """kind/name -> live object, for every kind the operator builds."""
    core, apps, policy = client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)
    sel = f"app.kubernetes.io/instance={cluster}"
    out = {}
    for kind, items in (
        ("Secret", core.list_namespaced_secret(ns, label_selector=sel).items),
        ("ConfigMap", core.list_namespaced_config_map(ns, label_selector=sel).items),
        ("Service", core.list_namespaced_service(ns, label_selector=sel).items),
        ("StatefulSet", apps.list_namespaced_stateful_set(ns, label_selector=sel).items),
        ("PodDisruptionBudget", policy.list_namespaced_pod_disruption_budget(ns, label_selector=sel).items),
    ):
        for o in items:
            out[f"{kind}/{o.metadata.name}"] = api.sanitize_for_serialization(o)
    return out


def _contains(live, want, path="") -> str | None:
    """None if every field of `want` is in `live` with the same value; else the first difference."""
    if isinstance(want, dict):
        if not isinstance(live, dict):
            return f"{path}: {live!r} is not an object"
        for k, v in want.items():
            diff = _contains(live.get(k), v, f"{path}.{k}")
            if diff:
                return diff
        return None
    if isinstance(want, list):
        if not isinstance(live, list) or len(live) != len(want):
            return f"{path}: {live!r} != {want!r}"
        for n, (a, b) in enumerate(zip(live, want)):
            diff = _contains(a, b, f"{path}[{n}]")
            if diff:
                return diff
        return None
    return None if live == want else f"{path}: {live!r} != {want!r}"


def _matches_built(api, ns, body: dict) -> str | None:
    """None when every object build_all makes for `body` is live as built (apart from the Secret,
    which is the user's here, and the StatefulSet's replicas which the reconcile decides)."""
    c = parse({**body, "metadata": {**body["metadata"], "namespace": ns}})
    live = _owned_objects(api, ns, c.name)
    for obj in m.build_all(c, lambda key: "x"):
        if obj["kind"] == "Secret":
            continue
        key = f"{obj['kind']}/{obj['metadata']['name']}"
        if key not in live:
            return f"{key} missing"
        want = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        diff = _contains(live[key], want, key)
        if diff:
            return diff
    return None


def _condition(status: dict, ctype: str) -> dict:
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), {})


def _events(api, ns: str, name: str) -> list:
    evs = client.CoreV1Api(api).list_namespaced_event(ns, field_selector=f"involvedObject.name={name}")
    return evs.items


def _user_secret(core, ns: str, name: str, keys=USER_PASSWORDS) -> None:
    core.create_namespaced_secret(
        ns, {"metadata": {"name": name}, "type": "Opaque", "stringData": dict(keys)}
    )


# --------------------------------------------------------------------------------------- tests


def test_a_cluster_yields_owned_objects_and_an_honest_status(control_plane, operator, ns):
    api = control_plane.api_client()
    objs, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    spec = {
        "flavor": "mariadb",
        "instances": 3,
        "database": {"name": "shop", "user": "shopper"},
        "storage": {"size": "1Gi"},
    }
    created = objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body("shop", spec))
    uid = created["metadata"]["uid"]

    expected = {
        "Secret/shop-credentials",
        "Secret/shop-credentials-applied",
        "ConfigMap/shop-config",
        "Service/shop-headless",
        "Service/shop-rw",
        "Service/shop-ro",
        "StatefulSet/shop",
        "PodDisruptionBudget/shop",
        "Secret/shop-ca",
        "Secret/shop-tls",
        "Secret/shop-ca-bundle",
    }  # TLS: mysql_operator/certificates.py
    live = wait_for(
        lambda: (o := _owned_objects(api, ns, "shop")) and expected <= set(o) and o, 60, "every owned object"
    )
    for key in expected - {"Secret/shop-credentials"}:
        refs = live[key]["metadata"].get("ownerReferences") or []
        assert [(r["uid"], r["controller"]) for r in refs] == [(uid, True)], key
    # deletionPolicy Retain (the default): the passwords outlive the cluster with its volumes
    assert not live["Secret/shop-credentials"]["metadata"].get("ownerReferences")
    assert _matches_built(api, ns, created) is None
    assert live["StatefulSet/shop"]["spec"]["replicas"] == 3

    secret = core.read_namespaced_secret("shop-credentials", ns)
    passwords = {k: base64.b64decode(v).decode() for k, v in secret.data.items()}
    assert set(passwords) == {
        m.ROOT_PASSWORD_KEY,
        m.OPERATOR_PASSWORD_KEY,
        m.REPLICATION_PASSWORD_KEY,
        m.APP_PASSWORD_KEY,
        m.BACKUP_PASSWORD_KEY,
        m.SQL_PASSWORD_KEY,
        m.MONITOR_PASSWORD_KEY,
        m.BINLOG_PASSWORD_KEY,
    }
    assert len(set(passwords.values())) == 8 and all(len(p) >= 24 for p in passwords.values())
    # the operator's record of the passwords the servers have: the Secret's, at its version
    record = core.read_namespaced_secret("shop-credentials-applied", ns)
    assert record.data == secret.data
    assert (
        record.metadata.annotations["mysql.operator.dev/applied-from-version"]
        == secret.metadata.resource_version
    )

    def status_published():
        st = _get(objs, ns, "shop").get("status") or {}
        return st if st.get("observedGeneration") == created["metadata"]["generation"] else None

    st = wait_for(status_published, 60, "status with observedGeneration")
    assert st["phase"] == "Pending"
    assert st["readyInstances"] == 0
    assert "currentPrimary" not in st
    assert _condition(st, "Ready")["status"] == "False"
    assert _condition(st, "Available")["status"] == "False"
    assert (_condition(st, "Progressing")["status"], _condition(st, "Progressing")["reason"]) == (
        "True",
        "WaitingForInstances",
    )
    assert _condition(st, "Degraded")["status"] == "False"
    assert [(i["name"], i["ready"]) for i in st["instances"]] == [
        ("shop-0", False),
        ("shop-1", False),
        ("shop-2", False),
    ]

    # later reconciles (here: the resync that undoes a hand edit) never change stored passwords
    core.patch_namespaced_config_map("shop-config", ns, {"data": {"my.cnf": "# by hand\n"}})
    wait_for(lambda: _matches_built(api, ns, created) is None, 60, "a later reconcile")
    again = core.read_namespaced_secret("shop-credentials", ns)
    assert again.data == secret.data

    # secrets never in status, Events or the operator's log
    text = (
        json.dumps(_get(objs, ns, "shop").get("status"))
        + " ".join((e.message or "") for e in _events(api, ns, "shop"))
        + operator.log()
    )
    for p in passwords.values():
        assert p not in text


def test_every_reconcilable_field_is_applied_to_the_objects(control_plane, operator, ns):
    """The field walk (tests/unit/test_api_fieldwalk.py) against the running operator: each
    mutable field that a built object carries, changed on the live CR, reaches the live objects."""
    api = control_plane.api_client()
    objs, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    _user_secret(core, ns, FULL["credentials"]["secretName"])
    body = objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body("walk", FULL))
    wait_for(lambda: _matches_built(api, ns, body) is None, 60, "objects for the FULL spec")

    paths = sorted(
        p for p in CHANGES if CHANGES[p][0] == "full" and not is_immutable(p) and p not in RECONCILE_INPUTS
    )
    assert "instances" in paths and "config.myCnf" in paths and "service.type" in paths
    applied = []
    for path in paths:
        _, new = changed_spec(path)

        def replace():  # the operator writes status/annotations meanwhile: retry on conflict
            live = _get(objs, ns, "walk")
            live["spec"] = new
            return objs.replace_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "walk", live)

        updated = wait_for(replace, 30, f"spec.{path} changed")
        wait_for(lambda: _matches_built(api, ns, updated) is None, 60, f"spec.{path} applied")
        if path == "instances":
            sts = client.AppsV1Api(api).read_namespaced_stateful_set("walk", ns)
            assert sts.spec.replicas == new["instances"]
        applied.append(path)
    print(f"\n{len(applied)} reconcilable fields applied: {', '.join(applied)}")
    assert len(applied) >= 15


def test_hand_made_drift_is_corrected(control_plane, operator, ns):
    api = control_plane.api_client()
    objs, core, apps = (client.CustomObjectsApi(api), client.CoreV1Api(api), client.AppsV1Api(api))
    body = objs.create_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, _body("drift", {"flavor": "mariadb", "instances": 2})
    )
    wait_for(lambda: _matches_built(api, ns, body) is None, 60, "objects built")

    core.patch_namespaced_service("drift-rw", ns, {"spec": {"selector": {m.ROLE_LABEL: "replica"}}})
    core.patch_namespaced_config_map("drift-config", ns, {"data": {"my.cnf": "# edited by hand\n"}})
    apps.patch_namespaced_stateful_set("drift", ns, {"spec": {"replicas": 5}})
    core.delete_namespaced_service("drift-ro", ns)
    # (no check that the drift is visible: the StatefulSet edit re-triggers a reconcile at once)
    wait_for(lambda: _matches_built(api, ns, body) is None, 60, "hand-made drift corrected")
    assert apps.read_namespaced_stateful_set("drift", ns).spec.replicas == 2


def test_user_secret_is_honoured_reported_when_missing_and_survives_deletion(control_plane, operator, ns):
    api = control_plane.api_client()
    objs, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    spec = {"flavor": "mariadb", "instances": 1, "credentials": {"secretName": "mine"}}
    objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body("byo", spec))

    # CEL cannot know whether a referenced Secret exists: a condition and an Event say so
    def reported():
        st = _get(objs, ns, "byo").get("status") or {}
        d = _condition(st, "Degraded")
        return st if d.get("status") == "True" and d.get("reason") == "CredentialsSecret" else None

    st = wait_for(reported, 60, "Degraded=True reason CredentialsSecret")
    assert "mine" in _condition(st, "Degraded")["message"] and st["phase"] == "Failed"
    wait_for(
        lambda: any(
            e.reason == "CredentialsSecret" and e.type == "Warning" and "mine" in e.message
            for e in _events(api, ns, "byo")
        ),
        30,
        "a Warning Event naming the Secret",
    )
    assert "StatefulSet/byo" in _owned_objects(api, ns, "byo")  # objects are still applied
    assert "Secret/byo-credentials" not in _owned_objects(api, ns, "byo")  # nothing generated

    # a Secret lacking a key is named too
    _user_secret(core, ns, "mine", {m.ROOT_PASSWORD_KEY: "r", m.OPERATOR_PASSWORD_KEY: "o"})
    wait_for(
        lambda: (
            m.REPLICATION_PASSWORD_KEY
            in _condition(_get(objs, ns, "byo").get("status") or {}, "Degraded").get("message", "")
        ),
        60,
        "the missing key named",
    )
    core.patch_namespaced_secret("mine", ns, {"stringData": {m.REPLICATION_PASSWORD_KEY: "p"}})
    wait_for(
        lambda: _condition(_get(objs, ns, "byo").get("status") or {}, "Degraded").get("status") == "False",
        60,
        "Degraded cleared once the Secret is complete",
    )
    before = core.read_namespaced_secret("mine", ns)
    assert not before.metadata.owner_references  # never adopted
    sts = client.AppsV1Api(api).read_namespaced_stateful_set("byo", ns)
    init = next(x for x in sts.spec.template.spec.init_containers if x.name == "init-datadir")
    env = {
        e.name: e.value_from.secret_key_ref.name
        for e in init.env
        if e.value_from and e.value_from.secret_key_ref
    }
    assert set(env.values()) == {"mine"}
    token = next(v for v in sts.spec.template.spec.volumes if v.name == "seed-token")  # MariaDB re-seeding
    assert {src.secret.name for src in token.projected.sources} == {"mine"}

    objs.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "byo")
    wait_for(lambda: not _owned_objects(api, ns, "byo"), 90, "owned objects garbage-collected")
    after = core.read_namespaced_secret("mine", ns)
    assert after.data == before.data and after.metadata.uid == before.metadata.uid


def test_a_spec_error_cel_cannot_catch_is_a_condition_and_an_event(control_plane, operator, ns):
    """A my.cnf line without a setting name, stored before the CRD refused it (the parser always
    did): the operator touches nothing, says why in a condition and an Event, and acts once it is
    fixed."""
    api = control_plane.api_client()
    with cluster_crd_before_issue_45(api, ns):
        _refused_then_fixed(api, ns)


def _refused_then_fixed(api, ns: str) -> None:
    objs = client.CustomObjectsApi(api)
    spec = {"flavor": "mariadb", "instances": 1, "config": {"myCnf": "[mysqld]\n= 50\n"}}
    objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body("bad", spec))

    def refused():
        st = _get(objs, ns, "bad").get("status") or {}
        return st if st.get("phase") == "Invalid" else None

    st = wait_for(refused, 60, "phase Invalid")
    degraded = _condition(st, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidSpec")
    assert degraded["message"].startswith("spec.config.myCnf: line 2: a setting needs a name before '='")
    assert _condition(st, "Ready")["status"] == "False"
    wait_for(
        lambda: any(
            e.type == "Warning" and e.reason == "InvalidSpec" and "spec.config.myCnf" in e.message
            for e in _events(api, ns, "bad")
        ),
        30,
        "a Warning Event naming the field",
    )
    assert not _owned_objects(api, ns, "bad"), "nothing is created from a refused spec"

    def fix():
        live = _get(objs, ns, "bad")
        live["spec"]["config"]["myCnf"] = "[mysqld]\nmax_connections = 50\n"
        return objs.replace_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "bad", live)

    wait_for(fix, 30, "spec fixed")
    wait_for(lambda: len(_owned_objects(api, ns, "bad")) == OWNED, 60, "objects once the spec is valid")
    wait_for(
        lambda: (_get(objs, ns, "bad").get("status") or {}).get("phase") == "Pending",
        60,
        "phase Pending after the fix",
    )


def test_a_refused_edit_keeps_the_cluster_on_its_last_accepted_spec_across_a_restart(
    control_plane, operator, ns
):
    """Issue 45: an edit the CRD admits but the parser refuses (a cron hour 25, admitted by the CRD
    before issue 45, as objects stored then still hold) must never stop failover. The cluster runs
    on the last spec that parsed, recorded in status.lastValidSpec: its objects stay as they were
    (the valid part of the same edit is not applied either), the phase is not Invalid,
    observedGeneration stays the accepted generation, SpecValid False and a Warning Event name the
    field. A restarted operator (nothing in memory) still runs on the record; the fix is applied
    and clears the condition."""
    api = control_plane.api_client()
    with cluster_crd_before_issue_45(api, ns):
        _kept_on_the_last_accepted_spec(api, ns, operator)


def _kept_on_the_last_accepted_spec(api, ns: str, operator) -> None:
    objs, apps, core = client.CustomObjectsApi(api), client.AppsV1Api(api), client.CoreV1Api(api)
    spec = {"flavor": "mariadb", "instances": 2, "podAnnotations": {"team": "db"}}
    created = objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body("keep", spec))
    accepted = created["metadata"]["generation"]
    wait_for(lambda: _matches_built(api, ns, created) is None, 60, "objects built")

    def recorded():
        st = _get(objs, ns, "keep").get("status") or {}
        return st if (st.get("lastValidSpec") or {}).get("generation") == accepted else None

    st = wait_for(recorded, 60, "the accepted spec recorded in the status")
    assert st["lastValidSpec"]["spec"] == created["spec"] and st["observedGeneration"] == accepted
    assert _condition(st, "SpecValid")["status"] == "True"
    before = apps.read_namespaced_stateful_set("keep", ns).metadata.generation
    my_cnf = core.read_namespaced_config_map("keep-config", ns).data

    def edit(patch: dict) -> int:
        done = wait_for(
            lambda: objs.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "keep", {"spec": patch}),
            30,
            "spec edited",
        )
        return done["metadata"]["generation"]

    def refused(generation: int):
        st = _get(objs, ns, "keep").get("status") or {}
        said = _condition(st, "SpecValid")
        return st if (said.get("status"), said.get("observedGeneration")) == ("False", generation) else None

    def warned(generation: int) -> None:
        wait_for(
            lambda: any(
                e.type == "Warning"
                and e.reason == "InvalidSpec"
                and e.message.startswith("spec.backup.schedule: hour")
                and f"generation {generation} is not applied" in e.message
                for e in _events(api, ns, "keep")
            ),
            30,
            f"a Warning Event naming the field, for generation {generation}",
        )

    def kept_as_accepted(st: dict) -> None:
        assert st["phase"] not in ("Invalid", "Failed"), st["phase"]
        assert st["observedGeneration"] == accepted, "a refused generation is never reported as applied"
        assert st["lastValidSpec"] == {"generation": accepted, "spec": created["spec"]}
        assert _matches_built(api, ns, created) is None
        assert apps.read_namespaced_stateful_set("keep", ns).metadata.generation == before
        assert core.read_namespaced_config_map("keep-config", ns).data == my_cnf

    backup = {
        "schedule": "0 25 * * *",
        "storage": {"s3": {"bucket": "backups", "credentialsSecret": {"name": "s3"}}},
    }
    bad = edit({"config": {"myCnf": "[mysqld]\nmax_connections = 77\n"}, "backup": backup})
    st = wait_for(lambda: refused(bad), 60, "SpecValid False for the refused generation")
    said = _condition(st, "SpecValid")
    assert said["reason"] == "InvalidSpec" and said["message"].startswith("spec.backup.schedule: hour '25'")
    warned(bad)
    kept_as_accepted(st)

    operator.restart()
    again = edit({"backup": {**backup, "schedule": "0 26 * * *"}})  # refused as well
    st = wait_for(lambda: refused(again), 60, "the restarted operator: SpecValid False")
    warned(again)
    kept_as_accepted(st)

    fixed = edit({"backup": None, "podAnnotations": None})

    def valid():
        live = _get(objs, ns, "keep")
        st = live.get("status") or {}
        return live if _condition(st, "SpecValid").get("status") == "True" else None

    live = wait_for(valid, 60, "SpecValid True after the fix")
    assert live["status"]["observedGeneration"] == fixed
    # recorded with a merge patch: the fields the fix removed are gone from the record too
    assert live["status"]["lastValidSpec"] == {"generation": fixed, "spec": live["spec"]}
    wait_for(lambda: _matches_built(api, ns, live) is None, 60, "the fixed spec applied")
    assert "max_connections = 77" in core.read_namespaced_config_map("keep-config", ns).data["my.cnf"]


# affinities the CRD admits (it keeps affinity as the user wrote it) but the StatefulSet API refuses
BAD_AFFINITIES = {
    "no-node-selector-term": {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    },
    "wrong-shape": {"nodeAffinity": "zone-a"},
}


def _apply_failed(objs, ns, name):
    st = _get(objs, ns, name).get("status") or {}
    degraded = _condition(st, "Degraded")
    return st if (degraded.get("status"), degraded.get("reason")) == ("True", "ApplyFailed") else None


def test_a_field_of_a_newer_crd_is_ignored_and_named_and_the_cluster_still_managed(
    control_plane, operator, ns
):
    """A rolled-back operator meets a newer CRD: a cluster using a field this version does not know
    is still built and managed (refusing it would stop its failover); a Warning Event names the
    field."""
    api = control_plane.api_client()
    ext, objs = client.ApiextensionsV1Api(api), client.CustomObjectsApi(api)
    name = f"{PLURAL}.{GROUP}"
    newer = api.sanitize_for_serialization(ext.read_custom_resource_definition(name))
    schema = newer["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    schema["properties"]["futureSetting"] = {"type": "string"}
    ext.replace_custom_resource_definition(name, newer)
    try:
        spec = {"flavor": "mariadb", "instances": 1, "futureSetting": "on"}

        wait_for(lambda: kept(objs, ns, spec), 30, "the API server serves the newer schema", interval=0.5)
        objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body("newer", spec))
        assert _get(objs, ns, "newer")["spec"]["futureSetting"] == "on", "kept by the newer CRD"
        wait_for(lambda: len(_owned_objects(api, ns, "newer")) == OWNED, 60, "objects built all the same")
        said = wait_for(
            lambda: [e for e in _events(api, ns, "newer") if e.reason == "UnknownFields"],
            30,
            "a Warning Event naming the ignored field",
        )
        assert said[0].type == "Warning" and said[0].message.startswith("spec.futureSetting: not known"), said
        assert (_get(objs, ns, "newer").get("status") or {}).get("phase") != "Invalid"
    finally:
        apply_crds(api, project_crds())
        # the next tests get the project's schema, its storage initialized again
        wait_for(lambda: kept(objs, ns, spec) is False, 60, "the project's schema served again", interval=0.5)


def test_an_older_spelling_beside_the_newer_field_is_named_in_a_warning_and_the_newer_one_read(
    control_plane, operator, ns
):
    """A cluster made before spec.replication.failover.delay existed has delaySeconds stored; the
    user adds delay: the cluster is managed on it, and a Warning Event names the older field to
    remove (never a refusal: that would stop failover for an object the user did not break)."""
    api = control_plane.api_client()
    objs = client.CustomObjectsApi(api)
    spec = {
        "flavor": "MariaDB",
        "instances": 1,
        "replication": {"failover": {"delaySeconds": 3, "delay": "5s"}},
    }
    objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body("both", spec))
    wait_for(lambda: len(_owned_objects(api, ns, "both")) == OWNED, 60, "objects built")
    said = wait_for(
        lambda: [e for e in _events(api, ns, "both") if e.reason == "SupersededFields"],
        30,
        "a Warning Event naming the older field",
    )
    assert said[0].type == "Warning" and said[0].message.startswith(
        "spec.replication.failover.delaySeconds is ignored: spec.replication.failover.delay is set"
    ), said
    assert (_get(objs, ns, "both").get("status") or {}).get("phase") != "Invalid"


def kept(objs, ns: str, spec: dict) -> bool | None:
    """Whether the API server keeps spec.futureSetting (a dry run); None while it cannot say."""
    try:
        dry = objs.create_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, _body("probe", spec), dry_run="All"
        )
    except client.ApiException:
        return None
    return "futureSetting" in dry["spec"]


@pytest.mark.parametrize("case", sorted(BAD_AFFINITIES))
def test_an_object_the_api_refuses_is_a_condition_and_an_event_and_the_rest_is_applied(
    control_plane, operator, ns, case
):
    """A spec the CRD admits but the StatefulSet API refuses: the status says which field and what
    the API said (a condition and a Warning Event), every other object is applied, and the fix is
    picked up; the same for a bad edit of a cluster whose objects exist (they keep the last good
    spec)."""
    api = control_plane.api_client()
    objs, apps = client.CustomObjectsApi(api), client.AppsV1Api(api)
    name = f"refused-{case}"
    spec = {"flavor": "mariadb", "instances": 1, "affinity": BAD_AFFINITIES[case]}
    objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body(name, spec))

    st = wait_for(lambda: _apply_failed(objs, ns, name), 60, "Degraded ApplyFailed")
    message = _condition(st, "Degraded")["message"]
    assert message.startswith("spec.affinity: StatefulSet " + name), message
    print(f"\n{case}: {message}")
    assert st["phase"] == "Failed" and _condition(st, "Ready")["reason"] == "ApplyFailed"
    wait_for(
        lambda: any(
            e.type == "Warning" and e.reason == "ApplyFailed" and e.message == message
            for e in _events(api, ns, name)
        ),
        30,
        "a Warning Event with the same message",
    )
    live = _owned_objects(api, ns, name)
    assert f"StatefulSet/{name}" not in live
    assert len(live) == OWNED - 1, sorted(live)  # everything else was applied

    def edit(affinity):
        def patch():
            return objs.patch_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, name, {"spec": {"affinity": affinity}}
            )

        wait_for(patch, 30, "spec edited")

    edit(None)  # remove the bad field: the StatefulSet is created, the condition clears
    wait_for(lambda: len(_owned_objects(api, ns, name)) == OWNED, 60, "every object once fixed")
    wait_for(
        lambda: _condition(_get(objs, ns, name).get("status") or {}, "Degraded").get("status") == "False",
        60,
        "Degraded False once fixed",
    )
    before = apps.read_namespaced_stateful_set(name, ns).spec.template.spec.affinity

    edit(BAD_AFFINITIES[case])  # a bad edit of a cluster whose objects exist
    st = wait_for(lambda: _apply_failed(objs, ns, name), 60, "Degraded ApplyFailed after a bad edit")
    assert _condition(st, "Degraded")["message"].startswith("spec.affinity: StatefulSet " + name)
    assert apps.read_namespaced_stateful_set(name, ns).spec.template.spec.affinity == before


def test_a_switchover_request_waits_while_nothing_runs_and_one_naming_no_instance_is_refused(
    control_plane, operator, ns
):
    """Issue 45: a switchover is a request. No server runs here, so a request to an instance waits:
    status.switchover Pending saying why, the annotation kept, across an operator restart. One
    naming no instance is refused (the record, a Warning Event, the annotation removed), as the
    CLI's --wait reports. spec.primary set on creation (deprecated) waits the same way, in
    status.primaryRequest."""
    from mysql_operator import cli
    from mysql_operator import switchover as sw

    api = control_plane.api_client()
    objs = client.CustomObjectsApi(api)
    spec = {"flavor": "mariadb", "instances": 2, "primary": 1}
    objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body("swo", spec))
    kc = str(control_plane.admin_kubeconfig)
    switchover = ["switchover", "swo", "-n", ns, "--kubeconfig", kc, "--reason", "test"]

    def spec_request():
        return (_get(objs, ns, "swo").get("status") or {}).get("primaryRequest")

    asked = wait_for(spec_request, 60, "spec.primary recorded as a request")
    assert (asked["value"], asked["result"]) == (1, "Pending"), asked
    assert asked["message"] == "waits for swo-1: no server observed yet"

    assert cli.main([*switchover, "--to", "5", "--wait", "--timeout", "60"]) == 1

    # the pass writes the record (what --wait reports), then removes the finished request's
    # annotation: a moment later
    def request_removed():
        b = _get(objs, ns, "swo")
        return b if sw.ANNOTATION not in (b["metadata"].get("annotations") or {}) else None

    body = wait_for(request_removed, 30, "the refused request's annotation removed")
    record = body["status"]["switchover"]
    assert (record["to"], record["result"]) == ("swo-5", "Refused"), record
    assert "not among the 2 instances" in record["message"] and record["requestedBy"].endswith(": test")
    refusals = [e for e in _events(api, ns, "swo") if e.reason == "SwitchoverRefused"]
    assert refusals and refusals[0].type == "Warning" and "swo-5" in refusals[0].message
    # the annotation goes first: the spec.primary request still waiting is superseded, for good
    asked = body["status"]["primaryRequest"]
    assert (asked["value"], asked["result"]) == (1, "Refused") and "superseded" in asked["message"], asked

    assert cli.main([*switchover, "--to", "0"]) == 0

    def waiting():
        st = _get(objs, ns, "swo").get("status") or {}
        rec = st.get("switchover") or {}
        return rec if (rec.get("to"), rec.get("result")) == ("swo-0", "Pending") else None

    first = wait_for(waiting, 60, "the request to swo-0 waiting in the status")
    assert first["message"] == "waits for swo-0: no server observed yet"
    assert spec_request() == asked  # acted on: not asked again
    operator.restart()
    edited = objs.patch_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, "swo", {"spec": {"podAnnotations": {"team": "db"}}}
    )["metadata"]["generation"]
    body = wait_for(
        lambda: (b := _get(objs, ns, "swo")).get("status", {}).get("observedGeneration") == edited and b,
        60,
        "a pass of the restarted operator",
    )
    assert body["metadata"]["annotations"][sw.ANNOTATION] == "0; " + first["requestedBy"]
    assert waiting() == first  # the restarted operator resumes the same request


def test_rotate_passwords_cli_changes_the_generated_secret_only(control_plane, operator, ns, capsys):
    from mysql_operator import cli

    api = control_plane.api_client()
    objs, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    spec = {"flavor": "mariadb", "instances": 1, "database": {"name": "shop", "user": "shopper"}}
    objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body("rot", spec))
    before = wait_for(lambda: core.read_namespaced_secret("rot-credentials", ns).data, 60, "generated Secret")
    kc = str(control_plane.admin_kubeconfig)
    assert cli.main(["rotate-passwords", "rot", "-n", ns, "--kubeconfig", kc, "--key", "app-password"]) == 0
    after = core.read_namespaced_secret("rot-credentials", ns).data
    assert after[m.APP_PASSWORD_KEY] != before[m.APP_PASSWORD_KEY]
    assert {k: v for k, v in after.items() if k != m.APP_PASSWORD_KEY} == {
        k: v for k, v in before.items() if k != m.APP_PASSWORD_KEY
    }
    assert base64.b64decode(after[m.APP_PASSWORD_KEY]).decode() not in capsys.readouterr().out
    assert cli.main(["rotate-passwords", "rot", "-n", ns, "--kubeconfig", kc]) == 0
    again = core.read_namespaced_secret("rot-credentials", ns).data
    assert all(again[k] != after[k] for k in after if k != m.RESTORE_PASSWORD_KEY)

    _user_secret(core, ns, "theirs")
    spec = {"flavor": "mariadb", "instances": 1, "credentials": {"secretName": "theirs"}}
    objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body("byo-rot", spec))
    assert cli.main(["rotate-passwords", "byo-rot", "-n", ns, "--kubeconfig", kc]) == 1
    assert "is yours" in capsys.readouterr().err


def _bind_static_volume(core, ns: str, claim: str, storage_class: str, size: str) -> None:
    """A PersistentVolume reserved for `claim` (no provisioner here): the PV controller binds them."""
    name = f"pv-{ns}-{claim}"[:63]
    core.create_persistent_volume(
        {
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": storage_class,
                "hostPath": {"path": f"/tmp/{name}"},
                "claimRef": {"namespace": ns, "name": claim},
                "persistentVolumeReclaimPolicy": "Delete",
            },
        }
    )


@pytest.mark.parametrize("expandable", [True, False], ids=["expandable", "fixed-size"])
def test_raising_storage_size_grows_the_claims_or_says_why_not(control_plane, operator, ns, expandable):
    """spec.storage.size raised: each server's PersistentVolumeClaim asks for the new size (the
    StatefulSet keeps its immutable claim template); where the StorageClass does not allow
    expansion the status says so, naming the claim and the API server's reason."""
    api = control_plane.api_client()
    objs, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    storage = client.StorageV1Api(api)
    sc = f"grow-{ns}" if expandable else f"fixed-{ns}"
    storage.create_storage_class(
        {
            "metadata": {"name": sc},
            "provisioner": "kubernetes.io/no-provisioner",
            "allowVolumeExpansion": expandable,
            "volumeBindingMode": "Immediate",
        }
    )
    name = "grow" if expandable else "fixed"
    spec = {"flavor": "mariadb", "instances": 1, "storage": {"size": "1Gi", "storageClassName": sc}}
    objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body(name, spec))
    claim = f"data-{name}-0"
    _bind_static_volume(core, ns, claim, sc, "1Gi")
    wait_for(
        lambda: core.read_namespaced_persistent_volume_claim(claim, ns).status.phase == "Bound",
        60,
        f"{claim} Bound",
    )

    def grow():
        return objs.patch_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, name, {"spec": {"storage": {"size": "2Gi"}}}
        )

    wait_for(grow, 30, "spec.storage.size 2Gi")
    apps = client.AppsV1Api(api)
    if expandable:
        wait_for(
            lambda: (
                core.read_namespaced_persistent_volume_claim(claim, ns).spec.resources.requests["storage"]
                == "2Gi"
            ),
            60,
            f"{claim} asks for 2Gi",
        )
        st = wait_for(
            lambda: (
                (_get(objs, ns, name).get("status") or {}).get("observedGeneration") == 2
                and _get(objs, ns, name)["status"]
            ),
            60,
            "generation 2 observed",
        )
        assert _condition(st, "Degraded").get("reason") != "ApplyFailed", st
    else:
        st = wait_for(lambda: _apply_failed(objs, ns, name), 60, "Degraded ApplyFailed")
        message = _condition(st, "Degraded")["message"]
        assert message.startswith(f"spec.storage.size: PersistentVolumeClaim {claim} cannot grow to 2Gi"), (
            message
        )
        assert (
            core.read_namespaced_persistent_volume_claim(claim, ns).spec.resources.requests["storage"]
            == "1Gi"
        )
    template = apps.read_namespaced_stateful_set(name, ns).spec.volume_claim_templates[0]
    assert template.spec.resources.requests["storage"] == "1Gi"  # immutable: unchanged, no refusal


def test_deleting_the_cluster_garbage_collects_generated_objects(control_plane, operator, ns):
    api = control_plane.api_client()
    objs = client.CustomObjectsApi(api)
    spec = {"flavor": "mariadb", "instances": 1, "deletionPolicy": "Delete"}
    objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body("gone", spec))
    wait_for(lambda: len(_owned_objects(api, ns, "gone")) == OWNED, 60, f"{OWNED} owned objects")
    objs.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "gone")
    wait_for(lambda: not _owned_objects(api, ns, "gone"), 90, "owned objects garbage-collected")


def test_retain_keeps_the_generated_secret_for_a_cluster_created_again_and_delete_adopts_it(
    control_plane, operator, ns
):
    """deletionPolicy Retain keeps the generated credentials Secret with the volumes: a cluster
    created again with the same name uses the same passwords (it can log in to the retained
    data). Switching the policy to Delete hands the Secret to the cluster (deleted with it)."""
    api = control_plane.api_client()
    objs, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    spec = {"flavor": "mariadb", "instances": 1}  # deletionPolicy Retain by default
    objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body("back", spec))
    wait_for(lambda: len(_owned_objects(api, ns, "back")) == OWNED, 60, f"{OWNED} objects")
    first = core.read_namespaced_secret("back-credentials", ns)
    objs.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "back")
    wait_for(
        lambda: set(_owned_objects(api, ns, "back")) == {"Secret/back-credentials"}, 90, "all but it gone"
    )

    created = objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body("back", spec))
    wait_for(lambda: len(_owned_objects(api, ns, "back")) == OWNED, 60, f"{OWNED} objects again")
    again = core.read_namespaced_secret("back-credentials", ns)
    assert again.data == first.data, "the same passwords"
    assert not again.metadata.owner_references

    def switch():
        return objs.patch_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, "back", {"spec": {"deletionPolicy": "Delete"}}
        )

    wait_for(switch, 30, "deletionPolicy Delete")
    wait_for(
        lambda: (
            [
                r.uid
                for r in core.read_namespaced_secret("back-credentials", ns).metadata.owner_references or []
            ]
            == [created["metadata"]["uid"]]
        ),
        60,
        "the Secret owned by the cluster",
    )
    objs.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "back")
    wait_for(lambda: not _owned_objects(api, ns, "back"), 90, "everything garbage-collected")


def _sql_object(kind: str, object_name: str, spec: dict) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": object_name}, "spec": spec}


def _ready(objs, ns, plural, name) -> dict:
    body = objs.get_namespaced_custom_object(GROUP, VERSION, ns, plural, name)
    return next((c for c in (body.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})


def test_sql_objects_say_why_they_are_not_applied_and_never_block_deletion(control_plane, operator, ns):
    """No server runs here (no node): a MySQLUser of a missing cluster and one of a cluster without
    a running server each say why in a condition and an Event within seconds; deleting them is
    not held up by the operator's finalizer once their cluster is gone."""
    api = control_plane.api_client()
    objs = client.CustomObjectsApi(api)
    ref = {"clusterRef": {"name": "nosuch"}, "name": "orphan"}
    objs.create_namespaced_custom_object(
        GROUP, VERSION, ns, "mysqlusers", _sql_object("MySQLUser", "orphan", ref)
    )
    wait_for(
        lambda: _ready(objs, ns, "mysqlusers", "orphan").get("reason") == "ClusterMissing",
        30,
        "ClusterMissing",
    )
    assert "MySQLCluster nosuch does not exist" in _ready(objs, ns, "mysqlusers", "orphan")["message"]
    assert any(e.reason == "ClusterMissing" for e in _events(api, ns, "orphan"))

    objs.create_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, _body("sqlc", {"flavor": "mariadb", "instances": 1})
    )
    grant = _sql_object(
        "MySQLGrant",
        "reader",
        {"clusterRef": {"name": "sqlc"}, "user": "reader", "database": "shop", "privileges": ["SELECT"]},
    )
    objs.create_namespaced_custom_object(GROUP, VERSION, ns, "mysqlgrants", grant)
    wait_for(
        lambda: _ready(objs, ns, "mysqlgrants", "reader").get("reason") == "ClusterUnavailable",
        60,
        "ClusterUnavailable",
    )
    stored = objs.get_namespaced_custom_object(GROUP, VERSION, ns, "mysqlgrants", "reader")
    assert "mysql.operator.dev/sql-cleanup" in stored["metadata"]["finalizers"]
    assert "has no server running yet" in _ready(objs, ns, "mysqlgrants", "reader")["message"]

    objs.delete_namespaced_custom_object(GROUP, VERSION, ns, "mysqlusers", "orphan")
    objs.delete_namespaced_custom_object(GROUP, VERSION, ns, "mysqlgrants", "reader")

    def gone(plural, name):
        try:
            objs.get_namespaced_custom_object(GROUP, VERSION, ns, plural, name)
            return False
        except client.ApiException as e:
            return e.status == 404

    wait_for(lambda: gone("mysqlusers", "orphan"), 30, "the orphan MySQLUser deleted")
    # its cluster is there: the grant waits to be revoked on it, and says so
    wait_for(
        lambda: "waiting to clean up" in _ready(objs, ns, "mysqlgrants", "reader").get("message", ""),
        30,
        "waiting",
    )
    objs.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "sqlc")
    wait_for(lambda: gone("mysqlgrants", "reader"), 60, "the grant released with its cluster")


def test_the_operator_used_no_permission_it_does_not_declare(operator, ns):
    """Runs last in this module: the log of everything above has no 403."""
    log = operator.log()
    assert operator.proc.poll() is None, log[-4000:]
    # an RBAC denial (APIForbiddenError, 403) says who cannot do what; other 403s are admission
    # refusals the status reports (a StorageClass that cannot expand a volume)
    denied = re.compile(r'forbidden: User \\?"[^"\\]+\\?" cannot ')
    forbidden = [line for line in log.splitlines() if denied.search(line)]
    assert not forbidden, "\n".join(forbidden[:20])
    lines = [line for line in log.splitlines() if line.strip()]
    assert lines and all(line.startswith("{") for line in lines), "--log-format json gives JSON lines"


def test_a_restart_a_new_operator_version_needs_is_staged_one_cluster_at_a_time(control_plane, operator, ns):
    """An operator upgrade that changes the Pod template, emulated by giving a StatefulSet the
    record an older operator would have left (another template and its hash, the same spec
    generation). Manual: the template stays, RestartPending and an Event say how to approve;
    approved, the operator's template is written and the annotation removed. Auto: one cluster at
    a time: a second cluster waits, naming the first (no Pod runs here, so that roll never ends),
    and goes once the first is deleted. A StatefulSet without the record whose template is the
    same is only recorded."""
    api = control_plane.api_client()
    objs, apps = client.CustomObjectsApi(api), client.AppsV1Api(api)
    spec = {"flavor": "mariadb", "instances": 1}
    a = objs.create_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, _body("up-a", {**spec, "operatorUpgrades": "Manual"})
    )
    b = objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _body("up-b", spec))
    for body in (a, b):
        wait_for(lambda body=body: _matches_built(api, ns, body) is None, 60, "objects built")
    built = {
        n: apps.read_namespaced_stateful_set(n, ns).spec.template.metadata.annotations
        for n in ("up-a", "up-b")
    }

    def older(name: str) -> None:
        apps.patch_namespaced_stateful_set(
            name,
            ns,
            {
                "metadata": {
                    "annotations": {
                        rolling.APPLIED_TEMPLATE_ANNOTATION: "older",
                        rolling.WANTED_TEMPLATE_ANNOTATION: "older",
                    }
                },
                "spec": {"template": {"metadata": {"annotations": {CONFIG_HASH: "older-operator"}}}},
            },
        )

    def template_hash(name: str) -> str:
        return apps.read_namespaced_stateful_set(name, ns).spec.template.metadata.annotations[CONFIG_HASH]

    def pending(name: str) -> dict:
        return _condition(_get(objs, ns, name).get("status") or {}, "RestartPending")

    def staged_now(name: str) -> dict | None:
        """The RestartPending condition once staged; meanwhile the older record is put back if a
        pass that was already applying overwrote it."""
        found = pending(name)
        if found.get("status") == "True":
            return found
        if template_hash(name) != "older-operator":
            older(name)
        return None

    # an older operator's StatefulSet (no record) with the template this one builds: the API
    # server's dry run says so; the record is written, the template (its generation) unchanged
    generation = apps.read_namespaced_stateful_set("up-b", ns).metadata.generation
    unrecorded = {
        key: None
        for key in (
            rolling.APPLIED_TEMPLATE_ANNOTATION,
            rolling.WANTED_TEMPLATE_ANNOTATION,
            rolling.TEMPLATE_GENERATION_ANNOTATION,
        )
    }
    apps.patch_namespaced_stateful_set("up-b", ns, {"metadata": {"annotations": unrecorded}})
    wait_for(
        lambda: (
            rolling.APPLIED_TEMPLATE_ANNOTATION
            in (apps.read_namespaced_stateful_set("up-b", ns).metadata.annotations or {})
        ),
        30,
        "up-b's record written again",
    )
    assert apps.read_namespaced_stateful_set("up-b", ns).metadata.generation == generation
    assert not pending("up-b")

    staged = wait_for(lambda: staged_now("up-a"), 30, "up-a staged")
    assert (
        staged["reason"] == "WaitingForApproval" and rolling.APPROVE_RESTART_ANNOTATION in staged["message"]
    )
    assert template_hash("up-a") == "older-operator", "the Pods' template is kept"
    assert any(e.reason == "RestartPending" for e in _events(api, ns, "up-a"))
    assert _get(objs, ns, "up-a")["status"]["phase"] != "Failed"

    objs.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        PLURAL,
        "up-a",
        {"metadata": {"annotations": {rolling.APPROVE_RESTART_ANNOTATION: "true"}}},
    )
    wait_for(lambda: template_hash("up-a") == built["up-a"][CONFIG_HASH], 30, "up-a's template written")
    wait_for(lambda: not pending("up-a"), 30, "up-a's RestartPending gone")
    notes = _get(objs, ns, "up-a")["metadata"].get("annotations") or {}
    assert rolling.APPROVE_RESTART_ANNOTATION not in notes, "the approval is carried out and removed"
    assert any(e.reason == "OperatorRestart" for e in _events(api, ns, "up-a"))

    # Auto, while up-a's restart is under way
    staged = wait_for(lambda: staged_now("up-b"), 30, "up-b staged")
    assert staged["reason"] == "WaitingForOtherCluster" and f"{ns}/up-a" in staged["message"]
    assert template_hash("up-b") == "older-operator"
    objs.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "up-a")
    wait_for(
        lambda: template_hash("up-b") == built["up-b"][CONFIG_HASH],
        60,
        "up-b's template written",
        describe=lambda: f"up-b's RestartPending: {pending('up-b')}",
    )
    wait_for(lambda: not pending("up-b"), 30, "up-b's RestartPending gone")
