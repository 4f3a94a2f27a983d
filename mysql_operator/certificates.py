"""The cluster's TLS Secrets and the servers' reload of a renewed certificate.

    state = ensure_secrets(api, cluster, owner, now)   # creates the CA once, (re)issues the server cert
    pending = serve_current(instances, state.not_after)  # FLUSH SSL where a server serves an older one

Secrets (owned by the MySQLCluster, created only if missing, never taken from elsewhere):
- `<name>-ca`: the CA certificate and key (only the operator reads it);
- `<name>-tls`: the servers' certificate, key and the CA certificate (mounted in server Pods);
- `<name>-ca-bundle`: the CA certificate alone (applications, the operator's Jobs).

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
from mysql_operator.db.instance import Instance, InstanceError
from mysql_operator.k8s import objects as k

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


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(c: MySQLCluster, name: str, component: str, data: Mapping[str, str],
           type_: str = "Opaque") -> dict[str, Any]:
    """Pure: a Secret of the cluster's (values as text)."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": m.metadata(c, name, component), "type": type_,
            "data": {key: _b64(v) for key, v in data.items()}}


def ensure_secrets(api, c: MySQLCluster, owner: Mapping[str, Any], now: dt.datetime) -> TLSState:
    """Effect: the three Secrets exist and the server certificate is current. Never replaces a
    usable CA (every server and client trusts it); a CA that cannot sign for a full server
    validity any more is replaced, and every certificate with it."""
    validity = dt.timedelta(seconds=c.spec.tls.certificate_validity_seconds)
    names = m.server_dns_names(c)
    stored = k.read_secret_data(api, c.namespace, m.ca_secret_name(c)) or {}
    ca = tls.KeyPair(stored.get(CA_CERT, ""), stored.get(CA_KEY, ""))
    new_ca = not tls.ca_usable(ca, now)
    if new_ca:
        ca = tls.new_ca(c.name, now)
        body = m.owned(secret(c, m.ca_secret_name(c), "tls", {CA_CERT: ca.cert_pem, CA_KEY: ca.key_pem}), owner)
        if not stored and not k.create_secret(api, body):  # lost a race: use the one that exists
            return ensure_secrets(api, c, owner, now)
        if stored:
            k.add_secret_keys(api, c.namespace, m.ca_secret_name(c), body["data"])
    current = k.read_secret_data(api, c.namespace, m.tls_secret_name(c))
    reason = "the cluster's CA was replaced" if new_ca and current else \
        tls.renewal_reason((current or {}).get(TLS_CERT), ca, names, now)
    if reason is None and (current or {}).get(CA_CERT) != ca.cert_pem:
        reason = "the CA certificate in the Secret is outdated"
    cert_pem = (current or {}).get(TLS_CERT, "")
    if reason is not None:
        pair = tls.server_certificate(ca, names, now, validity)
        cert_pem = pair.cert_pem
        body = m.owned(secret(c, m.tls_secret_name(c), "tls",
                              {TLS_CERT: pair.cert_pem, TLS_KEY: pair.key_pem, CA_CERT: ca.cert_pem},
                              "kubernetes.io/tls"), owner)
        if current is None:
            if not k.create_secret(api, body):
                return ensure_secrets(api, c, owner, now)
        else:
            k.add_secret_keys(api, c.namespace, m.tls_secret_name(c), body["data"])
    bundle = k.read_secret_data(api, c.namespace, m.ca_bundle_secret_name(c))
    bundle_body = m.owned(secret(c, m.ca_bundle_secret_name(c), "tls", {CA_CERT: ca.cert_pem}), owner)
    if bundle is None:
        k.create_secret(api, bundle_body)
    elif bundle.get(CA_CERT) != ca.cert_pem:
        k.add_secret_keys(api, c.namespace, m.ca_bundle_secret_name(c), bundle_body["data"])
    return TLSState(ca.cert_pem, tls.not_after(cert_pem), reason)


def serve_current(instances: Mapping[str, Instance], not_after: dt.datetime) -> list[str]:
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


__all__ = ["TLSState", "ensure_secrets", "secret", "serve_current"]
