"""The operator's ServiceAccount in a test namespace, bound to exactly the rules the chart grants a
namespaced install (a Role of `namespaced_rules()` there, a ClusterRole of `CLUSTER_SCOPE_RULES`):
code run with it fails on a permission the chart lacks, and what it asks is in the API server's
audit log (tests/support/audit.py) as the operator's."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client

from mysql_operator.k8s.rbac import CLUSTER_SCOPE_RULES, namespaced_rules
from tests.support.audit import OPERATOR_SERVICE_ACCOUNT


def operator_kubeconfig(control_plane, ns: str) -> Path:
    """Creates the account and its bindings in `ns`; a kubeconfig that authenticates as it."""
    api = control_plane.api_client()
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    name = OPERATOR_SERVICE_ACCOUNT
    subjects = [{"kind": "ServiceAccount", "name": name, "namespace": ns}]
    core.create_namespaced_service_account(ns, {"metadata": {"name": name}})
    rbac.create_namespaced_role(ns, {"metadata": {"name": name}, "rules": namespaced_rules()})
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subjects,
        },
    )
    cluster_role = f"{name}-{ns}"
    rbac.create_cluster_role({"metadata": {"name": cluster_role}, "rules": CLUSTER_SCOPE_RULES})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": cluster_role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
            "subjects": subjects,
        }
    )
    return control_plane.service_account_kubeconfig(ns, name)


def operator_api(control_plane, ns: str):
    """An API client that is the operator's ServiceAccount in `ns` (see operator_kubeconfig)."""
    from mysql_operator.k8s.client import api_client

    return api_client(str(operator_kubeconfig(control_plane, ns)))
