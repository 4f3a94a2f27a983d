"""A release as a user meets it: `helm install oci://.../mysql-operator` with no values at all.

hack/release.sh (what .github/workflows/release.yml runs on a tag) builds the release's images,
pushes them and the chart to a public registry beside the cluster (TLS, anonymous pulls, as
ghcr.io's public packages are; the node's containerd trusts its CA, nothing else), and the chart's
defaults name them. The chart's own operator is paused; the released chart, installed with no
`--set` and no values file, runs its operator from the released image, and a MySQLCluster (the
user's own server image, as every e2e cluster) becomes Ready and serves a written row from its
replica, its metrics sidecar on the released exporter image."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from kubernetes import client

from e2e.conftest import HELM_HOMES, helm_env, pause_chart_operator, resume_chart_operator
from e2e.helpers import Cluster, cluster_spec, query, record, scenario_namespace, stopwatch, try_query
from tests.support import cluster as cluster_mod
from tests.support.chart_oci import chart_version
from tests.support.controlplane import binary
from tests.support.registry import Registry
from tests.support.wait import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.exclusive]  # disturbs the chart's operator

REPO = Path(__file__).resolve().parents[1]
RELEASE_NAMESPACE = "mysqlop-released"


def _run(argv: list[str], env: dict, timeout: float = 1200) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(argv[:3])} exited {r.returncode}: {r.stderr[-3000:]}"
    return r.stdout


@pytest.fixture
def public_registry(local_cluster, tmp_path):
    """A registry at the node's address whose pulls need no credentials, trusted by containerd."""
    reg = Registry(tmp_path / "public", host=cluster_mod.NODE_IP, public=True).start()
    certs = Path(cluster_mod.written_state()["containerd_socket"]).parent / "certs.d" / reg.address
    certs.mkdir(parents=True, exist_ok=True)
    (certs / "hosts.toml").write_text(reg.hosts_toml())
    try:
        yield reg
    finally:
        shutil.rmtree(certs, ignore_errors=True)
        reg.stop()


def test_the_released_chart_installs_with_no_values_and_runs_a_cluster(
    local_cluster, operator_release, public_registry, tmp_path
):
    helm = binary("helm")
    (tmp_path / "certs").mkdir()
    shutil.copy(public_registry.ca_file, tmp_path / "certs" / "ca.crt")
    env = {
        **os.environ,
        **HELM_HOMES,
        "PATH": f"{helm.parent}:{os.environ['PATH']}",
        "RELEASE_CERT_DIR": str(tmp_path / "certs"),
    }
    owner = f"{public_registry.address}/mysql-operator-project"
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
    elapsed = stopwatch()
    _run([str(REPO / "hack/release.sh"), "build", str(tmp_path / arch)], env)
    _run([str(REPO / "hack/release.sh"), "publish", owner, str(tmp_path / arch)], env)
    chart = _run([str(REPO / "hack/release.sh"), "chart", owner, str(tmp_path / "chart")], env).strip()
    record("the release's images and chart built and published (warm image cache)", elapsed(), scenario="R")
    version = chart_version()
    assert chart.startswith(f"oci://{owner}/charts/mysql-operator:{version}@sha256:"), chart

    api = local_cluster.api_client()
    apps = client.AppsV1Api(api)
    pause_chart_operator(local_cluster)  # one operator serves a namespace; resumed at teardown
    install = [
        str(helm),
        "install",
        "released",
        f"oci://{owner}/charts/mysql-operator",
        "--version",
        version,
        "--namespace",
        RELEASE_NAMESPACE,
        "--create-namespace",
        "--ca-file",
        str(tmp_path / "certs" / "ca.crt"),  # how helm trusts the registry: no value of the chart
        "--wait",
        "--timeout",
        "180s",
    ]
    elapsed = stopwatch()
    try:
        _run(install, helm_env(local_cluster), timeout=240)
        record(
            "helm install of the released chart, no values, to its operator available",
            elapsed(),
            scenario="R",
        )
        (dep,) = apps.list_namespaced_deployment(RELEASE_NAMESPACE).items
        (operator,) = dep.spec.template.spec.containers
        assert operator.image == f"{owner}/mysql-operator:{version}", operator.image
        assert not dep.spec.template.spec.image_pull_secrets, "pulled with no credentials"
        with scenario_namespace(api, "e2e-rel") as ns:
            c = Cluster(api, ns, "rel")
            elapsed = stopwatch()
            c.create(cluster_spec(2, "mysql"))
            c.wait_ready(300, instances=2)
            record("a 2-instance MySQL cluster Ready under the released operator", elapsed(), scenario="R")
            rw, pw = c.service_ip("rw"), c.password()
            wait_for(lambda: try_query(rw, "app", pw, "SELECT 1"), 60, "-rw answering")
            query(rw, "app", pw, "CREATE TABLE app.hello (id INT PRIMARY KEY, said VARCHAR(32))")
            query(rw, "app", pw, "INSERT INTO app.hello VALUES (1, 'from the release')")
            replica = c.pod(1).status.pod_ip
            wait_for(
                lambda: (
                    try_query(replica, "app", pw, "SELECT said FROM app.hello") == (("from the release",),)
                ),
                60,
                "the row on the replica",
            )
            images = {x.name: x.image for x in c.pod(0).spec.containers}
            assert images["exporter"].startswith(f"{owner}/mysqld-exporter:"), images
            # the released operator is the one that made it (the chart's own is paused)
            core = client.CoreV1Api(api)
            (pod,) = core.list_namespaced_pod(RELEASE_NAMESPACE).items
            log = core.read_namespaced_pod_log(pod.metadata.name, RELEASE_NAMESPACE)
            assert f"{ns}/rel decision Bootstrap" in log, log[-3000:]
    finally:
        subprocess.run(
            [
                str(helm),
                "uninstall",
                "released",
                "--namespace",
                RELEASE_NAMESPACE,
                "--wait",
                "--timeout",
                "120s",
            ],
            capture_output=True,
            env=helm_env(local_cluster),
        )
        client.CoreV1Api(api).delete_namespace(RELEASE_NAMESPACE)
        resume_chart_operator()
