"""The cluster's TLS Secrets and the servers' reload of a renewed certificate.

    stored = read_stored(reads, cluster)                       # observe: the three Secrets
    state, writes = plan_secrets(cluster, owner, now, stored)  # the CA kept, the server cert (re)issued
    executor.carry_out(kube, body, [Chain(writes)])            # act
    pending, writes = reloads(names, served, state.not_after)  # ReloadTLS where one served an older one

Secrets (owned by the MySQLCluster, created only if missing, never taken from elsewhere):
- `<name>-ca`: the CA certificate and key (only the operator reads it);
- `<name>-tls`: the servers' certificate, key and the CA certificate (mounted in server Pods);
- `<name>-ca-bundle`: the CA certificate alone (applications, the operator's Jobs).

With `spec.tls.issuerRef` cert-manager makes the certificate instead (no `<name>-ca`):

    seen = read_cert_manager(reads, cluster)
    state, writes = plan_cert_manager(cluster, owner, seen, known)   # a TLSState, or a TLSProblem to report

applies a cert-manager `Certificate` `<name>-tls` (owned by the MySQLCluster) that writes the same
`<name>-tls` Secret the Pods mount, with the same names, and publishes `<name>-ca-bundle` from the
`ca.crt` cert-manager puts in it. cert-manager renews it; the operator notices a new certificate
in the Secret and has the servers reload it, as for its own. What to make of what the API server
says (`plan_secrets`, `certificate`, `cert_manager_verdict`, `plan_cert_manager`) is pure;
`read_*` only read; the writes are the executor's (executor.py).

A renewed certificate reaches the Pods when the kubelet rewrites the mounted Secret; the operator
then asks each server to reload its certificate (no restart) and checks what it serves. A server
that still serves an older certificate is retried on the next pass.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from mysql_operator import manifests as m
from mysql_operator import executor, tls
from mysql_operator.api import MySQLCluster
from mysql_operator.db.observation import InstanceError
from mysql_operator.k8s.cache import Reads
from mysql_operator.k8s.ops import KubeOps
from mysql_operator.writes import Chain, ReloadTLS, SecretWrite

log = logging.getLogger(__name__)

CA_CERT, CA_KEY = "ca.crt", "ca.key"
TLS_CERT, TLS_KEY = "tls.crt", "tls.key"


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


@dataclass(frozen=True)
class StoredTLS:
    """The cluster's certificate Secrets as the API server has them (decoded data; None: absent)."""

    ca: Mapping[str, str] | None
    tls: Mapping[str, str] | None
    bundle: Mapping[str, str] | None


def read_stored(reads: Reads, c: MySQLCluster) -> StoredTLS:
    """Effect (reads only): `<name>-ca`, `<name>-tls` and `<name>-ca-bundle`."""
    return StoredTLS(
        reads.secret_data(c.namespace, m.ca_secret_name(c)),
        reads.secret_data(c.namespace, m.tls_secret_name(c)),
        reads.secret_data(c.namespace, m.ca_bundle_secret_name(c)),
    )


def serving_now(stored: StoredTLS) -> TLSState | None:
    """Pure: what the servers serve now, as stored: the CA they are verified with and their
    certificate's expiry (also when the plan replaces the CA: until then they serve the old
    one); None without both."""
    ca_pem, cert = (stored.ca or {}).get(CA_CERT), (stored.tls or {}).get(TLS_CERT)
    if not ca_pem or not cert:
        return None
    try:
        return TLSState(ca_pem, tls.not_after(cert))
    except ValueError:
        return None


def plan_secrets(
    c: MySQLCluster, owner: Mapping[str, Any], now: dt.datetime, stored: StoredTLS | None
) -> tuple[TLSState, list[SecretWrite]]:
    """Pure but for the keys it generates: the certificate the servers are to serve and the
    writes that store it, from what is stored (None: a new cluster, nothing read: all three
    created). Never replaces a usable CA (every server and client trusts it); a CA that cannot
    sign for a full server validity any more is replaced, and every certificate with it."""
    validity = dt.timedelta(seconds=c.spec.tls.certificate_validity_seconds)
    names = m.server_dns_names(c)
    if stored is None:
        ca = tls.new_ca(c.name, now)
        pair = tls.server_certificate(ca, names, now, validity)
        writes = [
            SecretWrite(_ca_secret(c, owner, ca), True),
            SecretWrite(_tls_secret(c, owner, pair, ca.cert_pem), True),
            SecretWrite(_bundle_secret(c, owner, ca.cert_pem), True, or_keys=True),
        ]
        state = TLSState(ca.cert_pem, tls.not_after(pair.cert_pem), tls.renewal_reason(None, ca, names, now))
        return state, writes
    writes = []
    ca = tls.KeyPair((stored.ca or {}).get(CA_CERT, ""), (stored.ca or {}).get(CA_KEY, ""))
    new_ca = not tls.ca_usable(ca, now)
    if new_ca:
        ca = tls.new_ca(c.name, now)
        writes.append(SecretWrite(_ca_secret(c, owner, ca), not stored.ca))
    current = stored.tls
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
        writes.append(SecretWrite(_tls_secret(c, owner, pair, ca.cert_pem), current is None))
    writes += bundle_writes(c, owner, stored.bundle, ca.cert_pem)
    return TLSState(ca.cert_pem, tls.not_after(cert_pem), reason), writes


def write_secrets(kube: KubeOps, writes: list[SecretWrite]) -> bool:
    """Effect: the writes, in order, through the executor. False when a Secret to create exists
    already (an earlier object of the cluster's name left it, or another writer was first): the
    rest is not written, and the next check reads what is there."""
    return all(d.made for d in executor.carry_out(kube, {}, [Chain(tuple(writes))]))


def _ca_secret(c: MySQLCluster, owner: Mapping[str, Any], ca: tls.KeyPair) -> dict:
    return m.owned(secret(c, m.ca_secret_name(c), "tls", {CA_CERT: ca.cert_pem, CA_KEY: ca.key_pem}), owner)


def _tls_secret(c: MySQLCluster, owner: Mapping[str, Any], pair: tls.KeyPair, ca_pem: str) -> dict:
    data = {TLS_CERT: pair.cert_pem, TLS_KEY: pair.key_pem, CA_CERT: ca_pem}
    return m.owned(secret(c, m.tls_secret_name(c), "tls", data, "kubernetes.io/tls"), owner)


def _bundle_secret(c: MySQLCluster, owner: Mapping[str, Any], ca_pem: str) -> dict:
    return m.owned(secret(c, m.ca_bundle_secret_name(c), "tls", {CA_CERT: ca_pem}), owner)


def bundle_writes(
    c: MySQLCluster, owner: Mapping[str, Any], bundle: Mapping[str, str] | None, ca_pem: str
) -> list[SecretWrite]:
    """Pure: what makes `<name>-ca-bundle` hold `ca_pem` (ca.crt, no key), from what it holds."""
    if bundle is not None and bundle.get(CA_CERT) == ca_pem:
        return []
    return [SecretWrite(_bundle_secret(c, owner, ca_pem), bundle is None, or_keys=True)]


def reloads(
    names: Iterable[str], served: Mapping[str, Any], not_after: dt.datetime
) -> tuple[list[str], list[ReloadTLS]]:
    """Pure: the servers (`names`) not seen serving the certificate that expires at `not_after`
    yet (`served`: name -> when what it served expires, None without TLS, or the InstanceError of
    the read): checked again later; and the reloads of those seen serving an older one."""
    pending, writes = [], []
    for name in names:
        was = served.get(name)
        if isinstance(was, dt.datetime) and was >= not_after:
            continue
        pending.append(name)
        if not isinstance(was, InstanceError) and name in served:
            writes.append(ReloadTLS(name))
    return pending, writes


__all__ = [
    "SecretWrite",
    "StoredTLS",
    "TLSProblem",
    "TLSState",
    "plan_secrets",
    "read_stored",
    "secret",
    "reloads",
    "serving_now",
    "write_secrets",
]
