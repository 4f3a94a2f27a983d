"""The local control plane behaves like a real cluster's: admission, controllers, GC, RBAC."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.support.wait import wait_for

pytestmark = pytest.mark.controlplane

GROUP = "cptest.example.com"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1, "maximum": 9},
                                    "primary": {"type": "integer"},
                                },
                                "x-kubernetes-validations": [
                                    {
                                        "rule": "!has(self.primary) || self.primary < self.size",
                                        "message": "spec.primary must be lower than spec.size",
                                    }
                                ],
                            }
                        },
                    }
                },
            }
        ],
    },
}


def test_crd_schema_and_cel_rules_are_enforced_at_admission(control_plane, namespace):
    api = control_plane.api_client()
    ext = client.ApiextensionsV1Api(api)
    objs = client.CustomObjectsApi(api)
    ext.create_custom_resource_definition(CRD)
    try:
        wait_for(
            lambda: objs.list_namespaced_custom_object(GROUP, "v1", namespace, "widgets"),
            30,
            "the new CRD to be served",
        )

        def create(name, spec):
            body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}
            return objs.create_namespaced_custom_object(GROUP, "v1", namespace, "widgets", body)

        assert create("good", {"size": 3, "primary": 2})["spec"] == {"size": 3, "primary": 2}

        with pytest.raises(client.ApiException) as cel:
            create("bad-cel", {"size": 3, "primary": 5})
        assert cel.value.status == 422
        assert "spec.primary must be lower than spec.size" in cel.value.body

        with pytest.raises(client.ApiException) as schema:
            create("bad-range", {"size": 42})
        assert schema.value.status == 422
        assert "spec.size" in schema.value.body
        assert "less than or equal to 9" in schema.value.body

        names = [
            o["metadata"]["name"]
            for o in objs.list_namespaced_custom_object(GROUP, "v1", namespace, "widgets")["items"]
        ]
        assert names == ["good"]
    finally:
        ext.delete_custom_resource_definition(CRD["metadata"]["name"])


def test_statefulset_pods_are_created_by_the_controller_manager(control_plane, namespace):
    api = control_plane.api_client()
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    labels = {"app": "web"}
    apps.create_namespaced_stateful_set(
        namespace,
        {
            "metadata": {"name": "web"},
            "spec": {
                "serviceName": "web",
                "replicas": 2,
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "localhost/none:1"}]},
                },
            },
        },
    )
    pods = wait_for(
        lambda: (lambda p: p if len(p) == 2 else None)(
            core.list_namespaced_pod(namespace, label_selector="app=web").items
        ),
        60,
        "2 pods of StatefulSet web",
    )
    assert sorted(p.metadata.name for p in pods) == ["web-0", "web-1"]
    for p in pods:
        assert p.metadata.owner_references[0].kind == "StatefulSet"

    # The real scheduler looks at them too: with no node in this cluster it reports them
    # unschedulable (the node issue adds a kubelet).
    def unschedulable():
        conds = core.read_namespaced_pod("web-0", namespace).status.conditions or []
        return any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conds)

    wait_for(unschedulable, 60, "the scheduler to mark web-0 Unschedulable")


def test_owned_objects_are_garbage_collected(control_plane, namespace):
    core = client.CoreV1Api(control_plane.api_client())
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map(
        namespace,
        {
            "metadata": {
                "name": "owned",
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "owner",
                        "uid": owner.metadata.uid,
                    }
                ],
            },
        },
    )
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "bystander"}})
    core.delete_namespaced_config_map("owner", namespace)

    def owned_gone():
        names = {c.metadata.name for c in core.list_namespaced_config_map(namespace).items}
        return "owned" not in names and names

    names = wait_for(owned_gone, 60, "the garbage collector to delete 'owned'")
    assert "bystander" in names


def test_service_account_requests_follow_rbac(control_plane, namespace):
    api = control_plane.api_client()
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "reader"}})
    kubeconfig = control_plane.service_account_kubeconfig(namespace, "reader")
    as_sa = client.CoreV1Api(control_plane.api_client(kubeconfig))

    with pytest.raises(client.ApiException) as denied:
        as_sa.list_namespaced_secret(namespace)
    assert denied.value.status == 403
    assert f"system:serviceaccount:{namespace}:reader" in denied.value.body

    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "cm-reader"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "cm-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        },
    )
    wait_for(lambda: as_sa.list_namespaced_config_map(namespace), 30, "granted list to work")
    with pytest.raises(client.ApiException) as still_denied:
        as_sa.list_namespaced_secret(namespace)
    assert still_denied.value.status == 403


def test_helm_is_the_pinned_version_and_renders_a_chart(tmp_path):
    import subprocess

    from tests.support.controlplane import binary, versions

    helm = str(binary("helm"))
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [helm, "version", "--short"], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert out.startswith(versions()["HELM_VERSION"])
    subprocess.run([helm, "create", "demo"], cwd=tmp_path, check=True, env=env, capture_output=True)
    rendered = subprocess.run(
        [helm, "template", "r1", str(tmp_path / "demo"), "--kube-version", "1.34.0"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert "kind: Deployment" in rendered and "name: r1-demo" in rendered
