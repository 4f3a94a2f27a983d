"""The operator installed by its chart runs as a Pod from the image built from the Dockerfile."""

from __future__ import annotations

import pytest
from kubernetes import client

from e2e.conftest import OPERATOR_NAMESPACE

pytestmark = pytest.mark.cluster


def test_chart_installs_a_running_operator(local_cluster, operator_release):
    api = local_cluster.api_client()
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    dep = apps.read_namespaced_deployment(operator_release, OPERATOR_NAMESPACE)
    assert dep.status.available_replicas == 1
    pod = core.list_namespaced_pod(OPERATOR_NAMESPACE).items[0]
    container = pod.spec.containers[0]
    assert container.image.startswith("localhost/mysql-operator:")
    assert pod.status.container_statuses[0].ready
    assert pod.status.container_statuses[0].restart_count == 0
    assert container.security_context.run_as_non_root is True
