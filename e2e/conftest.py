"""The local one-node cluster (tests/support/cluster.py), or any cluster through KUBECONFIG later."""

from __future__ import annotations

import json
import os
import sys
import uuid

import pytest

from tests.support import cluster as cluster_mod
from tests.support.controlplane import missing_binaries


class ClusterHandle:
    """What tests need from a running local cluster: API access and the containerd socket."""

    def __init__(self, kubeconfig: str, containerd_socket: str, logs_dir: str):
        self.kubeconfig = kubeconfig
        self.containerd_socket = containerd_socket
        self.logs_dir = logs_dir

    def api_client(self):
        from kubernetes import config

        return config.new_client_from_config(config_file=self.kubeconfig)


def _running_state() -> dict | None:
    state = cluster_mod.state_dir() / "state.json"
    if not state.exists():
        return None
    s = json.loads(state.read_text())
    try:
        os.kill(s["pid"], 0)
    except ProcessLookupError:
        return None
    return s


@pytest.fixture(scope="session")
def local_cluster():
    """Reuse a cluster started by `make cluster-up`, else start one for this session."""
    missing = missing_binaries() + [
        b for b in ("kubelet", "kube-proxy", "coredns", "local-path-provisioner")
        if not _has_binary(b)
    ]
    if missing:
        pytest.fail(f"cluster binaries missing: {missing}; run `make binaries node-binaries`")
    s = _running_state()
    if s is not None:
        print(f"\nreusing the local cluster of pid {s['pid']}", file=sys.stderr)
        yield ClusterHandle(s["kubeconfig"], s["containerd_socket"], s["logs_dir"])
        return
    c = cluster_mod.Cluster()
    try:
        c.up()
    except Exception as e:  # noqa: BLE001 - the message carries the component logs
        pytest.fail(f"local cluster failed to start: {e}")
    print(f"\nlocal cluster up: {json.dumps(c.timings)}", file=sys.stderr)
    yield ClusterHandle(str(c.cp.admin_kubeconfig), str(c.containerd.socket), str(c.cp.logs_dir))
    c.down()


def _has_binary(name: str) -> bool:
    from tests.support.controlplane import binary

    try:
        binary(name)
        return True
    except FileNotFoundError:
        return False


@pytest.fixture
def kube_namespace(local_cluster):
    from kubernetes import client

    core = client.CoreV1Api(local_cluster.api_client())
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)
