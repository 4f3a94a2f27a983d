"""The cluster's TLS Secrets on the real kube-apiserver: created once, the CA kept, the server
certificate renewed when due, applications' bundle without any key."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from cryptography import x509
from kubernetes import client

from mysql_operator import certificates
from mysql_operator import restore_gate as gate
from mysql_operator.k8s.cache import Reads
from mysql_operator.api import parse

NOW = dt.datetime.now(dt.timezone.utc)


def cluster(namespace, validity=600):
    return parse(
        {
            "apiVersion": "mysql.operator.dev/v1alpha1",
            "kind": "MySQLCluster",
            "metadata": {"name": "shop", "namespace": namespace},
            "spec": {"flavor": "mariadb", "instances": 3, "tls": {"certificateValiditySeconds": validity}},
        }
    )


def ensure(k8s: Reads, c, owner, now, new_cluster: bool = False) -> certificates.TLSState:
    """One check of the certificate as tls_upkeep.TLSUpkeep makes it: read (nothing for a new
    cluster), plan, write; a Secret to create that exists already is read at the next check."""
    stored = None if new_cluster else certificates.read_stored(k8s, c)
    state, writes = certificates.plan_secrets(c, owner, now, stored)
    if certificates.write_secrets(k8s, writes):
        return state
    return ensure(k8s, c, owner, now)


def data(core, ns, name):
    return {k: base64.b64decode(v).decode() for k, v in core.read_namespaced_secret(name, ns).data.items()}


@pytest.mark.parametrize("new_cluster", [False, True], ids=["read-first", "created-first"])
def test_secrets_created_once_renewed_when_due_and_the_ca_kept(control_plane, namespace, new_cluster):
    """`new_cluster` (no status yet): created without a read first, and never over existing ones."""
    api = control_plane.api_client()
    k8s = Reads(api)
    core = client.CoreV1Api(api)
    cm = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "uid": cm.metadata.uid}}
    c = cluster(namespace)

    first = ensure(k8s, c, owner, NOW, new_cluster)
    assert first.issued == "no server certificate yet"
    ca, tls, bundle = (data(core, namespace, n) for n in ("shop-ca", "shop-tls", "shop-ca-bundle"))
    assert set(ca) == {"ca.crt", "ca.key"} and set(bundle) == {"ca.crt"} and bundle["ca.crt"] == ca["ca.crt"]
    assert set(tls) == {"tls.crt", "tls.key", "ca.crt"} and tls["ca.crt"] == ca["ca.crt"]
    assert core.read_namespaced_secret("shop-tls", namespace).type == "kubernetes.io/tls"
    cert = x509.load_pem_x509_certificate(tls["tls.crt"].encode())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    assert f"*.shop-headless.{namespace}.svc" in names and f"shop-rw.{namespace}.svc" in names
    for name in ("shop-ca", "shop-tls", "shop-ca-bundle"):  # deleted with the cluster
        assert (
            core.read_namespaced_secret(name, namespace).metadata.owner_references[0].uid == cm.metadata.uid
        )

    # nothing due: nothing changes
    again = ensure(k8s, c, owner, NOW + dt.timedelta(seconds=60), new_cluster)
    assert again.issued is None and data(core, namespace, "shop-tls") == tls

    # a third of the validity left: a new certificate from the same CA, new key
    later = ensure(k8s, c, owner, NOW + dt.timedelta(seconds=450))
    assert later.issued and "a third" in later.issued and later.not_after > first.not_after
    renewed = data(core, namespace, "shop-tls")
    assert renewed["tls.key"] != tls["tls.key"] and data(core, namespace, "shop-ca") == ca
    x509.load_pem_x509_certificate(renewed["tls.crt"].encode()).verify_directly_issued_by(
        x509.load_pem_x509_certificate(ca["ca.crt"].encode())
    )


def test_the_restore_jobs_certificate_is_the_clusters_ca_s_for_its_service_name_and_short_lived(
    control_plane, namespace
):
    """What the restore Job's sidecar serves a physical copy with (Secret shop-restore-tls): issued
    by the cluster's CA for the restore Service's names (what the instances connect to and
    verify), valid for the Job's deadline plus an hour, made once."""
    from mysql_operator.manifests.restore_jobs import restore_dns_names
    from mysql_operator.manifests.tenant_jobs import DEFAULT_DEADLINE_SECONDS

    api = control_plane.api_client()
    k8s = Reads(api)
    core = client.CoreV1Api(api)
    cm = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "uid": cm.metadata.uid}}
    c = cluster(namespace)
    ensure(k8s, c, owner, NOW)

    gate.ensure_restore_certificate(k8s, k8s, c, owner, NOW)
    got, ca = data(core, namespace, "shop-restore-tls"), data(core, namespace, "shop-ca")
    assert set(got) == {"tls.crt", "tls.key", "ca.crt"} and got["ca.crt"] == ca["ca.crt"]
    cert = x509.load_pem_x509_certificate(got["tls.crt"].encode())
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca["ca.crt"].encode()))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    assert names == restore_dns_names(c) and names[0] == f"shop-restore.{namespace}.svc"
    lifetime = cert.not_valid_after_utc - NOW
    assert (
        dt.timedelta(seconds=DEFAULT_DEADLINE_SECONDS)
        < lifetime
        <= dt.timedelta(seconds=DEFAULT_DEADLINE_SECONDS + 3600)
    )
    assert core.read_namespaced_secret("shop-restore-tls", namespace).metadata.owner_references[0].uid == (
        cm.metadata.uid
    )
    gate.ensure_restore_certificate(k8s, k8s, c, owner, NOW + dt.timedelta(seconds=60))
    assert data(core, namespace, "shop-restore-tls") == got  # made once
