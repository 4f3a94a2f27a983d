"""Owns one cluster's server certificate over time: ensured (the operator's CA, or cert-manager's
with spec.tls.issuerRef) on a schedule, a renewal announced and pushed to the Pods, every server
made to serve the current certificate, and the problem to report while it cannot be ensured.

    upkeep = TLSUpkeep()                       # one per cluster, kept between passes
    renewed = upkeep.ensure(reads, kube, cluster, body, resync, now)  # the certificate, when renewed now
    if renewed: tls_upkeep.renewed(kube, body, pods, renewed)  # Event, Pods annotated (KubeOps)
    upkeep.context()                           # verifies the servers (None until the CA is known)
    upkeep.serve_current(cluster, instances, now)

What the certificates are and how the servers reload them is certificates.py; this module only
decides when to look again and keeps what it last found.
"""

from __future__ import annotations

import datetime as dt
import logging
import ssl
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from kubernetes.client.rest import ApiException

from mysql_operator import certificates, clock
from mysql_operator import manifests as m
from mysql_operator.api import MySQLCluster
from mysql_operator.db.connection import tls_context
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.cache import Reads
from mysql_operator.k8s.ops import KubeOps
from mysql_operator import reasons as R

log = logging.getLogger(__name__)

TLS_ANNOTATION = f"{m.GROUP}/tls-not-after"  # on server Pods: changed when the certificate is renewed
TLS_RELOAD_RETRY_SECONDS = 5.0
TLS_PROBLEM_RECHECK_SECONDS = 5.0  # while the certificate is missing or cert-manager reports a problem


@dataclass
class TLSUpkeep:
    state: certificates.TLSState | None = None  # the cluster's CA and server certificate, as last ensured
    problem: certificates.TLSProblem | None = None  # as last found by ensure (None: fine)
    checked: float = float("-inf")
    spec: Any = None  # the spec.tls last checked: a change is checked at once
    served: dt.datetime | None = None  # the certificate every server was seen serving
    reload_tried: float = float("-inf")

    def context(self) -> ssl.SSLContext | None:
        """Verify servers against the cluster's CA once it is known."""
        return tls_context(self.state.ca_pem) if self.state is not None else None

    def ensure(
        self,
        reads: Reads,
        kube: KubeOps,
        c: MySQLCluster,
        body: Mapping[str, Any],
        resync_seconds: float,
        now: float,
    ) -> certificates.TLSState | None:
        """Effect (the certificate's Secrets, cert-manager's objects): the cluster's server
        certificate exists and is current, checked every resync and at least ten times per
        certificate validity; every few seconds while it is missing or a problem is reported. A
        problem (cert-manager missing, issuer not Ready, an API error) keeps what was known and
        lands in the status (condition, and a Warning Event when the user must act); failover
        goes on with the current certificate. Returns the certificate when it was renewed just
        now (then: `renewed`), else None."""
        every = min(resync_seconds, c.spec.tls.certificate_validity_seconds / 10)
        if self.state is None or self.problem is not None:
            every = min(every, TLS_PROBLEM_RECHECK_SECONDS)
        if self.spec == c.spec.tls and now - self.checked < every:
            return None
        try:
            if c.spec.tls.issuer_ref is not None:
                state = certificates.ensure_cert_manager(reads, kube, c, k.owner_of(body), self.state)
            else:
                new_cluster = self.state is None and not body.get("status")
                state = certificates.ensure_secrets(
                    reads, kube, c, k.owner_of(body), clock.now(), new_cluster
                )
        except (ApiException, k.ApplyError) as e:
            state = tls_api_problem(c, getattr(e, "status", None), getattr(e, "reason", None))
        self.checked, self.spec = now, c.spec.tls
        if isinstance(state, certificates.TLSProblem):
            if state != self.problem:
                log.warning("%s/%s TLS %s: %s", c.namespace, c.name, state.reason, state.message)
            self.problem = state
            return None
        if self.problem is not None:
            log.info("%s/%s TLS: the certificate is available again", c.namespace, c.name)
        self.problem = None
        renewed = self.state is not None and state.issued is not None
        self.state = state
        return state if renewed else None

    def serve_current(self, c: MySQLCluster, instances, now: float) -> None:
        """Effect: every server serves the current certificate (reloaded where it serves an older
        one); retried every few seconds until the kubelet has rewritten the files everywhere."""
        state = self.state
        if state is None or self.served == state.not_after:
            return
        if now - self.reload_tried < TLS_RELOAD_RETRY_SECONDS:
            return
        self.reload_tried = now
        if not certificates.serve_current(instances, state.not_after):
            self.served = state.not_after
            log.info(
                "%s/%s every server serves the certificate valid until %s",
                c.namespace,
                c.name,
                f"{state.not_after:%Y-%m-%dT%H:%M:%SZ}",
            )


def renewed(kube: KubeOps, body: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], state) -> None:
    """Effect: a renewal announced (a Normal Event), and the Pods annotated: an annotation change
    makes the kubelet sync them now, which rewrites the mounted Secret (instead of at its next
    periodic sync, up to a minute or more later)."""
    meta = body["metadata"]
    until = f"{state.not_after:%Y-%m-%dT%H:%M:%SZ}"
    message = f"server certificate renewed ({state.issued}); valid until {until}: the servers reload it without a restart"
    kube.post_events(body, [("Normal", R.CERTIFICATE_RENEWED, message)])
    log.info("%s/%s CertificateRenewed: %s", meta["namespace"], meta["name"], message)
    for p in pods:
        kube.annotate_pod(meta["namespace"], p["metadata"]["name"], TLS_ANNOTATION, until)


def tls_api_problem(c: MySQLCluster, status: int | None, reason: str | None) -> certificates.TLSProblem:
    """Pure: an API error while ensuring the certificate, as a problem the status reports (the
    servers keep their current certificate meanwhile)."""
    answer = f"HTTP {status} {reason or ''}".strip() if status else (reason or "no answer")
    if c.spec.tls.issuer_ref is not None:
        return certificates.TLSProblem(
            R.CERT_MANAGER_API_ERROR,
            (
                f"spec.tls.issuerRef: reading or applying cert-manager objects (Certificate "
                f"{m.tls_secret_name(c)}, the issuer) or Secret {m.tls_secret_name(c)} failed: {answer}: "
                "check the operator's permissions (the chart's RBAC) and the API server"
            ),
        )
    return certificates.TLSProblem(
        R.TLS_SECRETS_API_ERROR,
        (
            f"TLS Secrets {m.ca_secret_name(c)}, {m.tls_secret_name(c)}, {m.ca_bundle_secret_name(c)}: "
            f"the API server answered {answer}: check the operator's permissions (the chart's RBAC) "
            "and the API server"
        ),
    )


def serves_tls(pods: Sequence[Mapping[str, Any]]) -> bool:
    """Pure: every server Pod runs with the certificate mounted (and so, from the same template,
    with ssl_* in its my.cnf). A cluster from before TLS replicates in plaintext until its rolling
    update is complete: a replica must never require TLS from a source that cannot offer it."""
    return bool(pods) and all(
        any(v.get("name") == "tls" for v in (p.get("spec") or {}).get("volumes") or []) for p in pods
    )
