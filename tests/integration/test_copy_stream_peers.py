"""Who may read a MariaDB physical restore's copy (issue 53): the restore Job's copy server
(backup/copy_serving.py CopyServer) over real TLS, with certificates of one CA as a
cert-manager ClusterIssuer shared by every tenant would issue them. Only one of the new cluster's
instances - its certificate names it and it sends the new cluster's operator password - gets a
byte of the copy; another namespace's Pod (same issuer, right cluster name), another cluster of
the same namespace, and the right Pod with the wrong password get "ERR refused" and nothing else.
And the port itself: the NetworkPolicy the operator applies with the restore Job (as its own
ServiceAccount, on the real kube-apiserver) admits only the cluster's servers."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
from pathlib import Path

import pytest
from kubernetes import client

from mysql_operator import manifests as m
from mysql_operator import tls
from mysql_operator.api import parse
from mysql_operator.backup import xbstream
from mysql_operator.backup.restore_types import Donor
from mysql_operator.backup.copy_serving import RESTORE_SQL, CopyServer, Peers
from mysql_operator.k8s.cache import Reads
from mysql_operator.manifests.restore_jobs import restore_network_policy, restore_service
from mysql_operator import restore_gate as gate
from mysql_operator import restore_plan
from tests.support.operator_account import operator_api

OPERATOR_PASSWORD = "op\"er'ator\\pw of prod/db"
# a copy as mariadb-backup streams it: the data files, then its last file
COPY = xbstream.file_chunks("ibdata1", b"the tenant's rows " * 5000) + xbstream.file_chunks(
    "mariadb_backup_info", b"tool_name = mariadb-backup\n"
)
ACCOUNTS = b"CREATE USER IF NOT EXISTS `app`@`%` IDENTIFIED BY PASSWORD '*0123';\n"


def _cluster(name: str, namespace: str):
    return parse(
        {"metadata": {"name": name, "namespace": namespace}, "spec": {"instances": 3, "flavor": "mariadb"}}
    )


def _write(folder: Path, ca: tls.KeyPair, pair: tls.KeyPair) -> Path:
    folder.mkdir()
    for name, text in (("ca.crt", ca.cert_pem), ("tls.crt", pair.cert_pem), ("tls.key", pair.key_pem)):
        (folder / name).write_text(text)
    return folder


@pytest.fixture
def served(tmp_path):
    """The restore Job of cluster prod/db serving a copy on a local port, its certificates (one
    CA for every tenant) and a client presenting the certificate of `cluster` (an instance's,
    as the operator issues it: server_dns_names) that sends `line` and reads to the end."""
    now = dt.datetime.now(dt.timezone.utc)
    ca = tls.new_ca("shared issuer", now)
    job_tls = _write(tmp_path / "job", ca, tls.server_certificate(ca, ["localhost"], now))
    own = _cluster("db", "prod")
    peers = Peers(OPERATOR_PASSWORD, frozenset(m.pod_host(own, i) for i in range(3)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = CopyServer(
        Donor("localhost", port, tls_dir=str(job_tls)), peers, lambda: iter([COPY]), "OK 1 0-1-5\n", ACCOUNTS
    )

    def ask(cluster, line: str) -> bytes:
        folder = tmp_path / f"client-{cluster.namespace}-{cluster.name}-{len(list(tmp_path.iterdir()))}"
        pair = tls.server_certificate(ca, m.server_dns_names(cluster), now)
        client = _write(folder, ca, pair)
        ctx = ssl.create_default_context(cafile=str(client / "ca.crt"))
        ctx.load_cert_chain(str(client / "tls.crt"), str(client / "tls.key"))
        got = b""
        with socket.create_connection(("127.0.0.1", port), 10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as c:
                c.sendall(line.encode() + b"\n")
                while piece := c.recv(65536):
                    got += piece
        return got

    with server:
        yield server, ask


def test_only_an_instance_of_the_cluster_with_its_operator_password_gets_the_copy(served):
    server, ask = served
    # another tenant's Pod: a valid certificate of the same issuer for a cluster of the same name
    # in its own namespace, and even the right password (the line alone does not let it in)
    assert ask(_cluster("db", "tenant-b"), OPERATOR_PASSWORD) == b"ERR refused\n"
    assert "*.db-headless.tenant-b.svc" in server.last_error
    assert ask(_cluster("other", "prod"), OPERATOR_PASSWORD) == b"ERR refused\n"  # another cluster
    # one of the new cluster's instances that does not send its operator password
    for wrong in ("", "not-it", OPERATOR_PASSWORD + "x", OPERATOR_PASSWORD[:-1]):
        assert ask(_cluster("db", "prod"), wrong) == b"ERR refused\n"
    assert "operator password" in server.last_error and OPERATOR_PASSWORD not in server.last_error
    assert (server.refused, server.served) == (6, 0)

    got = ask(_cluster("db", "prod"), OPERATOR_PASSWORD)
    assert got == b"OK 1 0-1-5\n" + COPY + xbstream.file_chunks(RESTORE_SQL, ACCOUNTS)
    assert (server.refused, server.served) == (6, 1)


def test_the_operator_applies_the_restore_jobs_network_policy_as_its_own_account(control_plane, namespace):
    """The restore's start writes the Service and the NetworkPolicy (restore_gate: before the Job)
    with the chart's permissions: the API server accepts the policy, owned by the cluster, that
    admits to the Job's copy port only this cluster's servers of this namespace."""
    api = control_plane.api_client()
    core = client.CoreV1Api(api)
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "uid": owner.metadata.uid}}
    c = _cluster("shop", namespace)
    writes = [
        restore_plan.Apply(m.owned(restore_service(c), body)),
        restore_plan.Apply(m.owned(restore_network_policy(c), body)),
    ]
    as_operator = operator_api(control_plane, namespace)
    gate.carry_out(Reads(as_operator), Reads(as_operator), c, body, writes)

    p = client.NetworkingV1Api(api).read_namespaced_network_policy("shop-restore", namespace)
    assert [r.uid for r in p.metadata.owner_references] == [owner.metadata.uid]
    assert p.spec.pod_selector.match_labels == {
        "mysql.operator.dev/cluster": "shop",
        "app.kubernetes.io/component": "restore",
    }
    (rule,) = p.spec.ingress
    assert [(x.protocol, x.port) for x in rule.ports] == [("TCP", 3307)]
    assert [x.pod_selector.match_labels for x in rule._from] == [m.selector_labels(c)]
    assert all(x.namespace_selector is None for x in rule._from)  # this namespace only
