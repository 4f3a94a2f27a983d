"""The cluster's certificate from cert-manager (spec.tls.issuerRef): the `Certificate` the
operator applies (owned by the MySQLCluster), which writes the `<name>-tls` Secret the Pods mount
with the names of the operator's own certificate, and `<name>-ca-bundle` published from the
`ca.crt` cert-manager puts in it. No `<name>-ca`. cert-manager renews it; the operator notices a
new certificate in the Secret and has the servers reload it, as for its own (tls_upkeep.py).

    seen = read_cert_manager(reads, cluster)                          # observe
    state, writes = plan_cert_manager(cluster, owner, seen, known)    # a TLSState, or a TLSProblem

What to make of what the API server says (`certificate`, `cert_manager_verdict`) is pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from mysql_operator import manifests as m
from mysql_operator import tls
from mysql_operator.api import MySQLCluster
from mysql_operator.api.types import CERT_MANAGER_GROUP
from mysql_operator.certificates import (
    CA_CERT,
    TLS_CERT,
    TLS_KEY,
    TLSProblem,
    TLSState,
    bundle_writes,
)
from mysql_operator.k8s.cache import Reads
from mysql_operator.writes import Apply, Write
from mysql_operator import reasons as R

CERT_MANAGER_VERSION = "v1"
ISSUER_PLURALS = {"Issuer": "issuers", "ClusterIssuer": "clusterissuers"}


def certificate(
    c: MySQLCluster, secret_name: str | None = None, names: list[str] | None = None
) -> dict[str, Any]:
    """Pure: the cert-manager Certificate for spec.tls.issuerRef: the Secret the Pods mount, the
    names of the operator's own certificate, renewed when a third of its validity is left. With
    `secret_name` and `names`: another certificate of the same issuer (the restore Job's)."""
    ref = c.spec.tls.issuer_ref
    if ref is None:
        raise ValueError("spec.tls.issuerRef is not set")
    validity = c.spec.tls.certificate_validity_seconds
    names = names or m.server_dns_names(c)
    secret_name = secret_name or m.tls_secret_name(c)
    return {
        "apiVersion": f"{CERT_MANAGER_GROUP}/{CERT_MANAGER_VERSION}",
        "kind": "Certificate",
        "metadata": m.metadata(c, secret_name, "tls"),
        "spec": {
            "secretName": secret_name,
            "secretTemplate": {"labels": m.labels(c, "tls")},
            "commonName": names[0][:64],
            "dnsNames": names,
            "duration": f"{validity}s",
            "renewBefore": f"{validity // 3}s",
            "privateKey": {
                "algorithm": "ECDSA",
                "size": 256,
                "encoding": "PKCS8",
                "rotationPolicy": "Always",
            },
            "usages": ["server auth", "client auth", "digital signature"],
            "issuerRef": {"name": ref.name, "kind": ref.kind, "group": ref.group},
        },
    }


def _ready(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The object's Ready condition ({} if none)."""
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((cond for cond in conditions if cond.get("type") == "Ready"), {})


def _said(cond: Mapping[str, Any]) -> str:
    text = f"{cond.get('reason') or 'no reason'}: {cond.get('message') or 'no message'}"
    return text if len(text) <= 300 else text[:297] + "..."


def cert_manager_verdict(
    c: MySQLCluster,
    served: set[str] | None,
    issuer: Mapping[str, Any] | None,
    secret: Mapping[str, str] | None,
    cert: Mapping[str, Any] | None,
    known: TLSState | None = None,
) -> TLSState | TLSProblem:
    """Pure: what the cluster has from cert-manager, from what the API server said: the resources
    served in cert-manager.io/v1 (None: not installed), the issuer (None: not found; only read for
    group cert-manager.io), the data of `<name>-tls` and the Certificate. `known`: the state of the
    previous pass (a later expiry means cert-manager issued a new certificate)."""
    ref = c.spec.tls.issuer_ref
    assert ref is not None
    what = f"spec.tls.issuerRef ({ref.kind} {ref.name}, group {ref.group})"
    if served is None or "certificates" not in served:
        return TLSProblem(
            R.CERT_MANAGER_NOT_INSTALLED,
            (
                f"{what}: cert-manager is not installed (the API server serves no "
                f"{CERT_MANAGER_GROUP}/{CERT_MANAGER_VERSION} Certificate): install cert-manager (its CRDs and "
                "controller), or create the cluster without spec.tls.issuerRef to let the operator make "
                "its certificates"
            ),
        )
    if ref.group == CERT_MANAGER_GROUP:
        where = "cluster-wide" if ref.kind == "ClusterIssuer" else f"in namespace {c.namespace}"
        if issuer is None:
            return TLSProblem(
                R.ISSUER_NOT_FOUND,
                (f"{what}: no {ref.kind} {ref.name} {where}: create it, or correct spec.tls.issuerRef"),
            )
        ready = _ready(issuer)
        if not ready:  # cert-manager has not looked at it yet
            return TLSProblem(
                R.WAITING_FOR_ISSUER,
                f"{what}: waiting for cert-manager to check the {ref.kind}",
                warning=False,
            )
        if ready.get("status") != "True":
            return TLSProblem(
                R.ISSUER_NOT_READY,
                (
                    f"{what}: the {ref.kind} is not Ready ({_said(ready)}): fix it "
                    f"(kubectl describe {ref.kind.lower()} {ref.name})"
                ),
            )
    if not secret or not secret.get(TLS_CERT) or not secret.get(TLS_KEY):
        ready = _ready(cert)
        detail = f" (Certificate {m.tls_secret_name(c)}: {_said(ready)})" if ready else ""
        return TLSProblem(
            R.WAITING_FOR_CERTIFICATE,
            (f"{what}: waiting for cert-manager to issue Secret {m.tls_secret_name(c)}{detail}"),
            warning=False,
        )
    if not secret.get(CA_CERT):
        return TLSProblem(
            R.ISSUER_GIVES_NO_CA,
            (
                f"{what}: the issuer put no ca.crt in Secret {m.tls_secret_name(c)}, and replicas and "
                "clients verify the servers against it: use an issuer that does (cert-manager's CA or "
                "self-signed issuers)"
            ),
        )
    try:
        expires = tls.not_after(secret[TLS_CERT])
    except ValueError:
        return TLSProblem(
            R.CERTIFICATE_UNREADABLE,
            (
                f"{what}: Secret {m.tls_secret_name(c)} holds no readable PEM certificate in tls.crt: "
                "check the issuer"
            ),
        )
    issued = None
    if known is not None and expires != known.not_after:
        issued = (
            f"cert-manager issued a new certificate (was valid until {known.not_after:%Y-%m-%dT%H:%M:%SZ})"
        )
    return TLSState(secret[CA_CERT], expires, issued)


@dataclass(frozen=True)
class CertManagerSeen:
    """What the API server says of the cluster's cert-manager certificate: the resources served
    in cert-manager.io/v1 (None: not installed), the issuer (None: not found, or not read), the
    data of `<name>-tls` and of `<name>-ca-bundle`, the Certificate as the last apply left it."""

    served: set[str] | None
    issuer: Mapping[str, Any] | None
    secret: Mapping[str, str] | None
    bundle: Mapping[str, str] | None
    certificate: Mapping[str, Any] | None = None  # the Certificate (its Ready condition)


def read_cert_manager(reads: Reads, c: MySQLCluster) -> CertManagerSeen:
    """Effect (reads only): what cert_manager_verdict and the bundle's writes decide on."""
    ref = c.spec.tls.issuer_ref
    assert ref is not None
    served = reads.served_resources(CERT_MANAGER_GROUP, CERT_MANAGER_VERSION)
    issuer = None
    if served is not None and "certificates" in served and ref.group == CERT_MANAGER_GROUP:
        namespace = None if ref.kind == "ClusterIssuer" else c.namespace
        issuer = reads.custom_object(
            CERT_MANAGER_GROUP, CERT_MANAGER_VERSION, ISSUER_PLURALS[ref.kind], ref.name, namespace
        )
    installed = served is not None and "certificates" in served
    return CertManagerSeen(
        served,
        issuer,
        reads.secret_data(c.namespace, m.tls_secret_name(c)),
        reads.secret_data(c.namespace, m.ca_bundle_secret_name(c)),
        reads.custom_object(
            CERT_MANAGER_GROUP, CERT_MANAGER_VERSION, "certificates", m.tls_secret_name(c), c.namespace
        )
        if installed
        else None,
    )


def plan_cert_manager(
    c: MySQLCluster,
    owner: Mapping[str, Any],
    seen: CertManagerSeen,
    known: TLSState | None = None,
) -> tuple[TLSState | TLSProblem, list[Write]]:
    """Pure: what the cluster has from cert-manager (cert_manager_verdict on what was read) and
    the writes that keep it: the Certificate applied (when cert-manager is installed) and, once
    the Secret holds a certificate, `<name>-ca-bundle` carrying its ca.crt. No `<name>-ca`."""
    writes: list[Write] = []
    if seen.served is not None and "certificates" in seen.served:
        writes.append(Apply(m.owned(certificate(c), owner)))
    state = cert_manager_verdict(c, seen.served, seen.issuer, seen.secret, seen.certificate, known)
    if isinstance(state, TLSState):
        writes += bundle_writes(c, owner, seen.bundle, state.ca_pem)
    return state, writes
