"""The restore Job's NetworkPolicy (manifests/restore_jobs.py restore_network_policy, issue 53),
enforced for real by the local cluster's kube-router firewall: a Pod labelled as a MariaDB
cluster's restore Job serves port 3307 (socat, as the Job's copy server would) with the Job's
tcpSocket readiness check. With the policy the operator applies beside the Job, the kubelet's
check still passes and one of the cluster's servers connects, while a Pod of another namespace
labelled as the same cluster's server, and a Pod of the same namespace that is no server of the
cluster, cannot open a connection (that other namespace's Pod does reach a Pod the policy does
not select: the refusal is the policy's). No operator is involved (nothing here is a
MySQLCluster)."""

from __future__ import annotations

import pytest
from kubernetes import client

from e2e.helpers import IMAGE, PULL, kubectl, scenario_namespace
from e2e.network_policy import enforcer_health
from mysql_operator.api import parse
from mysql_operator.manifests import selector_labels
from mysql_operator.manifests.restore_jobs import COMPONENT_RESTORE, restore_network_policy
from mysql_operator.manifests.tenant_jobs import CLUSTER_LABEL
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster


def _pod(core, ns: str, name: str, labels: dict, command: list[str], probe: dict | None = None) -> None:
    ctr = {"name": "c", "image": IMAGE, "imagePullPolicy": PULL["imagePullPolicy"], "command": command}
    if probe:
        ctr["readinessProbe"] = probe
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "imagePullSecrets": PULL["imagePullSecrets"],
                "containers": [ctr],
            },
        },
    )


def _running(core, ns: str, name: str) -> client.V1Pod:
    return wait_for(
        lambda: (p := core.read_namespaced_pod(name, ns)).status.phase == "Running" and p,
        120,
        f"Pod {ns}/{name} running",
    )


def test_only_the_clusters_servers_reach_the_restore_jobs_copy_port(local_cluster):
    enforcer_health()
    api = local_cluster.api_client()
    core = client.CoreV1Api(api)
    with scenario_namespace(api, "e2e-rnp") as ns, scenario_namespace(api, "e2e-rnp-other") as other:
        c = parse(
            {"metadata": {"name": "rnp", "namespace": ns}, "spec": {"instances": 2, "flavor": "mariadb"}}
        )
        client.NetworkingV1Api(api).create_namespaced_network_policy(ns, restore_network_policy(c))
        _pod(
            core,
            ns,
            "rnp-restore",
            {CLUSTER_LABEL: "rnp", "app.kubernetes.io/component": COMPONENT_RESTORE},
            ["socat", "TCP-LISTEN:3307,reuseaddr,fork", "SYSTEM:echo the-copy"],
            {"tcpSocket": {"port": 3307}, "periodSeconds": 2},  # as the restore Job's (restore_job)
        )
        idle = ["sleep", "infinity"]
        _pod(core, ns, "rnp-0", selector_labels(c), idle)
        # no server of the cluster; it serves the same port without any policy
        _pod(
            core,
            ns,
            "stranger",
            {"app": "something-else"},
            ["socat", "TCP-LISTEN:3307,reuseaddr,fork", "SYSTEM:echo open"],
        )
        _pod(core, other, "rnp-0", selector_labels(c), idle)  # the same cluster name, another namespace
        # the kubelet's check passes through the policy: the Job would be seen serving
        wait_for(
            lambda: any(
                cond.type == "Ready" and cond.status == "True"
                for cond in core.read_namespaced_pod("rnp-restore", ns).status.conditions or []
            ),
            120,
            "the restore Pod Ready (its tcpSocket check on 3307)",
        )
        restore_ip = core.read_namespaced_pod("rnp-restore", ns).status.pod_ip
        stranger_ip = _running(core, ns, "stranger").status.pod_ip

        def ask(namespace: str, pod: str, ip: str = restore_ip) -> str:
            _running(core, namespace, pod)
            r = kubectl(
                local_cluster.kubeconfig,
                *(
                    "-n",
                    namespace,
                    "exec",
                    pod,
                    "--",
                    "socat",
                    "-T",
                    "5",
                    "-",
                    f"TCP:{ip}:3307,connect-timeout=5",
                ),
                input="",
            )
            return r.stdout.strip() if r.returncode == 0 else f"no connection: {r.stderr.strip()[-200:]}"

        assert ask(ns, "rnp-0") == "the-copy"
        # (the other namespace reaches this one where no policy selects the Pod)
        assert wait_for(
            lambda: ask(other, "rnp-0", stranger_ip) == "open", 30, "a Pod without a policy reached"
        )
        assert ask(other, "rnp-0").startswith("no connection"), (
            "another namespace's Pod reached the copy port"
        )
        assert ask(ns, "stranger").startswith("no connection"), (
            "a Pod that is no server of the cluster got through"
        )
