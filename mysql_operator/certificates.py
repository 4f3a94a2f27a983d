"""The cluster's TLS Secrets and the servers' reload of a renewed certificate.

    state = ensure_secrets(reads, kube, cluster, owner, now)   # creates the CA once, (re)issues the server cert
    pending = serve_current(instances, state.not_after)  # FLUSH SSL where a server serves an older one

Secrets (owned by the MySQLCluster, created only if missing, never taken from elsewhere):
- `<name>-ca`: the CA certificate and key (only the operator reads it);
- `<name>-tls`: the servers' certificate, key and the CA certificate (mounted in server Pods);
- `<name>-ca-bundle`: the CA certificate alone (applications, the operator's Jobs).

With `spec.tls.issuerRef` cert-manager makes the certificate instead (no `<name>-ca`):

    state = ensure_cert_manager(reads, kube, cluster, owner, known)   # a TLSState, or a TLSProblem to report

applies a cert-manager `Certificate` `<name>-tls` (owned by the MySQLCluster) that writes the same
`<name>-tls` Secret the Pods mount, with the same names, and publishes `<name>-ca-bundle` from the
`ca.crt` cert-manager puts in it. cert-manager renews it; the operator notices a new certificate
in the Secret and has the servers reload it, as for its own. What to make of what the API server
says (`certificate`, `cert_manager_verdict`) is pure; `ensure_*` only read and write.

A renewed certificate reaches the Pods when the kubelet rewrites the mounted Secret; the operator
then asks each server to reload its certificate (no restart) and checks what it serves. A server
that still serves an older certificate is retried on the next pass.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any, Mapping

from mysql_operator import manifests as m
from mysql_operator import tls
from mysql_operator.api import MySQLCluster
from mysql_operator.api.types import CERT_MANAGER_GROUP
from mysql_operator.db_ops import DbOps
from mysql_operator.db.observation import InstanceError
from mysql_operator.k8s.cache import Reads
from mysql_operator.k8s.ops import KubeOps
from mysql_operator.manifests.restore_jobs import restore_dns_names, restore_tls_secret_name
from mysql_operator.manifests.tenant_jobs import DEFAULT_DEADLINE_SECONDS
from mysql_operator import reasons as R

log = logging.getLogger(__name__)

CA_CERT, CA_KEY = "ca.crt", "ca.key"
TLS_CERT, TLS_KEY = "tls.crt", "tls.key"
CERT_MANAGER_VERSION = "v1"
ISSUER_PLURALS = {"Issuer": "issuers", "ClusterIssuer": "clusterissuers"}


@dataclass(frozen=True)
class TLSState:
    ca_pem: str
    not_after: dt.datetime  # of the server certificate in <name>-tls
    issued: str | None = None  # why a certificate was (re)issued in this call

    def __repr__(self) -> str:
        return f"TLSState(not_after={self.not_after:%Y-%m-%dT%H:%M:%SZ}, issued={self.issued!r})"


@dataclass(frozen=True)
class TLSProblem:
    """Why the cluster has no usable certificate from cert-manager (yet). `warning`: the user must
    act (condition Degraded and a Warning Event); otherwise cert-manager is still at work.
    `reason` is the condition's reason, `message` names the field and the fix."""

    reason: str
    message: str
    warning: bool = True


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(
    c: MySQLCluster, name: str, component: str, data: Mapping[str, str], type_: str = "Opaque"
) -> dict[str, Any]:
    """Pure: a Secret of the cluster's (values as text)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": m.metadata(c, name, component),
        "type": type_,
        "data": {key: _b64(v) for key, v in data.items()},
    }


def ensure_secrets(
    reads: Reads,
    kube: KubeOps,
    c: MySQLCluster,
    owner: Mapping[str, Any],
    now: dt.datetime,
    new_cluster: bool = False,
) -> TLSState:
    """Effect: the three Secrets exist and the server certificate is current. Never replaces a
    usable CA (every server and client trusts it); a CA that cannot sign for a full server
    validity any more is replaced, and every certificate with it. `new_cluster` (it has no
    status yet): they are created without reading first; one that exists is then read as below."""
    validity = dt.timedelta(seconds=c.spec.tls.certificate_validity_seconds)
    names = m.server_dns_names(c)
    if new_cluster:
        made = _create_secrets(kube, c, owner, now, validity, names)
        if made is not None:
            return made
    stored = reads.secret_data(c.namespace, m.ca_secret_name(c)) or {}
    ca = tls.KeyPair(stored.get(CA_CERT, ""), stored.get(CA_KEY, ""))
    new_ca = not tls.ca_usable(ca, now)
    if new_ca:
        ca = tls.new_ca(c.name, now)
        body = _ca_secret(c, owner, ca)
        if not stored and not kube.create_secret(body):  # lost a race: use the one that exists
            return ensure_secrets(reads, kube, c, owner, now)
        if stored:
            kube.add_secret_keys(c.namespace, m.ca_secret_name(c), body["data"])
    current = reads.secret_data(c.namespace, m.tls_secret_name(c))
    reason = (
        "the cluster's CA was replaced"
        if new_ca and current
        else tls.renewal_reason((current or {}).get(TLS_CERT), ca, names, now)
    )
    if reason is None and (current or {}).get(CA_CERT) != ca.cert_pem:
        reason = "the CA certificate in the Secret is outdated"
    cert_pem = (current or {}).get(TLS_CERT, "")
    if reason is not None:
        pair = tls.server_certificate(ca, names, now, validity)
        cert_pem = pair.cert_pem
        body = _tls_secret(c, owner, pair, ca.cert_pem)
        if current is None:
            if not kube.create_secret(body):
                return ensure_secrets(reads, kube, c, owner, now)
        else:
            kube.add_secret_keys(c.namespace, m.tls_secret_name(c), body["data"])
    _publish_bundle(reads, kube, c, owner, ca.cert_pem)
    return TLSState(ca.cert_pem, tls.not_after(cert_pem), reason)


def _ca_secret(c: MySQLCluster, owner: Mapping[str, Any], ca: tls.KeyPair) -> dict:
    return m.owned(secret(c, m.ca_secret_name(c), "tls", {CA_CERT: ca.cert_pem, CA_KEY: ca.key_pem}), owner)


def _tls_secret(c: MySQLCluster, owner: Mapping[str, Any], pair: tls.KeyPair, ca_pem: str) -> dict:
    data = {TLS_CERT: pair.cert_pem, TLS_KEY: pair.key_pem, CA_CERT: ca_pem}
    return m.owned(secret(c, m.tls_secret_name(c), "tls", data, "kubernetes.io/tls"), owner)


def _bundle_secret(c: MySQLCluster, owner: Mapping[str, Any], ca_pem: str) -> dict:
    return m.owned(secret(c, m.ca_bundle_secret_name(c), "tls", {CA_CERT: ca_pem}), owner)


def _create_secrets(
    kube: KubeOps, c: MySQLCluster, owner: Mapping[str, Any], now: dt.datetime, validity: dt.timedelta, names
) -> TLSState | None:
    """Effect: a new CA, server certificate and bundle created; None (nothing overwritten) as
    soon as the CA or the server certificate's Secret exists."""
    ca = tls.new_ca(c.name, now)
    if not kube.create_secret(_ca_secret(c, owner, ca)):
        return None
    pair = tls.server_certificate(ca, names, now, validity)
    if not kube.create_secret(_tls_secret(c, owner, pair, ca.cert_pem)):
        return None
    if not kube.create_secret(_bundle_secret(c, owner, ca.cert_pem)):
        kube.add_secret_keys(
            c.namespace, m.ca_bundle_secret_name(c), _bundle_secret(c, owner, ca.cert_pem)["data"]
        )
    return TLSState(ca.cert_pem, tls.not_after(pair.cert_pem), tls.renewal_reason(None, ca, names, now))


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


def ensure_cert_manager(
    reads: Reads, kube: KubeOps, c: MySQLCluster, owner: Mapping[str, Any], known: TLSState | None = None
) -> TLSState | TLSProblem:
    """Effect: the cert-manager Certificate is applied (when cert-manager is installed) and, once
    the Secret holds a certificate, `<name>-ca-bundle` carries its ca.crt. No `<name>-ca`."""
    ref = c.spec.tls.issuer_ref
    assert ref is not None
    served = reads.served_resources(CERT_MANAGER_GROUP, CERT_MANAGER_VERSION)
    issuer = cert = None
    if served is not None and "certificates" in served:
        cert = kube.apply(m.owned(certificate(c), owner))
        if ref.group == CERT_MANAGER_GROUP:
            issuer = reads.custom_object(
                CERT_MANAGER_GROUP,
                CERT_MANAGER_VERSION,
                ISSUER_PLURALS[ref.kind],
                ref.name,
                None if ref.kind == "ClusterIssuer" else c.namespace,
            )
    secret = reads.secret_data(c.namespace, m.tls_secret_name(c))
    state = cert_manager_verdict(c, served, issuer, secret, cert, known)
    if isinstance(state, TLSState):
        _publish_bundle(reads, kube, c, owner, state.ca_pem)
    return state


def ensure_restore_certificate(
    reads: Reads, kube: KubeOps, c: MySQLCluster, owner: Mapping[str, Any], now: dt.datetime
) -> None:
    """Effect: the restore Job's certificate (Secret restore_tls_secret_name, for the restore
    Service's names) exists, issued by the cluster's CA: by the operator with `<name>-ca`, else
    through a cert-manager Certificate of spec.tls.issuerRef (the Job's Pod waits for its Secret).
    Only the Job's sidecar mounts it, to serve a physical copy the instances verify."""
    name, names = restore_tls_secret_name(c), restore_dns_names(c)
    if c.spec.tls.issuer_ref is not None:
        kube.apply(m.owned(certificate(c, name, names), owner))
        return
    stored = reads.secret_data(c.namespace, m.ca_secret_name(c)) or {}
    ca = tls.KeyPair(stored.get(CA_CERT, ""), stored.get(CA_KEY, ""))
    if not tls.ca_usable(ca, now):
        raise ValueError(f"the cluster's CA (Secret {m.ca_secret_name(c)}) is missing or expired")
    current = reads.secret_data(c.namespace, name)
    if current is not None and tls.renewal_reason(current.get(TLS_CERT), ca, names, now) is None:
        return
    # the Job runs at most its deadline: a certificate left behind is soon of no use
    validity = dt.timedelta(seconds=DEFAULT_DEADLINE_SECONDS + 3600)
    pair = tls.server_certificate(ca, names, now, validity)
    data = {TLS_CERT: pair.cert_pem, TLS_KEY: pair.key_pem, CA_CERT: ca.cert_pem}
    body = m.owned(secret(c, name, "tls", data, "kubernetes.io/tls"), owner)
    if current is None:
        kube.create_secret(body)
    else:
        kube.add_secret_keys(c.namespace, name, body["data"])


def _publish_bundle(
    reads: Reads, kube: KubeOps, c: MySQLCluster, owner: Mapping[str, Any], ca_pem: str
) -> None:
    """Effect: `<name>-ca-bundle` exists and holds `ca_pem` (ca.crt, no key)."""
    bundle = reads.secret_data(c.namespace, m.ca_bundle_secret_name(c))
    body = _bundle_secret(c, owner, ca_pem)
    if bundle is None:
        kube.create_secret(body)
    elif bundle.get(CA_CERT) != ca_pem:
        kube.add_secret_keys(c.namespace, m.ca_bundle_secret_name(c), body["data"])


def serve_current(instances: Mapping[str, DbOps], not_after: dt.datetime) -> list[str]:
    """Effect: make every reachable server serve the certificate that expires at `not_after`
    (reload where it serves an older one). Returns the servers that do not yet (the kubelet has
    not rewritten their files, or they are unreachable): try again later."""
    pending = []
    for name, inst in instances.items():
        try:
            served = inst.tls_not_after()
            if served is not None and served >= not_after:
                continue
            inst.reload_tls()
            served = inst.tls_not_after()
            if served is None or served < not_after:
                pending.append(name)
        except InstanceError as e:
            log.debug("%s: TLS reload check: %s", name, e)
            pending.append(name)
    return pending


__all__ = [
    "TLSProblem",
    "TLSState",
    "cert_manager_verdict",
    "certificate",
    "ensure_cert_manager",
    "ensure_secrets",
    "secret",
    "serve_current",
]
