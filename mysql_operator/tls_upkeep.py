"""Owns one cluster's server certificate over time: ensured (the operator's CA, or cert-manager's
with spec.tls.issuerRef) on a schedule, a renewal announced and pushed to the Pods, every server
made to serve the current certificate, and the problem to report while it cannot be ensured.

    upkeep = TLSUpkeep()                       # one per cluster, kept between passes
    seen = upkeep.observe(reads, cluster, body, resync, now)  # reads, when a check is due
    todo = upkeep.plan(cluster, body, seen, pods)  # the certificate's writes (a renewal announced)
    upkeep.settle(cluster, todo, executor.carry_out(kube, body, [todo.writes], keep_going=True), now)
    upkeep.context()                           # verifies the servers (None until the CA is known)
    upkeep.observe_served(instances, now)      # what each server serves, when a check is due
    upkeep.serve_current(cluster, names)       # the reloads of those serving an older one

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
from mysql_operator import writes as w
from mysql_operator.executor import Done
from mysql_operator import manifests as m
from mysql_operator.api import MySQLCluster
from mysql_operator.db.connection import tls_context
from mysql_operator.db_ops import DbOps
from mysql_operator.survey import attempt
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.cache import Reads
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


@dataclass(frozen=True)
class TLSPlan:
    """One check's outcome as planned: the certificate (or the problem) and its writes."""

    state: certificates.TLSState | certificates.TLSProblem
    certificate: tuple[w.Write, ...] = ()  # what makes the certificate so
    renewal: tuple[w.Write, ...] = ()  # then, a renewal announced

    @property
    def writes(self) -> w.Chain:
        return w.Chain((*self.certificate, *self.renewal))


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

    def plan(
        self,
        c: MySQLCluster,
        body: Mapping[str, Any],
        seen: TLSSeen | None,
        pods: Sequence[Mapping[str, Any]],
    ) -> TLSPlan | None:
        """Pure but for the keys it generates: from what `observe` read (None: nothing due), the
        certificate the cluster is to have and the writes that make it so (the certificate's
        Secrets, cert-manager's Certificate, the CA bundle), one chain; a renewal announced after
        them (a Normal Event, `pods` annotated: the kubelet then rewrites their mounted Secret
        at once instead of at its next periodic sync, up to a minute or more later)."""
        if seen is None:
            return None
        if seen.problem is not None:
            return TLSPlan(seen.problem)
        owner = k.owner_of(body)
        state: certificates.TLSState | certificates.TLSProblem
        if seen.cert_manager is not None:
            state, writes = cert_manager.plan_cert_manager(c, owner, seen.cert_manager, self.state)
        else:
            state, writes = certificates.plan_secrets(c, owner, clock.now(), seen.stored)
        renewed = isinstance(state, certificates.TLSState) and self.state is not None and state.issued
        return TLSPlan(state, tuple(writes), tuple(renewal_writes(state, pods)) if renewed else ())

    def settle(self, c: MySQLCluster, plan: TLSPlan | None, done: Sequence[Done], now: float) -> None:
        """What the plan's writes, as the executor made them (`done`, keep_going), leave: the
        certificate, or the problem (cert-manager missing, issuer not Ready, an API error) that
        keeps what was known and lands in the status (condition, and a Warning Event when the
        user must act); failover goes on with the current certificate. A Secret to create that
        exists already is read at the next check. Raises what the API server answered to the
        renewal's announcement (the certificate is written)."""
        if plan is None:
            return
        state = plan.state
        made, announced = done[: len(plan.certificate)], done[len(plan.certificate) :]
        failed = next((d.error for d in made if d.error is not None), None)
        if isinstance(failed, (ApiException, k.ApplyError)):
            state = tls_api_problem(c, getattr(failed, "status", None), getattr(failed, "reason", None))
        elif failed is not None:
            raise failed
        elif not all(d.made for d in made):
            log.info("%s/%s TLS: a Secret to create exists already: read next", c.namespace, c.name)
            self.spec, self.must_read = None, True  # checked again at the next pass
            return
        self.checked, self.spec = now, c.spec.tls
        if isinstance(state, certificates.TLSProblem):
            if state != self.problem:
                log.warning("%s/%s TLS %s: %s", c.namespace, c.name, state.reason, state.message)
            self.problem = state
            return
        if self.problem is not None:
            log.info("%s/%s TLS: the certificate is available again", c.namespace, c.name)
        self.problem = None
        self.state = state
        error = next((d.error for d in announced if d.error is not None), None)
        if error is not None:
            raise error

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

    def serve_current(self, c: MySQLCluster, names: Sequence[str]) -> list[w.Write]:
        """The servers `observe_served` saw serving an older certificate reload it (the kubelet
        may not have rewritten their files yet: then they are asked again at the next check,
        which also sees the reloaded ones serve it): the reloads, for the executor."""
        state, seen, self.serving = self.state, self.serving, None
        if state is None or seen is None:
            return []
        pending, writes = certificates.reloads(names, seen, state.not_after)
        if not pending:
            self.served = state.not_after
            log.info(
                "%s/%s every server serves the certificate valid until %s",
                c.namespace,
                c.name,
                f"{state.not_after:%Y-%m-%dT%H:%M:%SZ}",
            )
        return writes


def renewal_writes(state: certificates.TLSState, pods: Sequence[Mapping[str, Any]]) -> list[w.Write]:
    """Pure: a renewal announced (a Normal Event) and the Pods annotated with its expiry."""
    until = f"{state.not_after:%Y-%m-%dT%H:%M:%SZ}"
    message = f"server certificate renewed ({state.issued}); valid until {until}: the servers reload it without a restart"
    return [
        w.Post((("Normal", R.CERTIFICATE_RENEWED, message),)),
        *(w.AnnotatePod(p["metadata"]["name"], TLS_ANNOTATION, until) for p in pods),
    ]


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
