"""The operator's Kubernetes client never waits forever: an API server that accepts a connection
and never answers (hung, or behind a load balancer whose backend hung) fails the call, so a
cluster's lock is released and the next pass runs. A real socket on loopback plays that server."""

from __future__ import annotations

import socket
import threading

import pytest
import urllib3
import yaml
from kubernetes import client

from mysql_operator.k8s.client import api_client


@pytest.fixture
def silent_server():
    """Accepts connections on loopback, reads nothing, answers nothing."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join()
    for c in held:
        c.close()
    srv.close()


def _kubeconfig(tmp_path, port: int):
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "hung", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "hung", "context": {"cluster": "hung", "user": "u"}}],
                "current-context": "hung",
            }
        )
    )
    return str(path)


def _call_in_thread(fn):
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = fn()
        except Exception as e:  # noqa: BLE001 - what the call raised is the result
            outcome["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(120)  # a liveness bound: without a timeout the call never returns
    assert not t.is_alive(), "the call still waits for an API server that never answers"
    return outcome


def test_a_call_to_an_api_server_that_never_answers_fails(tmp_path, silent_server):
    api = api_client(_kubeconfig(tmp_path, silent_server), timeout=(1.0, 0.2))
    outcome = _call_in_thread(lambda: client.CoreV1Api(api).list_namespace())
    assert isinstance(outcome.get("error"), urllib3.exceptions.HTTPError), outcome


def test_a_call_that_sets_its_own_timeout_keeps_it(tmp_path, silent_server):
    api = api_client(_kubeconfig(tmp_path, silent_server), timeout=(1.0, 3600.0))
    outcome = _call_in_thread(lambda: client.CoreV1Api(api).list_namespace(_request_timeout=(1.0, 0.2)))
    assert isinstance(outcome.get("error"), urllib3.exceptions.HTTPError), outcome
