"""spec.tls.issuerRef without a server: parsing, the Certificate the operator applies, what it makes
of what the API server says (cert_manager_verdict), and how a problem shows in the status."""

from __future__ import annotations

import datetime as dt

import pytest

from mysql_operator import cert_manager, certificates, tls
from mysql_operator import manifests as m
from mysql_operator.api import SpecError, parse
from mysql_operator.api.types import IssuerRef
from mysql_operator.tls_upkeep import tls_api_problem
from mysql_operator.conditions import phase
from mysql_operator.status import build_status
from mysql_operator.status_events import degraded_events
from mysql_operator.summary import Summary
from tests.support.specs import body

NOW = dt.datetime(2026, 11, 23, tzinfo=dt.timezone.utc)


def cluster(issuer_ref=None, validity=3 * 3600):
    t = {"certificateValiditySeconds": validity}
    if issuer_ref is not None:
        t["issuerRef"] = issuer_ref
    return parse(body({"flavor": "mariadb", "instances": 3, "tls": t}, "shop"))


def issued_secret(validity=dt.timedelta(hours=3), now=NOW):
    ca = tls.new_ca("issuer", now)
    pair = tls.server_certificate(ca, ["x"], now, validity)
    return {"tls.crt": pair.cert_pem, "tls.key": pair.key_pem, "ca.crt": ca.cert_pem}


READY = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KeyPairVerified"}]}}
SERVED = {"certificates", "issuers", "clusterissuers", "certificaterequests"}


# ---------------------------------------------------------------- parsing


def test_issuer_ref_defaults_and_kinds():
    assert cluster().spec.tls.issuer_ref is None
    assert cluster({"name": "ca"}).spec.tls.issuer_ref == IssuerRef("ca", "Issuer", "cert-manager.io")
    ref = cluster({"name": "ca", "kind": "ClusterIssuer", "group": "issuers.example.com"}).spec.tls.issuer_ref
    assert ref == IssuerRef("ca", "ClusterIssuer", "issuers.example.com")


@pytest.mark.parametrize(
    "ref,validity,field,fragment",
    [
        ({}, 3600, "spec.tls.issuerRef.name", "is required"),
        (
            {"name": "Bad_Name"},
            3600,
            "spec.tls.issuerRef.name",
            "name the cert-manager Issuer or ClusterIssuer",
        ),
        (
            {"name": "ca", "kind": "Certificate"},
            3600,
            "spec.tls.issuerRef.kind",
            "must be one of Issuer, ClusterIssuer",
        ),
        ({"name": "ca", "group": "Not A Group"}, 3600, "spec.tls.issuerRef.group", "an API group"),
        ("ca", 3600, "spec.tls.issuerRef", "must be an object"),
        ({"name": "ca"}, 600, "spec.tls.certificateValiditySeconds", "at least 3600 with spec.tls.issuerRef"),
    ],
)
def test_bad_issuer_refs_are_refused_naming_the_field(ref, validity, field, fragment):
    with pytest.raises(SpecError) as e:
        cluster(ref, validity)
    assert e.value.field == field and fragment in e.value.message, str(e.value)


# ---------------------------------------------------------------- the Certificate


def test_the_certificate_names_the_mounted_secret_and_the_servers_names():
    c = cluster({"name": "ca", "kind": "ClusterIssuer"}, validity=90 * 86400)
    cert = cert_manager.certificate(c)
    assert (cert["apiVersion"], cert["kind"]) == ("cert-manager.io/v1", "Certificate")
    assert cert["metadata"]["name"] == "shop-tls" and cert["metadata"]["namespace"] == "ns"
    spec = cert["spec"]
    assert spec["secretName"] == m.tls_secret_name(c) == "shop-tls"
    assert spec["dnsNames"] == m.server_dns_names(c)
    assert (spec["duration"], spec["renewBefore"]) == ("7776000s", "2592000s")
    assert spec["issuerRef"] == {"name": "ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    assert {"server auth", "client auth"} <= set(spec["usages"])
    assert spec["secretTemplate"]["labels"]["app.kubernetes.io/instance"] == "shop"
    with pytest.raises(ValueError):
        cert_manager.certificate(cluster())


def test_the_restore_jobs_certificate_is_of_the_same_issuer_for_the_restore_services_names():
    from mysql_operator.manifests.restore_jobs import restore_dns_names

    c = cluster({"name": "ca", "kind": "ClusterIssuer"}, validity=90 * 86400)
    cert = cert_manager.certificate(c, "shop-restore-tls", restore_dns_names(c))
    spec = cert["spec"]
    assert cert["metadata"]["name"] == spec["secretName"] == "shop-restore-tls"
    assert spec["dnsNames"] == restore_dns_names(c) and spec["commonName"] == "shop-restore.ns.svc"
    assert spec["issuerRef"] == cert_manager.certificate(c)["spec"]["issuerRef"]


# ---------------------------------------------------------------- the verdict


def verdict(served=SERVED, issuer=READY, secret=None, cert=None, known=None, ref=None):
    return cert_manager.cert_manager_verdict(
        cluster(ref or {"name": "ca"}), served, issuer, secret, cert, known
    )


@pytest.mark.parametrize(
    "kwargs,reason,warning",
    [
        ({"served": None}, "CertManagerNotInstalled", True),
        ({"served": {"issuers"}}, "CertManagerNotInstalled", True),
        ({"issuer": None}, "IssuerNotFound", True),
        (
            {
                "issuer": {
                    "status": {
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "False",
                                "reason": "ErrGetKeyPair",
                                "message": "secret root-ca not found",
                            }
                        ]
                    }
                }
            },
            "IssuerNotReady",
            True,
        ),
        ({"issuer": {}}, "WaitingForIssuer", False),
        ({"secret": None}, "WaitingForCertificate", False),
        ({"secret": {"tls.crt": "x"}}, "WaitingForCertificate", False),
        ({"secret": {**issued_secret(), "ca.crt": ""}}, "IssuerGivesNoCA", True),
        ({"secret": {"tls.crt": "not pem", "tls.key": "k", "ca.crt": "c"}}, "CertificateUnreadable", True),
    ],
)
def test_problems_name_the_field_and_say_whether_the_user_must_act(kwargs, reason, warning):
    v = verdict(**kwargs)
    assert isinstance(v, certificates.TLSProblem), v
    assert (v.reason, v.warning) == (reason, warning)
    assert v.message.startswith("spec.tls.issuerRef (Issuer ca, group cert-manager.io): "), v.message


def test_problem_messages_say_the_fix():
    assert "install cert-manager" in verdict(served=None).message
    assert "in namespace ns: create it, or correct spec.tls.issuerRef" in verdict(issuer=None).message
    not_ready = verdict(
        issuer={
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "ErrGetKeyPair",
                        "message": "secret root-ca not found",
                    }
                ]
            }
        }
    )
    assert "ErrGetKeyPair: secret root-ca not found" in not_ready.message
    assert "kubectl describe issuer ca" in not_ready.message
    cert = {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "DoesNotExist",
                    "message": "Issuing certificate as Secret does not exist",
                }
            ]
        }
    }
    assert "Certificate shop-tls: DoesNotExist" in verdict(cert=cert).message


def test_other_issuer_groups_are_not_read_and_a_cluster_issuer_is_cluster_wide():
    secret = issued_secret()
    assert isinstance(
        verdict(issuer=None, secret=secret, ref={"name": "ca", "group": "x.example.com"}),
        certificates.TLSState,
    )
    v = verdict(issuer=None, ref={"name": "ca", "kind": "ClusterIssuer"})
    assert "no ClusterIssuer ca cluster-wide" in v.message


def test_a_usable_secret_gives_its_ca_and_expiry_and_a_later_one_is_a_renewal():
    secret = issued_secret()
    first = verdict(secret=secret)
    assert isinstance(first, certificates.TLSState)
    assert first.ca_pem == secret["ca.crt"] and first.not_after == tls.not_after(secret["tls.crt"])
    assert first.issued is None
    assert verdict(secret=secret, known=first).issued is None  # the same certificate
    later = verdict(secret=issued_secret(now=NOW + dt.timedelta(hours=2)), known=first)
    assert later.issued and later.issued.startswith("cert-manager issued a new certificate")


# ---------------------------------------------------------------- in the status


def test_a_problem_before_any_certificate_fails_the_phase_and_warns_once():
    problem = verdict(issuer=None)
    s = Summary(instances=3, generation=1, tls_problem=problem, tls_blocking=True)
    assert phase(s) == "Failed"
    status = build_status(s, {}, "t")
    cond = {c["type"]: c for c in status["conditions"]}
    assert (cond["Degraded"]["status"], cond["Degraded"]["reason"]) == ("True", "IssuerNotFound")
    assert (cond["Progressing"]["status"], cond["Progressing"]["reason"]) == ("False", "IssuerNotFound")
    assert degraded_events({}, status) == [("Warning", "IssuerNotFound", problem.message)]
    assert degraded_events(status, build_status(s, status, "t2")) == []  # not on every pass


def test_waiting_for_cert_manager_is_progress_not_a_warning():
    s = Summary(instances=3, generation=1, tls_problem=verdict(secret=None), tls_blocking=True)
    assert phase(s) == "Pending"
    status = build_status(s, {}, "t")
    cond = {c["type"]: c for c in status["conditions"]}
    assert (cond["Progressing"]["status"], cond["Progressing"]["reason"]) == ("True", "WaitingForCertificate")
    assert cond["Degraded"]["status"] == "False" and degraded_events({}, status) == []


def test_a_problem_of_a_running_cluster_degrades_it_without_stopping_it():
    s = Summary(
        instances=1,
        generation=1,
        ready=1,
        primary="shop-0",
        primary_serving=True,
        primary_in_service=True,
        decision="Healthy",
        tls_problem=verdict(served=None),
    )
    assert phase(s) == "Degraded"
    cond = {c["type"]: c for c in build_status(s, {}, "t")["conditions"]}
    assert cond["Degraded"]["reason"] == "CertManagerNotInstalled"
    assert cond["Available"]["status"] == "True"


def test_api_errors_become_problems_naming_what_failed():
    own = tls_api_problem(cluster(), 403, "Forbidden")
    assert own.reason == "TLSSecretsAPIError" and own.warning
    assert "shop-ca, shop-tls, shop-ca-bundle" in own.message and "HTTP 403 Forbidden" in own.message
    cm = tls_api_problem(cluster({"name": "ca"}), 500, None)
    assert cm.reason == "CertManagerAPIError" and cm.message.startswith("spec.tls.issuerRef: ")
    assert "HTTP 500" in cm.message
