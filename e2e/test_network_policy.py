"""The chart's NetworkPolicy (`networkPolicy.enabled`), enforced for real: the local cluster runs
kube-router's NetworkPolicy firewall (tests/support/cluster.py; the CNI bridge plugin enforces
none). With the chart's release upgraded to protect a fresh namespace, a 2-instance MariaDB
cluster there comes up Ready and replicates; a Pod without `mysql.operator.dev/client: "true"`
cannot open a connection to port 3306 while one with it runs SQL; the same Pod gets through once
labelled and is refused again once the label is gone; scaling and a backup Job still work.

The node itself (host processes, kubelet probes, this test's own SQL from the host) is always
admitted by kube-router, as by most implementations: what is checked from Pods is the policy.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest
from kubernetes import client

from e2e.conftest import OPERATOR_NAMESPACE, REPO
from e2e.helpers import (
    BACKUPS,
    GROUP,
    IMAGE,
    PULL,
    VERSION,
    Cluster,
    cluster_spec,
    kubectl,
    query,
    scenario_namespace,
    try_query,
)
from e2e.network_policy import enforcer_health
from tests.support.controlplane import binary
from tests.support.wait import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.exclusive]  # disturbs the chart's operator

RELEASE = "mysql-operator"  # the session's release (e2e/conftest.py operator_release)
CLIENT_LABEL = "mysql.operator.dev/client"
NAME = "np"
# mariadb client exit and messages: 2002/2003 "Can't connect" = no TCP connection; anything
# after the connection (1045 access denied, ...) would mean the policy let the packets through
CANT_CONNECT = "Can't connect"


def _helm(kubeconfig: str, *argv: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "KUBECONFIG": kubeconfig,
        "HELM_CACHE_HOME": "/var/tmp/mysqlop-helm/cache",
        "HELM_CONFIG_HOME": "/var/tmp/mysqlop-helm/config",
        "HELM_DATA_HOME": "/var/tmp/mysqlop-helm/data",
    }
    return subprocess.run(
        [str(binary("helm")), *argv, "--namespace", OPERATOR_NAMESPACE],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def _revision(kubeconfig: str) -> int:
    r = _helm(kubeconfig, "history", RELEASE, "--max", "1", "--output", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)[-1]["revision"]


@pytest.fixture(scope="module")
def protected_namespace(local_cluster, operator_release):
    """A fresh namespace the session's chart release protects (`helm upgrade` with
    networkPolicy.enabled and networkPolicy.namespaces=[it], the other values kept); the
    release is rolled back to its previous revision afterwards."""
    enforcer_health()
    api = local_cluster.api_client()
    with scenario_namespace(api, "e2e-np") as ns:
        before = _revision(local_cluster.kubeconfig)
        r = _helm(
            local_cluster.kubeconfig,
            "upgrade",
            RELEASE,
            str(REPO / "charts" / "mysql-operator"),
            "--reset-then-reuse-values",
            "--set",
            "networkPolicy.enabled=true",
            "--set",
            f"networkPolicy.namespaces[0]={ns}",
            "--wait",
            "--timeout",
            "180s",
        )
        assert r.returncode == 0, f"helm upgrade failed:\n{r.stdout}\n{r.stderr}"
        try:
            yield ns
        finally:
            r = _helm(
                local_cluster.kubeconfig, "rollback", RELEASE, str(before), "--wait", "--timeout", "180s"
            )
            assert r.returncode == 0, f"helm rollback failed:\n{r.stdout}\n{r.stderr}"


@pytest.fixture(scope="module")
def protected_cluster(local_cluster, protected_namespace):
    """A 2-instance cluster created after the policy: the operator sets it up through it."""
    c = Cluster(local_cluster.api_client(), protected_namespace, NAME).create(cluster_spec(2))
    c.wait_ready(300, instances=2)
    return c


def _client_pod(api, ns: str, name: str, labelled: bool) -> str:
    """A Pod with the MariaDB client, idle; the app password in MYSQL_PWD (never in argv)."""
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {
                "name": name,
                "labels": {"app": "np-client", **({CLIENT_LABEL: "true"} if labelled else {})},
            },
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "imagePullSecrets": PULL["imagePullSecrets"],
                "containers": [
                    {
                        "name": "client",
                        "image": IMAGE,
                        "imagePullPolicy": PULL["imagePullPolicy"],
                        "command": ["sleep", "infinity"],
                        "env": [
                            {
                                "name": "MYSQL_PWD",
                                "valueFrom": {
                                    "secretKeyRef": {"name": f"{NAME}-credentials", "key": "app-password"}
                                },
                            }
                        ],
                    }
                ],
            },
        },
    )
    wait_for(
        lambda: core.read_namespaced_pod(name, ns).status.phase == "Running",
        120,
        f"client Pod {name} Running",
    )
    return name


def _sql(local_cluster, ns: str, pod: str, host: str, sql: str) -> subprocess.CompletedProcess:
    """`mariadb` in the client Pod: one connection to host:3306 (3 s connect timeout)."""
    return kubectl(
        local_cluster.kubeconfig,
        "-n",
        ns,
        "exec",
        pod,
        "--",
        "mariadb",
        "--connect-timeout=3",
        "-h",
        host,
        "-P",
        "3306",
        "-u",
        "app",
        "--batch",
        "--skip-column-names",
        "-e",
        sql,
    )


def _connects(local_cluster, ns, pod, host) -> bool:
    r = _sql(local_cluster, ns, pod, host, "SELECT 1")
    return r.returncode == 0 and r.stdout.strip() == "1"


def _refused(local_cluster, ns, pod, host) -> str | None:
    """The client's error when no connection could be made, else None."""
    r = _sql(local_cluster, ns, pod, host, "SELECT 1")
    out = r.stdout + r.stderr
    return out.strip() if r.returncode != 0 and CANT_CONNECT in out else None


def test_the_chart_renders_the_policy_into_the_namespace(local_cluster, protected_namespace):
    net = client.NetworkingV1Api(local_cluster.api_client())
    (policy,) = net.list_namespaced_network_policy(protected_namespace).items
    assert policy.spec.pod_selector.match_labels == {
        "app.kubernetes.io/component": "database",
        "app.kubernetes.io/managed-by": "mysql-operator",
    }
    assert policy.spec.policy_types == ["Ingress"]
    rule, seed, progress, metrics = policy.spec.ingress
    assert [(p.protocol, p.port) for p in rule.ports] == [("TCP", 3306)]
    # MariaDB re-seeding and physical backups: copies go from one server to another of the
    # namespace or to its backup Jobs, nobody else
    assert [(p.protocol, p.port) for p in seed.ports] == [("TCP", 3307)]
    assert [peer.pod_selector.match_labels for peer in seed._from] == [
        policy.spec.pod_selector.match_labels,
        {"app.kubernetes.io/component": "backup", "app.kubernetes.io/managed-by": "mysql-operator"},
    ]
    # how far a MariaDB re-seed is: the operator's Pods only
    assert [(p.protocol, p.port) for p in progress.ports] == [("TCP", 3308)]
    assert [peer.namespace_selector.match_labels for peer in progress._from] == [
        {"kubernetes.io/metadata.name": OPERATOR_NAMESPACE}
    ]
    # the metrics sidecars: any source (networkPolicy.metricsFrom is empty by default)
    assert [(p.protocol, p.port) for p in metrics.ports] == [("TCP", 9104)] and not metrics._from


def test_only_labelled_clients_reach_3306(local_cluster, protected_cluster):
    c, ns, api = protected_cluster, protected_cluster.namespace, protected_cluster.api
    suffix = uuid.uuid4().hex[:4]
    allowed = _client_pod(api, ns, f"labelled-{suffix}", labelled=True)
    other = _client_pod(api, ns, f"unlabelled-{suffix}", labelled=False)
    rw = c.service_ip("rw")
    servers = [p.status.pod_ip for p in c.pods()]
    assert len(servers) == 2

    # the labelled client runs SQL through the -rw Service and on each server's Pod address
    for host in [rw, *servers]:
        wait_for(
            lambda: _connects(local_cluster, ns, allowed, host),
            60,
            f"the labelled client connecting to {host}:3306",
            describe=lambda: _sql(local_cluster, ns, allowed, host, "SELECT 1").stderr,
        )
    # the unlabelled one gets no connection at all (not an authentication error)
    for host in [rw, *servers]:
        err = _refused(local_cluster, ns, other, host)
        assert err, f"{other} reached {host}:3306: " + _sql(local_cluster, ns, other, host, "SELECT 1").stderr
        print(f"{other} -> {host}:3306: {err}")

    # the label is what the policy admits: the same Pod gets through once labelled ...
    core = client.CoreV1Api(api)
    core.patch_namespaced_pod(other, ns, {"metadata": {"labels": {CLIENT_LABEL: "true"}}})
    wait_for(lambda: _connects(local_cluster, ns, other, rw), 60, f"{other} connecting once labelled")
    # ... and is refused again once the label is removed
    core.patch_namespaced_pod(other, ns, {"metadata": {"labels": {CLIENT_LABEL: None}}})
    wait_for(lambda: _refused(local_cluster, ns, other, rw), 60, f"{other} refused once unlabelled")


def test_replication_and_the_operator_work_through_the_policy(local_cluster, protected_cluster):
    c, ns = protected_cluster, protected_cluster.namespace
    roles = c.roles()
    assert sorted(roles.values()) == ["primary", "replica"], roles
    allowed = _client_pod(c.api, ns, f"writer-{uuid.uuid4().hex[:4]}", labelled=True)
    rw = c.service_ip("rw")
    wait_for(lambda: _connects(local_cluster, ns, allowed, rw), 60, "the labelled client on -rw")
    r = _sql(
        local_cluster,
        ns,
        allowed,
        rw,
        "CREATE TABLE app.np (id INT PRIMARY KEY); INSERT INTO app.np VALUES (1), (2), (3)",
    )
    assert r.returncode == 0, r.stderr

    # the replica receives the rows over its own connection to the primary (Pod to Pod, 3306)
    replica = next(name for name, role in roles.items() if role == "replica")
    replica_ip = c.pod(replica).status.pod_ip
    wait_for(
        lambda: (
            _sql(local_cluster, ns, allowed, replica_ip, "SELECT COUNT(*) FROM app.np").stdout.strip() == "3"
        ),
        60,
        f"the rows on the replica {replica}",
        describe=c.describe,
    )

    # the operator (a Pod in another namespace) still manages the cluster: a third instance
    # is created, joins as a replica with the data and the cluster is Ready again
    c.patch_spec({"instances": 3})
    c.wait_ready(300, "Ready with 3 instances", instances=3)
    third = c.pod(2).status.pod_ip
    wait_for(
        lambda: _sql(local_cluster, ns, allowed, third, "SELECT COUNT(*) FROM app.np").stdout.strip() == "3",
        60,
        "the rows on the new instance",
        describe=c.describe,
    )
    assert sorted(c.roles().values()) == ["primary", "replica", "replica"]


def test_a_backup_job_reaches_the_servers(local_cluster, protected_cluster, s3_beside_cluster):
    c, ns = protected_cluster, protected_cluster.namespace
    bucket = f"e2e-np-{uuid.uuid4().hex[:8]}"
    s3_beside_cluster.create_bucket(bucket)
    c.core.create_namespaced_secret(
        ns,
        {
            "metadata": {"name": "s3"},
            "stringData": {
                "AWS_ACCESS_KEY_ID": s3_beside_cluster.access_key,
                "AWS_SECRET_ACCESS_KEY": s3_beside_cluster.secret_key,
            },
        },
    )
    c.patch_spec(
        {
            "backup": {
                "storage": {
                    "s3": {
                        "bucket": bucket,
                        "prefix": "np",
                        "endpoint": s3_beside_cluster.endpoint,
                        "region": "us-east-1",
                        "forcePathStyle": True,
                        "credentialsSecret": {"name": "s3"},
                    }
                }
            }
        }
    )
    c.wait_ready(120, "Ready with backup storage")
    c.objs.create_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        BACKUPS,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MySQLBackup",
            "metadata": {"name": "np-1"},
            "spec": {"clusterRef": {"name": NAME}},
        },
    )

    def phase():
        b = c.objs.get_namespaced_custom_object(GROUP, VERSION, ns, BACKUPS, "np-1")
        return (b.get("status") or {}).get("phase") in ("Succeeded", "Failed") and b["status"]

    status = wait_for(phase, 300, "MySQLBackup np-1 finished", describe=c.describe)
    assert status["phase"] == "Succeeded", status.get("message")
    assert status.get("sizeBytes", 0) > 0


def test_the_host_still_reaches_the_servers(local_cluster, protected_cluster):
    """What the other tests rely on: SQL from the host (the node) is not subject to the policy."""
    c = protected_cluster
    rw, pw = c.service_ip("rw"), c.password()
    wait_for(lambda: try_query(rw, "app", pw, "SELECT 1"), 60, "-rw answering the host")
    assert query(rw, "app", pw, "SELECT 1") == ((1,),)
