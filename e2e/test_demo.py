"""`make demo` as a new user runs it (its second half: `make demo` first starts the cluster this
session already has): `python -m e2e.demo` installs the chart from the registry beside the cluster
(oci://), creates the 3-instance MySQL 9.7 cluster of examples/local-demo-mysql.yaml, writes and
reads a row through the Services, backs it up to S3 and shows `kubectl get`; it must exit 0. Then
`make demo FLAVOR=mariadb` and back to MySQL on the same cluster: each replaces the other.
Measured: its duration on a warm machine."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from kubernetes import client

from e2e.conftest import REPO, install_operator
from e2e.demo import STATE_ENV
from e2e.helpers import delete_clusters, record
from tests.support import cluster as cluster_mod

pytestmark = [pytest.mark.cluster, pytest.mark.exclusive]  # disturbs the chart's operator
NS = "demo"  # e2e/demo.py's namespace


def demo(flavor: str) -> subprocess.CompletedProcess:
    """`python -m e2e.demo` as `make demo FLAVOR=...` runs it; it must exit 0 after a backup."""
    r = subprocess.run(
        [sys.executable, "-m", "e2e.demo"],
        cwd=REPO,
        # `make demo` finds a cluster `make cluster-up` started; this one may be the session's
        env={**os.environ, "FLAVOR": flavor, STATE_ENV: str(cluster_mod.state_dir() / "state.json")},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "demo done in" in r.stdout, r.stdout[-2000:]
    assert "Succeeded" in r.stdout, "the backup"
    return r


def test_make_demo_runs_to_a_backup(local_cluster, operator_release):
    api = local_cluster.api_client()
    core = client.CoreV1Api(api)
    started = time.monotonic()
    try:
        r = demo("mysql")
        record("make demo (cluster up already), warm", time.monotonic() - started, scenario="13")
        assert "helm upgrade --install mysql-operator oci://" in r.stdout, "installed from the registry"
        # `make demo FLAVOR=mariadb`, and back, on the same cluster: the other flavor's demo goes
        # first (its flavor cannot change; its retained volumes would be adopted)
        for flavor, before in (("mariadb", "mysql"), ("mysql", "mariadb")):
            r = demo(flavor)
            assert f"the {before} demo of an earlier `make demo` goes first" in r.stdout, r.stdout[-2000:]
    finally:
        delete_clusters(api, NS)
        try:
            core.delete_namespace(NS)
        except client.ApiException as e:
            if e.status != 404:
                raise
        # the demo upgraded the session's release with the demo's values (metrics off): the tests
        # after this one get theirs back
        back = install_operator(local_cluster)
        assert back.returncode == 0, back.stderr[-3000:]
