"""The chart installed with the real `helm` into the real kube-apiserver (admin kubeconfig), then the
chart's ServiceAccount, authenticated with a real token, tried against what RBAC allows.

There is no node: the operator Deployment exists but its Pod never runs; these tests are about the
objects the chart creates and the permissions it grants.
"""

from __future__ import annotations

import subprocess
import textwrap
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from mysql_operator.api import GROUP, VERSION
from tests.support.chart import CHART, REPO, helm_or_skip
from tests.support.wait import wait_for

pytestmark = pytest.mark.controlplane

PLURAL = "mysqlclusters"
CHART_CRDS = sorted((CHART / "crds").glob("*.yaml"))


def _crd_names() -> list[str]:
    return [yaml.safe_load(p.read_text())["metadata"]["name"] for p in CHART_CRDS]


class Helm:
    def __init__(self, binary: str, kubeconfig: Path, workdir: Path):
        self.binary, self.kubeconfig, self.workdir = binary, kubeconfig, workdir
        self.installed: list[tuple[str, str]] = []

    def __call__(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        env = {
            "HOME": str(self.workdir),
            "PATH": "/usr/bin:/bin",
            "HELM_CACHE_HOME": str(self.workdir / "cache"),
            "HELM_CONFIG_HOME": str(self.workdir / "config"),
            "HELM_DATA_HOME": str(self.workdir / "data"),
        }
        r = subprocess.run(
            [self.binary, "--kubeconfig", str(self.kubeconfig), *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        if check:
            assert r.returncode == 0, f"helm {' '.join(argv)} failed:\n{r.stdout}\n{r.stderr}"
        return r

    def install(self, release: str, namespace: str, values: dict) -> str:
        path = self.workdir / f"{release}-values.yaml"
        path.write_text(yaml.safe_dump(values))
        r = self("install", release, str(CHART), "--namespace", namespace, "-f", str(path))
        self.installed.append((release, namespace))
        return r.stdout

    def uninstall(self, release: str, namespace: str) -> None:
        self("uninstall", release, "--namespace", namespace, "--wait", "--timeout", "120s")
        self.installed.remove((release, namespace))


@pytest.fixture(scope="module")
def helm(control_plane, tmp_path_factory):
    """Real helm with the admin kubeconfig. Afterwards: releases uninstalled, and the CRDs the
    chart created removed (those that existed before are left as found)."""
    h = Helm(helm_or_skip(), control_plane.admin_kubeconfig, tmp_path_factory.mktemp("helm"))
    ext = client.ApiextensionsV1Api(control_plane.api_client())

    def absent_or_live(name):  # another module may still be deleting it
        try:
            return ext.read_custom_resource_definition(name).metadata.deletion_timestamp is None
        except client.ApiException as e:
            return e.status == 404

    def conditions(name):
        crd = ext.read_custom_resource_definition(name)
        conds = [(c.type, c.status, c.reason, c.message) for c in crd.status.conditions or []]
        return f"CRD {name}: finalizers {crd.metadata.finalizers}, conditions {conds}"

    for name in _crd_names():
        wait_for(
            lambda: absent_or_live(name),
            180,
            f"CRD {name} not terminating",
            describe=lambda: conditions(name),
        )
    existing = {c.metadata.name for c in ext.list_custom_resource_definition().items}
    yield h
    for release, ns in list(h.installed):
        h("uninstall", release, "--namespace", ns, check=False)
    for name in set(_crd_names()) - existing:
        try:
            ext.delete_custom_resource_definition(name)
        except client.ApiException as e:
            if e.status != 404:
                raise
    # not waited for: the apiserver finishes removing them (the next module's set-up waits)


def _exists(read) -> bool:
    try:
        read()
        return True
    except client.ApiException as e:
        if e.status == 404:
            return False
        raise


def _status(call) -> int:
    """HTTP status of a call: 200 when it succeeds, else the API's error code."""
    try:
        call()
        return 200
    except client.ApiException as e:
        return e.status


@pytest.fixture
def namespaces(control_plane):
    """Fresh namespaces made on demand, deleted after the test."""
    core = client.CoreV1Api(control_plane.api_client())
    made = []

    def make(prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        core.create_namespace({"metadata": {"name": name}})
        made.append(name)
        return name

    yield make
    for name in made:
        core.delete_namespace(name)


def _release() -> str:
    return f"op-{uuid.uuid4().hex[:6]}"


def _crds_established(ext: client.ApiextensionsV1Api) -> bool:
    for name in _crd_names():
        conds = ext.read_custom_resource_definition(name).status.conditions or []
        if not any(c.type == "Established" and c.status == "True" for c in conds):
            return False
    return True


def _notes_manifest(notes: str) -> dict:
    """The MySQLCluster that NOTES.txt tells the user to apply."""
    body = notes.split("<<'YAML'\n", 1)[1].split("YAML\n", 1)[0]
    return yaml.safe_load(textwrap.dedent(body))


def _a_cluster(name: str) -> dict:
    doc = yaml.safe_load((REPO / "examples" / "one-instance.yaml").read_text())
    doc["metadata"] = {"name": name}
    return doc


def _sa_clients(control_plane, namespace: str, release: str):
    kubeconfig = control_plane.service_account_kubeconfig(namespace, f"{release}-mysql-operator")
    api = control_plane.api_client(kubeconfig)
    return client.CustomObjectsApi(api), client.CoreV1Api(api)


def _sa_leases(control_plane, namespace: str, release: str) -> client.CoordinationV1Api:
    kubeconfig = control_plane.service_account_kubeconfig(namespace, f"{release}-mysql-operator")
    return client.CoordinationV1Api(control_plane.api_client(kubeconfig))


def _lease_grants_only_in(leases: client.CoordinationV1Api, ns: str, elsewhere: str) -> None:
    """The operator's ServiceAccount can create, read and update its Lease in the release
    namespace (leader election), and touch no Lease anywhere else."""
    body = {"metadata": {"name": "probe-lease"}, "spec": {"holderIdentity": "x", "leaseDurationSeconds": 15}}
    assert _status(lambda: leases.create_namespaced_lease(ns, body)) == 200
    lease = leases.read_namespaced_lease("probe-lease", ns)
    lease.spec.holder_identity = "y"
    assert _status(lambda: leases.replace_namespaced_lease("probe-lease", ns, lease)) == 200
    assert _status(lambda: leases.delete_namespaced_lease("probe-lease", ns)) == 403
    assert _status(lambda: leases.create_namespaced_lease(elsewhere, body)) == 403


def test_all_namespaces_install_upgrade_uninstall(control_plane, helm, namespaces):
    api = control_plane.api_client()
    ext, apps = client.ApiextensionsV1Api(api), client.AppsV1Api(api)
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    admin_objs = client.CustomObjectsApi(api)
    ns, anywhere = namespaces("ops"), namespaces("app")
    release = _release()
    full = f"{release}-mysql-operator"

    notes = helm.install(release, ns, {"replicas": 1})
    assert "kubectl get mysqlclusters" in notes and "all namespaces" in notes

    wait_for(lambda: _crds_established(ext), 60, "the chart's CRDs established")
    # the first cluster NOTES.txt shows is accepted as written
    first = _notes_manifest(notes)
    admin_objs.create_namespaced_custom_object(GROUP, VERSION, anywhere, PLURAL, first)
    dep = apps.read_namespaced_deployment(full, ns)
    pod = dep.spec.template.spec
    assert pod.service_account_name == full
    assert pod.security_context.run_as_non_root is True
    assert pod.containers[0].security_context.read_only_root_filesystem is True
    assert "--all-namespaces" in pod.containers[0].args
    core.read_namespaced_service_account(full, ns)
    assert rbac.read_cluster_role_binding(full).subjects[0].name == full
    assert f"--leader-elect={full}" in pod.containers[0].args  # one active replica, on a Lease
    assert rbac.read_namespaced_role_binding(f"{full}-leader-election", ns).subjects[0].name == full

    # the chart's ServiceAccount, with its own token
    objs, sa_core = _sa_clients(control_plane, ns, release)
    admin_objs.create_namespaced_custom_object(GROUP, VERSION, anywhere, PLURAL, _a_cluster("c1"))
    wait_for(
        lambda: _status(lambda: objs.list_namespaced_custom_object(GROUP, VERSION, anywhere, PLURAL)) == 200,
        30,
        "the ServiceAccount's grants in effect",
    )
    assert _status(lambda: objs.list_cluster_custom_object(GROUP, VERSION, PLURAL)) == 200
    assert (
        _status(
            lambda: objs.patch_namespaced_custom_object_status(
                GROUP, VERSION, anywhere, PLURAL, "c1", {"status": {"phase": "Pending"}}
            )
        )
        == 200
    )
    _lease_grants_only_in(_sa_leases(control_plane, ns, release), ns, anywhere)
    # it never deletes the user's custom resources nor Secrets
    assert (
        _status(lambda: objs.delete_namespaced_custom_object(GROUP, VERSION, anywhere, PLURAL, "c1")) == 403
    )
    core.create_namespaced_secret(
        anywhere, {"metadata": {"name": "user-secret"}, "stringData": {"password": "not-for-the-operator"}}
    )
    assert _status(lambda: sa_core.delete_namespaced_secret("user-secret", anywhere)) == 403
    assert _status(lambda: sa_core.list_namespaced_secret(anywhere)) == 403
    assert _exists(lambda: core.read_namespaced_secret("user-secret", anywhere))
    assert _status(lambda: sa_core.read_namespaced_secret("user-secret", anywhere)) == 200

    # upgrade: new values reach the Deployment, the release gets a new revision
    path = helm.workdir / "upgrade.yaml"
    path.write_text(yaml.safe_dump({"replicas": 2, "logFormat": "text", "commonLabels": {"team": "db"}}))
    helm("upgrade", release, str(CHART), "--namespace", ns, "-f", str(path))
    dep = apps.read_namespaced_deployment(full, ns)
    assert dep.spec.replicas == 2
    pdb = client.PolicyV1Api(api).read_namespaced_pod_disruption_budget(full, ns)  # a standby now
    assert pdb.spec.max_unavailable == 1
    assert "--log-format=text" in dep.spec.template.spec.containers[0].args
    assert dep.metadata.labels["team"] == "db"
    history = yaml.safe_load(helm("history", release, "--namespace", ns, "-o", "yaml").stdout)
    assert [h["revision"] for h in history] == [1, 2] and history[-1]["status"] == "deployed"

    # uninstall removes what the release made and keeps the CRDs (users' clusters live in them)
    helm.uninstall(release, ns)
    for what, read in [
        ("Deployment", lambda: apps.read_namespaced_deployment(full, ns)),
        ("ServiceAccount", lambda: core.read_namespaced_service_account(full, ns)),
        ("ClusterRole", lambda: rbac.read_cluster_role(full)),
        ("ClusterRoleBinding", lambda: rbac.read_cluster_role_binding(full)),
        ("Role", lambda: rbac.read_namespaced_role(f"{full}-leader-election", ns)),
        (
            "PodDisruptionBudget",
            lambda: client.PolicyV1Api(api).read_namespaced_pod_disruption_budget(full, ns),
        ),
    ]:
        wait_for(lambda: not _exists(read), 60, f"{what} {full} removed by helm uninstall")
    for name in _crd_names():
        assert _exists(lambda: ext.read_custom_resource_definition(name)), name
    assert _exists(lambda: admin_objs.get_namespaced_custom_object(GROUP, VERSION, anywhere, PLURAL, "c1"))


def test_namespaced_install_grants_only_the_watched_namespaces(control_plane, helm, namespaces):
    api = control_plane.api_client()
    ext, apps = client.ApiextensionsV1Api(api), client.AppsV1Api(api)
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    admin_objs = client.CustomObjectsApi(api)
    ns = namespaces("ops")
    watched = [namespaces("team-a"), namespaces("team-b")]
    unwatched = namespaces("other")
    release = _release()
    full = f"{release}-mysql-operator"

    values = yaml.safe_load((REPO / "examples" / "values-namespaced.yaml").read_text())
    values["watchNamespaces"] = watched
    notes = helm.install(release, ns, values)
    assert ", ".join(watched) in notes

    wait_for(lambda: _crds_established(ext), 60, "the chart's CRDs established")
    args = apps.read_namespaced_deployment(full, ns).spec.template.spec.containers[0].args
    assert [a for a in args if a.startswith("--namespace=")] == [f"--namespace={w}" for w in watched]
    for w in watched:
        assert rbac.read_namespaced_role_binding(full, w).subjects[0].namespace == ns
    for where in (ns, unwatched):
        assert not _exists(lambda: rbac.read_namespaced_role(full, where))
    # the only cluster-wide grants: reading what kopf scans, and ClusterIssuers (spec.tls.issuerRef);
    # the one write: patching the chart's own CRDs, by name (crds.apply)
    cluster_rules = rbac.read_cluster_role(full).rules
    assert {(g, res) for r in cluster_rules for g in r.api_groups for res in r.resources} == {
        ("apiextensions.k8s.io", "customresourcedefinitions"),
        ("", "namespaces"),
        ("cert-manager.io", "clusterissuers"),
    }
    reads = [r for r in cluster_rules if not r.resource_names]
    assert {v for r in reads for v in r.verbs} == {"get", "list", "watch"}
    (own,) = [r for r in cluster_rules if r.resource_names]
    assert own.verbs == ["patch"] and own.resources == ["customresourcedefinitions"]
    assert sorted(own.resource_names) == sorted(
        yaml.safe_load(p.read_text())["metadata"]["name"]
        for p in (REPO / "charts" / "mysql-operator" / "crds").glob("*.yaml")
    )

    objs, sa_core = _sa_clients(control_plane, ns, release)
    for where in (*watched, unwatched):
        admin_objs.create_namespaced_custom_object(GROUP, VERSION, where, PLURAL, _a_cluster("c1"))
        core.create_namespaced_secret(
            where, {"metadata": {"name": "user-secret"}, "stringData": {"password": "not-for-the-operator"}}
        )
    watched_ns = watched[0]
    wait_for(
        lambda: (
            _status(lambda: objs.list_namespaced_custom_object(GROUP, VERSION, watched_ns, PLURAL)) == 200
        ),
        30,
        "the ServiceAccount's grants in effect",
    )
    for w in watched:
        listed = objs.list_namespaced_custom_object(GROUP, VERSION, w, PLURAL)
        assert [i["metadata"]["name"] for i in listed["items"]] == ["c1"]
        assert (
            _status(
                lambda: objs.patch_namespaced_custom_object_status(
                    GROUP, VERSION, w, PLURAL, "c1", {"status": {"phase": "Pending"}}
                )
            )
            == 200
        )
        assert _status(lambda: sa_core.delete_namespaced_secret("user-secret", w)) == 403
        assert _exists(lambda: core.read_namespaced_secret("user-secret", w))
    # outside the watched namespaces: nothing
    assert _status(lambda: objs.list_namespaced_custom_object(GROUP, VERSION, unwatched, PLURAL)) == 403
    assert _status(lambda: objs.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)) == 403
    assert _status(lambda: objs.list_cluster_custom_object(GROUP, VERSION, PLURAL)) == 403
    assert (
        _status(
            lambda: objs.patch_namespaced_custom_object_status(
                GROUP, VERSION, unwatched, PLURAL, "c1", {"status": {"phase": "Failed"}}
            )
        )
        == 403
    )
    assert _status(lambda: sa_core.read_namespaced_secret("user-secret", unwatched)) == 403
    assert _status(lambda: sa_core.delete_namespaced_secret("user-secret", unwatched)) == 403
    assert _status(lambda: sa_core.list_secret_for_all_namespaces()) == 403
    _lease_grants_only_in(_sa_leases(control_plane, ns, release), ns, watched_ns)  # its own Lease only
    # cluster-wide it may only read what kopf scans
    assert _status(lambda: sa_core.list_namespace()) == 200
    assert _status(lambda: sa_core.delete_namespace(unwatched)) == 403

    # upgrade to a third namespace: the grant follows the values
    third = namespaces("team-c")
    values["watchNamespaces"] = [*watched, third]
    path = helm.workdir / f"{release}-upgrade.yaml"
    path.write_text(yaml.safe_dump(values))
    helm("upgrade", release, str(CHART), "--namespace", ns, "-f", str(path))
    wait_for(
        lambda: _status(lambda: objs.list_namespaced_custom_object(GROUP, VERSION, third, PLURAL)) == 200,
        30,
        f"grant in {third} after upgrade",
    )

    helm.uninstall(release, ns)
    for w in (*watched, third):
        wait_for(
            lambda: not _exists(lambda: rbac.read_namespaced_role(full, w)), 60, f"Role {full} in {w} removed"
        )
    wait_for(
        lambda: (
            _status(lambda: objs.list_namespaced_custom_object(GROUP, VERSION, watched_ns, PLURAL))
            in (401, 403)
        ),
        30,
        "the grant gone after uninstall",
    )


def test_bad_values_are_refused_before_anything_is_created(control_plane, helm, namespaces):
    ns = namespaces("ops")
    release = _release()
    r = helm("install", release, str(CHART), "--namespace", ns, "--set", "replicas=abc", check=False)
    assert r.returncode != 0
    assert "/replicas" in r.stderr and "got string, want integer" in r.stderr, r.stderr
    apps = client.AppsV1Api(control_plane.api_client())
    assert apps.list_namespaced_deployment(ns).items == []
    assert release not in helm("list", "--all-namespaces", "-q").stdout.split()


def test_operator_pod_passes_restricted_pod_security(control_plane, helm, namespaces):
    """The Deployment's Pod template, created as a Pod (server dry run) in a namespace enforcing
    the `restricted` Pod Security Standard, is admitted."""
    ns = namespaces("ops")
    core = client.CoreV1Api(control_plane.api_client())
    core.patch_namespace(
        ns,
        {
            "metadata": {
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                }
            }
        },
    )
    release = _release()
    helm.install(release, ns, {})
    apps = client.AppsV1Api(control_plane.api_client())
    template = apps.read_namespaced_deployment(f"{release}-mysql-operator", ns).spec.template
    api = control_plane.api_client()
    pod = api.sanitize_for_serialization(template)
    pod.update(apiVersion="v1", kind="Pod")
    pod["metadata"]["name"] = "restricted-probe"
    core.create_namespaced_pod(ns, pod, dry_run="All")
    # and the same Pod made privileged is refused there: the namespace really enforces
    pod["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    with pytest.raises(client.ApiException) as e:
        core.create_namespaced_pod(ns, pod, dry_run="All")
    assert e.value.status == 403 and "allowPrivilegeEscalation" in e.value.body
    helm.uninstall(release, ns)
