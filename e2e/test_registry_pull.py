"""A database image pulled from a real registry (the one beside the local cluster: TLS, basic auth),
as a user's private registry is: a MySQLCluster that names the image but not the pull Secret says
why it does not start, in its status, in the kubelet's words (the registry refused the pull); once
`spec.imagePullSecrets` names a Secret with the registry's credentials the same cluster starts and
becomes Ready, without deleting anything by hand."""

from __future__ import annotations

import time

import pytest

from e2e.conftest import push_image
from e2e.helpers import GROUP, VERSION, Cluster, cluster_spec, record
from e2e.operator_install import pull_secret
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster


def waiting(c: Cluster) -> str:
    """What the status says about instance 0 not running, or ""."""
    for inst in c.status().get("instances") or []:
        if inst.get("name") == f"{c.name}-0":
            return inst.get("waiting") or ""
    return ""


def test_a_pull_refused_for_want_of_a_secret_is_reported_and_the_secret_fixes_it(
    local_cluster, operator_release, scenario_namespace, registry_beside_cluster
):
    api, ns = local_cluster.api_client(), scenario_namespace
    image = push_image(registry_beside_cluster, "mariadb", "dbteam/mariadb")
    c = Cluster(api, ns, "priv")
    # Always: pulled with this Pod's credentials even when containerd holds the image already;
    # no pull Secret (every other e2e cluster names the namespace's PULL_SECRET)
    c.create(cluster_spec(1, "mariadb", image=image, imagePullPolicy="Always", imagePullSecrets=[]))
    wait_for(
        lambda: "ErrImagePull" in waiting(c) or "ImagePullBackOff" in waiting(c),
        180,
        "the status saying the image cannot be pulled",
        describe=c.describe,
    )
    said = waiting(c)
    print(f"\nstatus.instances[0].waiting: {said}")
    # e.g. `seed ErrImagePull: failed to pull and unpack image "<image>": ... 401 Unauthorized`
    if "ErrImagePull" in said:  # the back-off's message is generic; the pull's names the cause
        assert image in said and "401 Unauthorized" in said, said
    assert c.status().get("phase") != "Ready"

    pull_secret(c.core, ns, registry_beside_cluster, name="private-registry")
    started = time.monotonic()
    c.objs.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        "mysqlclusters",
        "priv",
        {"spec": {"imagePullSecrets": [{"name": "private-registry"}]}},
    )
    c.wait_ready(300, instances=1)
    record(
        "pull Secret added -> cluster Ready (image from the registry)",
        time.monotonic() - started,
        scenario="19",
    )
    pod = c.pod(0)
    assert [s.name for s in pod.spec.image_pull_secrets or []] == ["private-registry"]
    main = next(s for s in pod.status.container_statuses if s.name == pod.spec.containers[0].name)
    assert main.image == image or main.image.endswith(image.split("/", 1)[1]), (main.image, image)
    assert waiting(c) == ""
