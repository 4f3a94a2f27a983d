"""The operator installed by its chart runs as a Pod from the image built from the Dockerfile,
pulled from the registry beside the cluster."""

from __future__ import annotations

import pytest
from kubernetes import client

from e2e.conftest import OPERATOR_NAMESPACE, restart_deployment
from e2e.helpers import OPERATOR_IMAGE
from e2e.operator_install import delete_test_pod, helm_test
from mysql_operator.k8s.crds import DIGEST_ANNOTATION
from tests.support.wait import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.exclusive]  # disturbs the chart's operator


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
        selector = ",".join(f"{k}={v}" for k, v in d.spec.selector.match_labels.items())
        pods = [
            p
            for p in core.list_namespaced_pod(OPERATOR_NAMESPACE, label_selector=selector).items
            if p.metadata.deletion_timestamp is None
        ]
        return pods[0] if len(pods) == 1 else None

    def describe() -> str:
        d = apps.read_namespaced_deployment(operator_release, OPERATOR_NAMESPACE)
        pods = core.list_namespaced_pod(OPERATOR_NAMESPACE).items
        return f"{d.status}\n" + "\n".join(
            f"{p.metadata.name} {p.metadata.labels} {p.status.phase}" for p in pods
        )

    pod = wait_for(
        settled, 180, "the chart's operator Deployment: one available, up-to-date Pod", describe=describe
    )
    container = pod.spec.containers[0]
    assert container.image == OPERATOR_IMAGE  # pulled from the registry beside the cluster
    # what the node runs is what the registry serves under that tag, by digest
    repo, tag = OPERATOR_IMAGE.split("/", 1)[1].rsplit(":", 1)
    digest = local_cluster.registry().manifest_digest(repo, tag)
    assert pod.status.container_statuses[0].image_id.endswith(f"@{digest}"), pod.status.container_statuses[0]
    assert pod.status.container_statuses[0].ready
    assert pod.status.container_statuses[0].restart_count == 0
    assert container.security_context.run_as_non_root is True


def test_helm_test_checks_the_operator_and_that_the_crds_are_the_charts(local_cluster, operator_release):
    """`helm test` passes on the install; a CRD that is not the chart's (here: its digest
    annotation changed by hand, as an older CRD would have none) fails it, naming the CRD; the
    operator applies the chart's CRDs at its start: restarted, it makes `helm test` pass again."""
    api = local_cluster.api_client()
    apps, ext = client.AppsV1Api(api), client.ApiextensionsV1Api(api)
    name = "mysqlbackups.mysql.operator.dev"

    def stamped() -> str | None:
        return (ext.read_custom_resource_definition(name).metadata.annotations or {}).get(DIGEST_ANNOTATION)

    wait_for(stamped, 120, "the operator stamped its CRDs")
    try:
        _helm_test_runs(local_cluster, apps, ext, operator_release, name, stamped)
    finally:
        delete_test_pod(api, operator_release)


def _helm_test_runs(local_cluster, apps, ext, operator_release, name, stamped) -> None:
    r = helm_test(local_cluster)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "the 7 CRDs are this chart's" in r.stdout and "holds and renews the Lease" in r.stdout, r.stdout

    digest = stamped()
    ext.patch_custom_resource_definition(name, {"metadata": {"annotations": {DIGEST_ANNOTATION: "0" * 64}}})
    r = helm_test(local_cluster)
    assert r.returncode != 0
    assert f"CRD {name} is not this chart's" in r.stdout, r.stdout[-3000:]

    dep = apps.read_namespaced_deployment(operator_release, OPERATOR_NAMESPACE)
    restart_deployment(apps, dep)
    wait_for(lambda: stamped() == digest, 120, "the restarted operator applied the chart's CRD")
    r = helm_test(local_cluster)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
