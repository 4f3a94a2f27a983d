"""What a cluster's pass keeps up before it talks to a server: the spec fields this version
ignores said once, the credentials read (`Logins`), the certificate ensured and every owned
object applied when due.

`PassUpkeep` extends `PassRestore` (pass_restore.py); owned.py applies the owned objects,
tls_upkeep.py keeps the certificate, passwords.py the credentials."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from mysql_operator import __version__
from mysql_operator.api import MySQLCluster
from mysql_operator.k8s import objects as k
from mysql_operator.credentials import rotation_pending
from mysql_operator.pods import pod_ordinal
from mysql_operator.executor import Done
from mysql_operator import writes as w
from mysql_operator.owned import OwnedPlan, plan_owned, settle
from mysql_operator.rollout import restarting_now
from mysql_operator.tls_upkeep import TLSPlan, TLSSeen
from mysql_operator import reasons as R
from mysql_operator.pass_state import ClusterEntry, Logins, essence
from mysql_operator.pass_restore import PassRestore

log = logging.getLogger(__name__)

APPLY_RETRY_SECONDS = 10.0  # while an owned object is not applied (and at once on a spec change)


class PassUpkeep(PassRestore):
    def _unknown_fields(self, c: MySQLCluster, entry: ClusterEntry) -> list[w.Write]:
        """Warnings, once per generation, naming the spec fields this version ignores: ones it
        does not know, and older spellings set beside the newer field that supersedes them."""
        said_now = (c.generation, c.ignored, c.superseded)
        if not (c.ignored or c.superseded) or entry.ignored_said == said_now:
            return []
        entry.ignored_said = said_now
        events = []
        if c.ignored:
            said = (
                f"{', '.join(c.ignored)}: not known to this operator version ({__version__}), ignored. "
                "The CRD is newer than the operator (a rollback, or an upgrade under way): upgrade "
                "the operator, or remove the field"
            )
            events.append(("Warning", R.UNKNOWN_FIELDS, said))
        if c.superseded:
            said = "; ".join(f"{older} is ignored: {newer} is set" for older, newer in c.superseded) + (
                " (the older spelling; an object created before the newer field has the older one's "
                "default stored): remove the older field"
            )
            events.append(("Warning", R.SUPERSEDED_FIELDS, said))
        return [w.Post(tuple(events))]

    def _logins(self, c: MySQLCluster, body: Mapping[str, Any]) -> Logins:
        """The credentials Secret (created if missing) and the record of what the servers have."""
        new_cluster = not body.get("status")  # its Secrets are created without reads first
        passwords, error = self.passwords.current(c, k.owner_of(body), new_cluster)
        if error is not None:
            return Logins(passwords, error)
        on_servers, version = self.passwords.applied(c, k.owner_of(body), passwords, new_cluster)
        return Logins(passwords, None, on_servers, version, rotation_pending(passwords, on_servers))

    def _apply_due(
        self, c: MySQLCluster, entry: ClusterEntry, previous: Mapping[str, Any], apply: bool | None
    ) -> bool:
        """Whether this pass applies every owned object: `apply` True: now; None: at the resync,
        sooner while one is refused, and on a new generation."""
        every = self.resync_seconds
        if entry.apply_error or entry.restart_pending:  # again soon: it may go through now
            every = min(APPLY_RETRY_SECONDS, every)
        due = self.clock() - entry.last_apply >= every
        return bool(apply or (apply is None and due) or previous.get("observedGeneration") != c.generation)

    def _plan_upkeep(
        self,
        c: MySQLCluster,
        body: Mapping[str, Any],
        entry: ClusterEntry,
        logins: Logins,
        previous: Mapping[str, Any],
        pods: list[dict],
        tls_seen: TLSSeen | None,
        live: Mapping[str, Any] | None,
        due: bool,
    ) -> UpkeepPlan:
        """Reads only (what `plan_owned` may ask): the writes that need no server - the unknown
        fields said, the certificate from what was read of it (`tls_seen`; a renewal announced to
        `pods`, the cluster's), and every owned object's when `due` (`_apply_due`; `live`: the
        StatefulSet as the API server had it, None: none)."""
        owned = None
        if due:
            owned = plan_owned(
                live,
                self.restarts,
                lambda: restarting_now(self.reads),
                self.kube.dry_run_apply,
                self.job_image,
                self.exporter_image,
                self.tools_repository,
                c,
                body,
                logins.passwords,
                pod_ordinal(previous.get("currentPrimary") or "", c.name),
                entry.claims,
            )
        return UpkeepPlan(
            tuple(self._unknown_fields(c, entry)), entry.tls.plan(c, body, tls_seen, pods), owned
        )

    def _upkeep(
        self, body: Mapping[str, Any], c: MySQLCluster, entry: ClusterEntry, logins: Logins, todo: UpkeepPlan
    ) -> bool:
        """Effect: the plan's writes through the executor, in its order, one refused stopping none
        of the others; then what they leave (the certificate, the owned objects' refusal for the
        status). Whether every owned object applied in this pass. Raises, after, what the API
        server answered to an Event."""
        done = self.execute(self.kube, body, todo.steps(), keep_going=True)
        said, done = done[: len(todo.unknown)], done[len(todo.unknown) :]
        tls_done = done[: len(todo.tls.writes.writes)] if todo.tls is not None else []
        applied = self._applied(c, entry, logins, todo.owned, done[len(tls_done) :], body)
        entry.tls.settle(c, todo.tls, tls_done, self.clock())
        refused = next((d.error for d in said if d.error is not None), None)
        if refused is not None:
            raise refused
        return applied

    def _applied(
        self,
        c: MySQLCluster,
        entry: ClusterEntry,
        logins: Logins,
        owned: OwnedPlan | None,
        done: Sequence[Done],
        body: Mapping[str, Any],
    ) -> bool:
        """What the owned objects' writes left, kept for the next passes and the status."""
        if owned is None:
            return False
        applied = settle(owned, done, logins.secrets)
        entry.claims = applied.claims
        if applied.placed:
            entry.restart_pending = applied.staged
        if applied.archiver is not None:
            entry.archiver = applied.archiver
        error = applied.refused
        if error != entry.apply_error:
            log.log(
                logging.WARNING if error else logging.INFO,
                "%s/%s apply: %s",
                c.namespace,
                c.name,
                error or "ok",
            )
        entry.apply_error, entry.last_apply = error, self.clock()
        if error is None:
            entry.applied_essence = essence(body)
        return error is None


@dataclass(frozen=True)
class UpkeepPlan:
    """The writes of a pass that need no server, in this order."""

    unknown: tuple[w.Write, ...]  # the spec fields this version ignores, said
    tls: TLSPlan | None  # the certificate (None: no check due)
    owned: OwnedPlan | None  # the owned objects (None: no apply due)

    def steps(self) -> list[w.Step]:
        return [
            *self.unknown,
            *([self.tls.writes] if self.tls is not None else []),
            *(self.owned.writes if self.owned is not None else ()),
        ]
