"""Owns one cluster's server certificate over time: ensured (the operator's CA, or cert-manager's
with spec.tls.issuerRef) on a schedule, a renewal announced and pushed to the Pods, every server
made to serve the current certificate, and the problem to report while it cannot be ensured.

    upkeep = TLSUpkeep()                       # one per cluster, kept between passes
    seen = upkeep.observe(reads, cluster, body, resync, now)  # reads, when a check is due
    renewed = upkeep.ensure(kube, cluster, body, seen, now)  # the certificate, when renewed now
    if renewed: tls_upkeep.renewed(kube, body, pods, renewed)  # Event, Pods annotated (KubeOps)
    upkeep.context()                           # verifies the servers (None until the CA is known)
    upkeep.observe_served(instances, now)      # what each server serves, when a check is due
    upkeep.serve_current(cluster, instances)   # those serving an older one reload it

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

from mysql_operator import cert_manager, certificates, clock
from mysql_operator import manifests as m
from mysql_operator.api import MySQLCluster
from mysql_operator.db.connection import tls_context
from mysql_operator.db_ops import DbOps
from mysql_operator.survey import attempt
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.cache import Reads
from mysql_operator.k8s.ops import KubeOps
from mysql_operator import reasons as R

log = logging.getLogger(__name__)

TLS_ANNOTATION = f"{m.GROUP}/tls-not-after"  # on server Pods: changed when the certificate is renewed
TLS_RELOAD_RETRY_SECONDS = 5.0
TLS_PROBLEM_RECHECK_SECONDS = 5.0  # while the certificate is missing or cert-manager reports a problem


@dataclass(frozen=True)
class TLSSeen:
    """What one check of the certificate read (TLSUpkeep.observe): the operator's Secrets
    (`stored`; None with no cert-manager: a new cluster, nothing read), cert-manager's objects, or
    the API error that stopped the reads."""

    stored: certificates.StoredTLS | None = None
    cert_manager: cert_manager.CertManagerSeen | None = None
    problem: certificates.TLSProblem | None = None


@dataclass
class TLSUpkeep:
    state: certificates.TLSState | None = None  # the cluster's CA and server certificate, as last ensured
    problem: certificates.TLSProblem | None = None  # as last found by ensure (None: fine)
    checked: float = float("-inf")
    spec: Any = None  # the spec.tls last checked: a change is checked at once
    served: dt.datetime | None = None  # the certificate every server was seen serving
    reload_tried: float = float("-inf")
    must_read: bool = False  # a Secret to create existed: the next check reads, even for a new cluster
    serving: dict[str, Any] | None = None  # what each server served at this pass's check (None: none)

    def context(self) -> ssl.SSLContext | None:
        """Verify servers against the cluster's CA once it is known."""
        return tls_context(self.state.ca_pem) if self.state is not None else None

    def observe(
        self, reads: Reads, c: MySQLCluster, body: Mapping[str, Any], resync_seconds: float, now: float
    ) -> TLSSeen | None:
        """Effect (reads only): what the certificate's Secrets (or cert-manager's objects) hold,
        read every resync and at least ten times per certificate validity; every few seconds while
        it is missing or a problem is reported. None: not due. A new cluster (no status, nothing
        known) reads nothing: its Secrets are created. Until the CA is known, the one stored is
        taken as what the servers serve (they are verified with it from this pass on)."""
        every = min(resync_seconds, c.spec.tls.certificate_validity_seconds / 10)
        if self.state is None or self.problem is not None:
            every = min(every, TLS_PROBLEM_RECHECK_SECONDS)
        if self.spec == c.spec.tls and now - self.checked < every:
            return None
        try:
            if c.spec.tls.issuer_ref is not None:
                seen = cert_manager.read_cert_manager(reads, c)
                if self.state is None:
                    found = cert_manager.cert_manager_verdict(c, seen.served, seen.issuer, seen.secret, None)
                    self.state = found if isinstance(found, certificates.TLSState) else None
                return TLSSeen(cert_manager=seen)
            if self.state is None and not body.get("status") and not self.must_read:
                return TLSSeen()
            stored = certificates.read_stored(reads, c)
        except ApiException as e:
            return TLSSeen(problem=tls_api_problem(c, e.status, e.reason))
        if self.state is None:
            self.state = certificates.serving_now(stored)
        return TLSSeen(stored=stored)

    def ensure(
        self, kube: KubeOps, c: MySQLCluster, body: Mapping[str, Any], seen: TLSSeen | None, now: float
    ) -> certificates.TLSState | None:
        """Effect (the certificate's Secrets, cert-manager's objects), from what `observe` read
        (None: nothing due): the cluster's server certificate exists and is current. A problem
        (cert-manager missing, issuer not Ready, an API error) keeps what was known and lands in
        the status (condition, and a Warning Event when the user must act); failover goes on
        with the current certificate. A Secret to create that exists already is read at the
        next check. Returns the certificate when it was renewed just now (then: `renewed`), else
        None."""
        if seen is None:
            return None
        state: certificates.TLSState | certificates.TLSProblem
        try:
            if seen.problem is not None:
                state = seen.problem
            elif seen.cert_manager is not None:
                state = cert_manager.ensure_cert_manager(
                    kube, c, k.owner_of(body), seen.cert_manager, self.state
                )
            else:
                state, writes = certificates.plan_secrets(c, k.owner_of(body), clock.now(), seen.stored)
                if not certificates.write_secrets(kube, writes):
                    log.info("%s/%s TLS: a Secret to create exists already: read next", c.namespace, c.name)
                    self.spec, self.must_read = None, True  # checked again at the next pass
                    return None
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

    def observe_served(self, instances: Mapping[str, DbOps], now: float) -> None:
        """Observe (reads only): what certificate each server serves, every few seconds until
        every server was seen serving the current one (kept for `serve_current`)."""
        self.serving = None
        state = self.state
        if (
            state is None
            or self.served == state.not_after
            or now - self.reload_tried < TLS_RELOAD_RETRY_SECONDS
        ):
            return
        self.reload_tried = now
        self.serving = {name: attempt(inst.tls_not_after) for name, inst in instances.items()}

    def serve_current(self, c: MySQLCluster, instances: Mapping[str, DbOps]) -> None:
        """Effect: the servers `observe_served` saw serving an older certificate reload it (the
        kubelet may not have rewritten their files yet: then they are asked again at the next
        check, which also sees the reloaded ones serve it)."""
        state, seen, self.serving = self.state, self.serving, None
        if state is None or seen is None:
            return
        if not certificates.reload_older(instances, seen, state.not_after):
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
