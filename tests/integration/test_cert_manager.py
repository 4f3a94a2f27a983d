"""spec.tls.issuerRef with a real cert-manager (its controller built from its Go module, run on the
host against the session's kube-apiserver: tests/support/certmanager.py) and the real reconciler:
the operator applies a Certificate for the Secret the Pods mount, with the names of its own
certificate, makes no CA of its own, publishes cert-manager's CA to applications, and has a
server reload the certificate cert-manager renews. Without cert-manager, or with an issuer that
does not exist, the cluster waits with a condition and a Warning Event naming spec.tls.issuerRef.

Runs in file order: the first test needs cert-manager's CRDs absent; the `cert_manager` fixture
installs them for the later tests and removes them at the end of the module."""

from __future__ import annotations

import base64
import datetime as dt
import time
import uuid

import pytest
from cryptography import x509
from kubernetes import client

from mysql_operator import certificates, executor, tls
from mysql_operator import manifests as m
from mysql_operator.api import GROUP, VERSION, parse
from mysql_operator.db.instance import Instance
from mysql_operator.db.connection import tls_context
from mysql_operator.writes import ReloadTLS
from mysql_operator.k8s import objects as k
from mysql_operator.reconcile import Reconciler
from tests.support import certmanager
from tests.support import mariadb as mdb
from tests.support.crds import apply_crds, project_crds
from tests.support.operator_account import operator_api
from tests.support.wait import wait_for

pytestmark = [pytest.mark.controlplane, pytest.mark.late_build]

CM = certmanager.GROUP, certmanager.VERSION
VALIDITY = 3 * 3600  # cert-manager's shortest is one hour
CLUSTER_RESOURCE_NS = "cert-manager"


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def cluster_crds(control_plane):
    """The operator's CRDs from crds/ (as the `crds` fixture of tests/support/crds.py installs them);
    removed afterwards."""
    ext = client.ApiextensionsV1Api(control_plane.api_client())
    names = apply_crds(control_plane.api_client(), project_crds())
    objs = client.CustomObjectsApi(control_plane.api_client())
    wait_for(
        lambda: objs.list_cluster_custom_object(GROUP, VERSION, "mysqlclusters") is not None,
        30,
        "mysqlclusters to be served",
    )
    yield
    for name in names:
        ext.delete_custom_resource_definition(name)


@pytest.fixture(scope="module")
def cert_manager(control_plane, tmp_path_factory):
    """cert-manager's CRDs and its controller; both gone after the module."""
    certmanager.ensure_built()
    api = control_plane.api_client()
    names = certmanager.install_crds(api)
    try:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": CLUSTER_RESOURCE_NS}})
    except client.ApiException as e:
        if e.status != 409:
            raise
    cm = certmanager.CertManager(
        control_plane.admin_kubeconfig, tmp_path_factory.mktemp("cert-manager"), CLUSTER_RESOURCE_NS
    ).start()
    yield cm
    alive = cm.alive()
    cm.stop()
    certmanager.uninstall_crds(api, names)
    assert alive, f"cert-manager's controller died during the tests:\n{cm.log_tail()}"


@pytest.fixture(scope="module")
def factory():
    missing = mdb.missing_binaries()
    if missing:
        why = f"MariaDB server binaries missing ({', '.join(missing)}): run hack/install-deps.sh"
        pytest.skip(reason=why)
    f = mdb.MariaDBFactory()
    yield f
    f.close()


# ---------------------------------------------------------------- helpers


def create_cluster(api, ns, name, issuer_ref):
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLCluster",
        "metadata": {"name": name},
        "spec": {
            "flavor": "mariadb",
            "instances": 1,
            "tls": {"certificateValiditySeconds": VALIDITY, "issuerRef": issuer_ref},
        },
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, ns, "mysqlclusters", body)
    return k.read_cluster(api, ns, name)


def reconcile(rec, api, ns, name):
    rec.reconcile(k.read_cluster(api, ns, name), apply=True)
    return k.read_cluster(api, ns, name)


def condition(body, ctype):
    return next(c for c in body["status"]["conditions"] if c["type"] == ctype)


def events(api, ns, name):
    listed = client.CoreV1Api(api).list_namespaced_event(ns, field_selector=f"involvedObject.name={name}")
    return [(e.type, e.reason, e.message) for e in listed.items]


def secret_data(api, ns, name):
    return k.read_secret_data(api, ns, name)


def cm_object(api, plural, name, ns=None):
    return k.read_custom_object(api, *CM, plural, name, ns)


def cm_create(api, body, ns=None):
    objs = client.CustomObjectsApi(api)
    plural = {"Certificate": "certificates", "Issuer": "issuers", "ClusterIssuer": "clusterissuers"}[
        body["kind"]
    ]
    body = {"apiVersion": "/".join(CM), **body}
    if ns is None:
        return objs.create_cluster_custom_object(*CM, plural, body)
    return objs.create_namespaced_custom_object(*CM, ns, plural, body)


def ready(obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in ((obj or {}).get("status") or {}).get("conditions") or []
    )


def describe(api, ns, name):
    return lambda: (
        f"cluster status: {(k.read_cluster(api, ns, name) or {}).get('status')}\n"
        f"Certificate: {(cm_object(api, 'certificates', f'{name}-tls', ns) or {}).get('status')}\n"
        f"events: {events(api, ns, name)}"
    )


def no_secret(api, ns, name) -> bool:
    return secret_data(api, ns, name) is None


# ---------------------------------------------------------------- tests


def test_without_cert_manager_the_cluster_waits_with_a_condition_and_a_warning(
    control_plane, cluster_crds, namespace
):
    api = control_plane.api_client()
    assert k.served_resources(api, *CM) is None, "cert-manager's CRDs must be absent for this test"
    create_cluster(api, namespace, "shop", {"name": "ca", "kind": "ClusterIssuer"})
    started = time.monotonic()
    body = reconcile(
        Reconciler(operator_api(control_plane, namespace), resync_seconds=2), api, namespace, "shop"
    )
    took = time.monotonic() - started

    degraded = condition(body, "Degraded")
    assert degraded["status"] == "True" and degraded["reason"] == "CertManagerNotInstalled", degraded
    assert (
        "spec.tls.issuerRef (ClusterIssuer ca" in degraded["message"]
        and "install cert-manager" in degraded["message"]
    )
    assert condition(body, "Progressing")["reason"] == "CertManagerNotInstalled"
    assert body["status"]["phase"] == "Failed"
    # this control plane has no node: once the scheduler has said so (later on a loaded machine),
    # the Pods' InstanceWaiting is a Warning too, and not this test's concern
    warnings = [
        (r, msg)
        for kind, r, msg in events(api, namespace, "shop")
        if kind == "Warning" and not (r == "InstanceWaiting" and "no nodes available" in msg)
    ]
    assert warnings == [("CertManagerNotInstalled", degraded["message"])]
    assert took < 10, f"the condition and the Event took {took:.1f}s"
    # it waits: no certificate, no CA of the operator's, nothing for applications
    for secret in ("shop-ca", "shop-tls", "shop-ca-bundle"):
        assert no_secret(api, namespace, secret), secret


def test_a_missing_issuer_is_reported_and_creating_it_lets_the_cluster_go_on(
    control_plane, cluster_crds, cert_manager, namespace
):
    api = control_plane.api_client()
    c_body = create_cluster(api, namespace, "inv", {"name": "later"})  # kind Issuer, group cert-manager.io
    rec = Reconciler(operator_api(control_plane, namespace), resync_seconds=2)  # as the chart grants
    body = reconcile(rec, api, namespace, "inv")
    degraded = condition(body, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "IssuerNotFound"), degraded
    assert degraded["message"].startswith(
        "spec.tls.issuerRef (Issuer later, group cert-manager.io): "
        f"no Issuer later in namespace {namespace}: create it"
    )
    assert ("Warning", "IssuerNotFound", degraded["message"]) in events(api, namespace, "inv")
    # the Certificate is there already, owned by the cluster; cert-manager waits for its issuer
    cert = cm_object(api, "certificates", "inv-tls", namespace)
    assert cert["metadata"]["ownerReferences"][0]["uid"] == c_body["metadata"]["uid"]
    assert no_secret(api, namespace, "inv-ca")

    cm_create(api, {"kind": "Issuer", "metadata": {"name": "later"}, "spec": {"selfSigned": {}}}, namespace)
    wait_for(
        lambda: reconcile(rec, api, namespace, "inv") and secret_data(api, namespace, "inv-ca-bundle"),
        60,
        "the cluster's certificate from the Issuer created later",
        describe=describe(api, namespace, "inv"),
    )
    body = k.read_cluster(api, namespace, "inv")
    assert condition(body, "Degraded")["status"] == "False", body["status"]
    assert body["status"]["phase"] == "Pending"  # no Pod runs here: the usual phase of a new cluster
    assert no_secret(api, namespace, "inv-ca")


def test_certificate_from_a_ca_cluster_issuer_and_a_renewal_reloaded(
    control_plane, cluster_crds, cert_manager, namespace, factory, tmp_path
):
    api = control_plane.api_client()
    core = client.CoreV1Api(api)
    suffix = uuid.uuid4().hex[:6]
    # self-signed ClusterIssuer -> CA Certificate (in the cluster resource namespace) -> CA ClusterIssuer
    selfsigned, root, ca_issuer = f"selfsigned-{suffix}", f"root-ca-{suffix}", f"ca-{suffix}"
    cm_create(api, {"kind": "ClusterIssuer", "metadata": {"name": selfsigned}, "spec": {"selfSigned": {}}})
    cm_create(
        api,
        {
            "kind": "Certificate",
            "metadata": {"name": root},
            "spec": {
                "isCA": True,
                "commonName": f"test root {suffix}",
                "secretName": root,
                "privateKey": {"algorithm": "ECDSA", "size": 256},
                "issuerRef": {"name": selfsigned, "kind": "ClusterIssuer", "group": "cert-manager.io"},
            },
        },
        CLUSTER_RESOURCE_NS,
    )
    cm_create(
        api, {"kind": "ClusterIssuer", "metadata": {"name": ca_issuer}, "spec": {"ca": {"secretName": root}}}
    )
    wait_for(
        lambda: ready(cm_object(api, "clusterissuers", ca_issuer)),
        60,
        f"ClusterIssuer {ca_issuer} Ready",
        describe=lambda: f"{cm_object(api, 'clusterissuers', ca_issuer)}\n{cert_manager.log_tail()}",
    )
    root_ca = secret_data(api, CLUSTER_RESOURCE_NS, root)["tls.crt"]

    c_body = create_cluster(api, namespace, "shop", {"name": ca_issuer, "kind": "ClusterIssuer"})
    c = parse(c_body)
    rec = Reconciler(operator_api(control_plane, namespace), resync_seconds=2)  # as the chart grants
    wait_for(
        lambda: reconcile(rec, api, namespace, "shop") and secret_data(api, namespace, "shop-ca-bundle"),
        60,
        "the cluster's certificate from cert-manager",
        describe=describe(api, namespace, "shop"),
    )

    # the Certificate: the Secret the Pods mount, the names of the operator's own certificate
    cert = cm_object(api, "certificates", "shop-tls", namespace)
    assert cert["metadata"]["ownerReferences"][0]["uid"] == c_body["metadata"]["uid"]
    assert cert["spec"]["secretName"] == m.tls_secret_name(c) == "shop-tls"
    assert sorted(cert["spec"]["dnsNames"]) == sorted(m.server_dns_names(c))
    assert f"*.shop-headless.{namespace}.svc" in cert["spec"]["dnsNames"]
    assert (cert["spec"]["duration"], cert["spec"]["renewBefore"]) == (f"{VALIDITY}s", f"{VALIDITY // 3}s")
    assert cert["spec"]["issuerRef"] == {
        "name": ca_issuer,
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }

    # cert-manager issued the Secret, from the CA issuer
    secret = core.read_namespaced_secret("shop-tls", namespace)
    assert secret.type == "kubernetes.io/tls"
    assert secret.metadata.annotations["cert-manager.io/certificate-name"] == "shop-tls"
    issued = {key: base64.b64decode(v).decode() for key, v in secret.data.items()}
    assert issued["ca.crt"] == root_ca
    leaf = x509.load_pem_x509_certificate(issued["tls.crt"].encode())
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(root_ca.encode()))
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    assert sorted(sans) == sorted(m.server_dns_names(c))

    # applications get the issuer's CA, no key; the operator made no CA of its own
    assert secret_data(api, namespace, "shop-ca-bundle") == {"ca.crt": root_ca}
    assert no_secret(api, namespace, "shop-ca")
    body = k.read_cluster(api, namespace, "shop")
    assert condition(body, "Degraded")["status"] == "False", body["status"]
    # no TLS warning (this control plane has no node: its Pods are Unschedulable, said as such)
    assert not [e for e in events(api, namespace, "shop") if e[0] == "Warning" and e[1] != "InstanceWaiting"]

    # a server presenting it, from files as the kubelet writes the mounted Secret
    pki = tmp_path / "shop-tls"

    def kubelet_sync():
        pki.mkdir(exist_ok=True)
        for key, value in secret_data(api, namespace, "shop-tls").items():
            (pki / key).write_text(value)
        (pki / "tls.key").chmod(0o600)

    kubelet_sync()
    (server,) = factory.create(
        1, start=False, prefix="cm", ssl_ca=pki / "ca.crt", ssl_cert=pki / "tls.crt", ssl_key=pki / "tls.key"
    )
    server.start()
    operator_view = Instance(
        server.host,
        server.port,
        mdb.OPERATOR_USER,
        factory.admin_password,
        tls=tls_context(secret_data(api, namespace, "shop-ca-bundle")["ca.crt"]),
    )
    first = tls.not_after(issued["tls.crt"])
    assert operator_view.tls_not_after() == first

    # cert-manager renews it (as `cmctl renew` does: the Certificate's Issuing condition)
    time.sleep(1.1)  # a new certificate's expiry differs from the first one's by at least a second
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [cond for cond in cert["status"]["conditions"] if cond["type"] != "Issuing"] + [
        {
            "type": "Issuing",
            "status": "True",
            "reason": "ManuallyTriggered",
            "message": "Certificate re-issuance manually triggered",
            "lastTransitionTime": now,
        }
    ]
    client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        *CM, namespace, "certificates", "shop-tls", {"status": {"conditions": conditions}}
    )
    wait_for(
        lambda: secret_data(api, namespace, "shop-tls")["tls.crt"] != issued["tls.crt"],
        60,
        "cert-manager to issue a new certificate",
        describe=describe(api, namespace, "shop"),
    )
    renewed = secret_data(api, namespace, "shop-tls")
    second = tls.not_after(renewed["tls.crt"])
    assert second > first and renewed["tls.key"] != issued["tls.key"]

    # the operator notices (Event), and its reload makes the server serve it without a restart
    wait_for(
        lambda: (
            reconcile(rec, api, namespace, "shop")
            and any(r == "CertificateRenewed" for _, r, _ in events(api, namespace, "shop"))
        ),
        30,
        "the operator to notice the renewal",
        describe=describe(api, namespace, "shop"),
    )
    state = rec._entry(namespace, "shop").tls.state
    assert state.not_after == second and "cert-manager issued a new certificate" in state.issued
    kubelet_sync()
    assert operator_view.tls_not_after() == first  # the files alone change nothing
    pending, reloads = certificates.reloads(["shop-0"], {"shop-0": first}, state.not_after)
    assert pending == ["shop-0"] and reloads == [ReloadTLS("shop-0")]
    executor.carry_out(None, {}, reloads, servers={"shop-0": operator_view})
    assert operator_view.tls_not_after() == second
    assert no_secret(api, namespace, "shop-ca")
    operator_view.close()
