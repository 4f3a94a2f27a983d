"""The operator installed on the local cluster: `helm test`, its ready Pods, a registry's pull Secret."""

from __future__ import annotations

import subprocess

from kubernetes import client

from e2e.conftest import OPERATOR_NAMESPACE, helm_env


def helm_test(local_cluster) -> subprocess.CompletedProcess:
    from tests.support.controlplane import binary

    argv = [str(binary("helm")), "test", "mysql-operator", "--namespace", OPERATOR_NAMESPACE, "--logs"]
    return subprocess.run(argv, capture_output=True, text=True, env=helm_env(local_cluster), timeout=300)


def delete_test_pod(api, operator_release: str) -> None:
    """`helm test` keeps its Pod (for `--logs`); other tests count the namespace's Pods."""
    try:
        client.CoreV1Api(api).delete_namespaced_pod(f"{operator_release}-check-install", OPERATOR_NAMESPACE)
    except client.ApiException as e:
        if e.status != 404:
            raise


def pull_secret(core, ns: str, registry, name: str = "regcred") -> None:
    """A kubernetes.io/dockerconfigjson Secret with the registry's credentials (replacing one of
    that name)."""
    try:
        core.delete_namespaced_secret(name, ns)
    except client.ApiException as e:
        if e.status != 404:
            raise
    core.create_namespaced_secret(ns, registry.pull_secret(name))


def ready_operator_pods(core) -> list:
    return [
        p
        for p in core.list_namespaced_pod(OPERATOR_NAMESPACE).items
        if not p.metadata.deletion_timestamp
        and p.status.container_statuses
        and all(s.ready for s in p.status.container_statuses)
    ]
