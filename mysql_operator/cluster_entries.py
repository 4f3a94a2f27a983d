"""The Reconciler's clusters: what is kept of each between its passes (its `ClusterEntry`, with
its lock), replaced when a new object takes the name, forgotten with the cluster; and what other
controllers and watches report into it.

`ClusterEntries` is the bottom of the Reconciler's chain of classes (reconcile.py lists them):
it also holds what every stage of the pass uses - the API client, what the pass reads and writes
through (`reads`, `kube`), the password store, the SQL objects, the restart gate, the Jobs'
images."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Mapping

from kubernetes.client.rest import ApiException

from mysql_operator import executor
from mysql_operator import manifests as m
from mysql_operator.k8s.cache import Reads
from mysql_operator.db_ops import DbOps
from mysql_operator.k8s.ops import KubeOps
from mysql_operator.members import Member
from mysql_operator.k8s import jobs
from mysql_operator.passwords import PasswordStore
from mysql_operator.sql_objects import SqlObjects
from mysql_operator.rollout import RestartGate
from mysql_operator.status import Result
from mysql_operator.pass_state import ClusterEntry


class ClusterEntries:
    def __init__(
        self,
        api,
        resolver_mode: str = "auto",
        resync_seconds: float = 60.0,
        apply_timeout: float = 30.0,
        password_factory: Callable[[], str] = m.random_password,
        clock: Callable[[], float] = time.monotonic,
        job_image: str | None = None,
        reads: Reads | None = None,
        exporter_image: str | None = None,
        tools_repository: str | None = None,
        observe: Callable[[str, str, Callable[[], Result]], Result] | None = None,
        operator_upgrades: str = "Auto",
        kube: KubeOps | None = None,
        connect: Callable[[Member], DbOps] | None = None,
    ):
        self.api = api
        # wraps every pass (metrics.observed in the operator: outcome, duration, what it did)
        self._observe = observe or (lambda namespace, name, run: run())
        # what a pass reads (watched stores in the operator; the API server itself by default)
        self.reads = reads or Reads(api)
        self.kube: KubeOps = kube or self.reads  # what the pass writes
        self.execute = executor.carry_out  # the one executor of the pass's planned writes
        # how the engine reaches a server (None: db/instance.Instance, as build_engine makes it)
        self.connect = connect
        self.resolver_mode = resolver_mode
        self.resync_seconds = resync_seconds
        self.apply_timeout = apply_timeout
        self.passwords = PasswordStore(self.reads, self.kube, password_factory, resync_seconds)
        self.sql = SqlObjects(self.reads, self.kube, password_factory)  # MySQLDatabase, MySQLUser, MySQLGrant
        self.clock = clock
        self._entries: dict[tuple[str, str], ClusterEntry] = {}
        self.restarts = RestartGate(clock, operator_upgrades, alive=self._exists)
        self.job_image = job_image or jobs.job_image()  # of the Jobs that work on tenant bytes
        self.exporter_image = exporter_image or jobs.exporter_image()  # the metrics sidecar's
        self.tools_repository = tools_repository or jobs.tools_repository()  # the Jobs' client tools
        self._guard = threading.Lock()

    def _entry(self, namespace: str, name: str, uid: str | None = None) -> ClusterEntry:
        """What is kept of the cluster `namespace/name` between its passes; with `uid`, of that
        object: one left by an earlier object of that name (deleted and created again before
        its deletion was seen) is replaced, and its engine closed, as `forget` does. A pass of
        the old object still running keeps its own entry and its lock; the new object's passes
        never read its state (its recorded primary, its re-seeds under way)."""
        stale = None
        with self._guard:
            entry = self._entries.get((namespace, name))
            if entry is not None and uid and entry.uid and entry.uid != uid:
                stale, entry = entry, None
            if entry is None:
                entry = self._entries[(namespace, name)] = ClusterEntry(uid=uid)
            elif entry.uid is None:
                entry.uid = uid
        if stale is not None and stale.engine:
            stale.engine.close()
        return entry

    def _exists(self, key: str) -> bool:
        """Whether the cluster `namespace/name` exists (true when that cannot be read now)."""
        try:
            return self.reads.cluster(*key.split("/", 1)) is not None
        except ApiException:
            return True

    def forget(self, namespace: str, name: str) -> None:
        self.reads.forget(namespace, name)
        self.restarts.forget(f"{namespace}/{name}")
        with self._guard:
            e = self._entries.pop((namespace, name), None)
        if e and e.engine:
            e.engine.close()

    def close(self) -> None:
        for key in list(self._entries):
            self.forget(*key)

    def report(self, namespace: str, name: str, fields: Mapping[str, Any]) -> None:
        """Status fields another controller owns (BackupController: lastBackup, the
        schedule's runs): the cluster's next pass publishes them (this operator's passes are
        the cluster status's one writer)."""
        with self._guard:
            self._entries.setdefault((namespace, name), ClusterEntry()).reported.update(fields)

    def archiver_seen(self, namespace: str, name: str, status: Mapping[str, Any] | None) -> None:
        """From the archiver Deployment's watch (None: deleted) and its apply."""
        self._entry(namespace, name).archiver = status

    def archiver_pod_seen(self, namespace: str, name: str, trouble: str) -> None:
        """From the archiver Pods' watch: status.archiver_pod_trouble of the latest one seen
        ("": none, or it was deleted)."""
        self._entry(namespace, name).archiver_pod_trouble = trouble
