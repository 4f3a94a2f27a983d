"""The operator installed by its chart runs as a Pod from the image built from the Dockerfile."""

from __future__ import annotations

import pytest
from kubernetes import client

from e2e.conftest import OPERATOR_NAMESPACE
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster


def test_chart_installs_a_running_operator(local_cluster, operator_release):
    api = local_cluster.api_client()
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)

    # earlier tests may have rolled the release (an upgrade and its rollback, a pause): wait until
    # exactly one up-to-date Pod is available, and check that one
    def settled():
        d = apps.read_namespaced_deployment(operator_release, OPERATOR_NAMESPACE)
        st = d.status
        if (
            (st.observed_generation or 0) < d.metadata.generation
            or st.available_replicas != 1
            or st.updated_replicas != 1
            or st.replicas != 1
        ):
            return None
        pods = [
            p
            for p in core.list_namespaced_pod(OPERATOR_NAMESPACE).items
            if p.metadata.deletion_timestamp is None
        ]
        return pods[0] if len(pods) == 1 else None

    pod = wait_for(settled, 180, "the chart's operator Deployment: one available, up-to-date Pod")
    container = pod.spec.containers[0]
    assert container.image.startswith("localhost/mysql-operator:")
    assert pod.status.container_statuses[0].ready
    assert pod.status.container_statuses[0].restart_count == 0
    assert container.security_context.run_as_non_root is True
