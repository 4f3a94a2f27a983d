"""The restore gate of a cluster's pass: a cluster restored at creation goes no further while its
restore starts, runs or has failed, and the restore account is dropped from its servers after.

`PassRestore` extends `PassReplication` (pass_replication.py); the gate's observing and carrying
out are restore_gate.py's, its plan restore_plan.py's."""

from __future__ import annotations

import functools
import logging

from mysql_operator import clock
from mysql_operator import manifests as m
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.resolve import resolve
from mysql_operator.db.instance import Instance
from mysql_operator.pods import NO_MOVES
from mysql_operator import restore_gate as gate
from mysql_operator import restore_plan
from mysql_operator.status import Plan, Result
from mysql_operator.pass_state import ClusterEntry, Observed
from mysql_operator.pass_replication import PassReplication

log = logging.getLogger(__name__)


class PassRestore(PassReplication):
    def _restore_plan(
        self, seen: Observed, start_error: str | None = None
    ) -> restore_plan.RestorePlan | None:
        """Observe (reads only) and plan the restore gate (restore_gate.observe_restore,
        restore_plan.plan_restore): None without spec.restore. `start_error`: the plan again
        after its Job's creation was refused (nothing read again)."""
        c, logins = seen.c, seen.logins
        if c.spec.restore is None:
            return None
        if seen.restore_found is None:
            not_ready = restore_plan.not_ready(c, seen.pods, seen.names)
            seen.restore_found = gate.observe_restore(self.reads, c, seen.previous, not_ready)
        return restore_plan.plan_restore(
            c,
            k.owner_of(seen.body),
            seen.restore_found,
            seen.previous,
            seen.pods,
            seen.listed,
            seen.ready,
            logins.secrets,
            logins.error,
            self.job_image,
            self.tools_repository,
            clock.stamp(),
            start_error,
        )

    def _restore(
        self, seen: Observed, entry: ClusterEntry, applied: bool, todo: restore_plan.RestorePlan | None
    ) -> Result | None:
        """The restore gate carried out (restore_gate.py), as `_restore_plan` planned it: the
        Result of a pass held by a restore (it is starting, running, or failed), None when the
        pass may go on."""
        if todo is None:
            return None
        c, body = seen.c, seen.body
        owner = k.owner_of(body)
        gate.carry_out(
            self.reads,
            self.kube,
            c,
            owner,
            todo.writes,
            lambda: self._drop_restore_account(seen, entry),
            self.execute,
        )
        if not todo.held:
            return None
        refused = gate.start(self.reads, self.kube, c, owner, todo.start, self.execute)
        if refused is not None:
            todo = self._restore_plan(seen, refused)
        assert todo is not None and todo.status is not None
        self.execute(self.kube, body, Plan(NO_MOVES, todo.events, todo.status, todo.changed).writes())
        return Result(phase=todo.status["phase"], applied=applied, status={**seen.previous, **todo.status})

    def _drop_restore_account(self, seen: Observed, entry: ClusterEntry) -> None:
        """Effect: gate.drop_restore_account on every server whose Pod runs, as the operator's
        account over TLS (one that does not run has nothing to log in to: left, and logged)."""
        c, password = seen.c, seen.logins.current.get(m.OPERATOR_PASSWORD_KEY)
        if not password or entry.tls.state is None:
            log.warning("%s/%s: the restore account is left: no credentials or CA yet", c.namespace, c.name)
            return
        servers = []
        for o in seen.ordinals:
            host, port = resolve(c, o, seen.raw_pods.get(o), self.resolver_mode)
            name = seen.names[o]
            if host is None or not (seen.pods.get(o) and seen.pods[o].running):
                log.warning(
                    "%s/%s: the restore account is left on %s: not running", c.namespace, c.name, name
                )
                continue
            servers.append(
                (
                    name,
                    functools.partial(
                        Instance,
                        host,
                        port,
                        m.OPERATOR_USER,
                        password,
                        name=name,
                        tls=entry.tls.context(),
                        read_timeout=10,
                    ),
                )
            )
        gate.drop_restore_account(servers)
