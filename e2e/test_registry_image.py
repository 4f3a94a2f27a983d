"""The operator installed from a real registry (the one beside the local cluster: TLS, basic auth)
with a pull Secret, as a user installs it: `helm upgrade --set image.repository=... --set
imagePullSecrets[0].name=...`, the image pulled by containerd with the Secret's credentials
(`image.pullPolicy=Always`: pulled even when containerd has it). Every Pod the operator makes for a
cluster that names its pull Secret (spec.imagePullSecrets) runs the chart's image with that Secret:
an on-demand and a scheduled backup succeed, so no Pod falls back to a hard-coded image."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client

from e2e.conftest import OPERATOR_NAMESPACE, install_operator, push_image
from e2e.helpers import BACKUPS, GROUP, OPERATOR_IMAGE, VERSION, Cluster, cluster_spec, scenario_namespace
from e2e.operator_install import ready_operator_pods, pull_secret
from tests.support.wait import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.exclusive]  # disturbs the chart's operator

LEASE = "mysql-operator"  # the chart's full name for release mysql-operator
TAG = "0.2.0"


def _leading_on(api, image: str) -> bool:
    """The operator that holds the Lease runs `image` (a replaced one may still act until it has
    stopped and released it: what it creates meanwhile uses its own image, as it should)."""
    holder = (
        client.CoordinationV1Api(api).read_namespaced_lease(LEASE, OPERATOR_NAMESPACE).spec.holder_identity
    )
    pods = {p.metadata.name: p for p in ready_operator_pods(client.CoreV1Api(api))}
    return holder in pods and pods[holder].spec.containers[0].image == image


def test_backups_run_the_charts_image_with_the_clusters_pull_secret(
    local_cluster, operator_release, s3_beside_cluster, registry_beside_cluster
):
    api = local_cluster.api_client()
    core = client.CoreV1Api(api)
    pushed = push_image(registry_beside_cluster, "operator", "dbteam/mysql-operator")
    registry_image = pushed.rsplit(":", 1)[0]
    assert pushed == f"{registry_image}:{TAG}"
    pull_secret(core, OPERATOR_NAMESPACE, registry_beside_cluster)
    try:
        r = install_operator(
            local_cluster,
            "--set",
            f"image.repository={registry_image}",
            "--set",
            "image.pullPolicy=Always",
            "--set",
            "imagePullSecrets[0].name=regcred",
        )
        assert r.returncode == 0, r.stderr[-3000:]
        pods = wait_for(
            lambda: (
                (p := ready_operator_pods(core))
                and all(x.spec.containers[0].image == f"{registry_image}:{TAG}" for x in p)
                and p
            ),
            180,
            "the operator running the registry-named image",
        )
        assert [s.name for s in pods[0].spec.image_pull_secrets or []] == ["regcred"]
        wait_for(lambda: _leading_on(api, f"{registry_image}:{TAG}"), 120, "the new operator holds the Lease")

        with scenario_namespace(api, "e2e-reg") as ns:
            pull_secret(core, ns, registry_beside_cluster)
            bucket = f"e2e-{uuid.uuid4().hex[:10]}"
            s3_beside_cluster.create_bucket(bucket)
            core.create_namespaced_secret(
                ns,
                {
                    "metadata": {"name": "s3"},
                    "stringData": {
                        "AWS_ACCESS_KEY_ID": s3_beside_cluster.access_key,
                        "AWS_SECRET_ACCESS_KEY": s3_beside_cluster.secret_key,
                    },
                },
            )
            s3 = {
                "bucket": bucket,
                "prefix": "reg",
                "endpoint": s3_beside_cluster.endpoint,
                "region": "us-east-1",
                "forcePathStyle": True,
                "credentialsSecret": {"name": "s3"},
            }
            c = Cluster(api, ns, "reg").create(
                cluster_spec(
                    1,
                    "mariadb",
                    imagePullSecrets=[{"name": "regcred"}],
                    backup={"storage": {"s3": s3}, "schedule": "* * * * *"},
                )
            )
            c.wait_ready(300, instances=1)
            assert [s.name for s in c.pod(0).spec.image_pull_secrets or []] == ["regcred"]
            c.objs.create_namespaced_custom_object(
                GROUP,
                VERSION,
                ns,
                BACKUPS,
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "MySQLBackup",
                    "metadata": {"name": "manual"},
                    "spec": {"clusterRef": {"name": "reg"}},
                },
            )

            def phases() -> dict[str, str]:
                items = c.objs.list_namespaced_custom_object(GROUP, VERSION, ns, BACKUPS)["items"]
                return {b["metadata"]["name"]: (b.get("status") or {}).get("phase") for b in items}

            wait_for(lambda: phases().get("manual") in ("Succeeded", "Failed"), 300, "the on-demand backup")
            assert phases()["manual"] == "Succeeded", phases()
            wait_for(
                lambda: any(n != "manual" and p == "Succeeded" for n, p in phases().items()),
                200,
                "a scheduled backup Succeeded",
            )
            jobs = client.BatchV1Api(api).list_namespaced_job(ns).items
            assert jobs, "backup Jobs"
            for job in jobs:
                spec = job.spec.template.spec
                assert spec.containers[0].image == f"{registry_image}:{TAG}", job.metadata.name
                assert [s.name for s in spec.image_pull_secrets or []] == ["regcred"], job.metadata.name
    finally:
        r = install_operator(local_cluster)  # back to the release every other test uses
        assert r.returncode == 0, r.stderr[-3000:]
        wait_for(
            lambda: (
                (p := ready_operator_pods(core))
                and all(x.spec.containers[0].image == OPERATOR_IMAGE for x in p)
            ),
            180,
            "the operator back on the release's image",
        )
        wait_for(lambda: _leading_on(api, OPERATOR_IMAGE), 120, "it holds the Lease")
