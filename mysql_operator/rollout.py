"""The rolling update's glue: its next step from the StatefulSet's revision and the Pods, the one
Pod the plan names deleted; the Pod template written into the StatefulSet, or kept while a restart a new
operator version needs is staged (RestartGate: one cluster at a time). The plans themselves
(which Pod, when, the primary last; which template) are rolling.py."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import threading
import time
from typing import Any, Callable, Iterable, Mapping


from mysql_operator import manifests as m
from mysql_operator import rolling
from mysql_operator import topology as t
from mysql_operator.api import MySQLCluster
from mysql_operator import writes as w
from mysql_operator.pods import pod_ordinal, pod_views
from mysql_operator import reasons as R


log = logging.getLogger(__name__)


def roll_pods(
    cluster_name: str,
    pods: Iterable[Mapping[str, Any]],
    observed: Iterable[t.InstanceState],
    primary: str | None,
) -> list[rolling.RollPod]:
    """Pure: what mysql_operator/rolling.py needs from the listed Pods and the observed servers."""
    by_name = {i.name: i for i in observed}
    views = pod_views(cluster_name, pods)
    out = []
    for p in pods:
        meta = p.get("metadata") or {}
        ordinal = pod_ordinal(meta.get("name", ""), cluster_name)
        if ordinal is None:
            continue
        v, i = views[ordinal], by_name.get(meta["name"])
        replicating = bool(
            i and i.reachable and primary and i.source == primary and i.io_running and i.sql_running
        )
        out.append(
            rolling.RollPod(
                v.name,
                ordinal,
                (meta.get("labels") or {}).get(rolling.REVISION_LABEL),
                ready=v.ready,
                deleting=v.deleting,
                replicating=replicating,
                stuck=v.waiting,
            )
        )
    return out


def roll_desired(
    pinned: str | None, roll: rolling.RollStep | None, revision: str | None, pods: Iterable[Mapping[str, Any]]
) -> str | None:
    """Pure: the primary the engine should aim for during a roll. A SwitchTo moves it; the
    target of a switchover request not done yet (`pinned`: switchover.py) on a Pod still on the old
    revision is not switched to until that Pod was updated (else the roll would bounce the
    primary back before restarting it): the request waits for the roll."""
    if isinstance(roll, rolling.SwitchTo):
        return roll.name
    if pinned is None or roll is None or isinstance(roll, rolling.Done):
        return pinned
    pinned_pod = next((p for p in pods if (p.get("metadata") or {}).get("name") == pinned), None)
    if pinned_pod is None or revision is None:
        return pinned
    current = ((pinned_pod.get("metadata") or {}).get("labels") or {}).get(rolling.REVISION_LABEL)
    return pinned if current == revision else None


def roll_step(
    sts: Mapping[str, Any] | None, c: MySQLCluster, listed, observed, primary
) -> tuple[rolling.RollStep | None, str | None]:
    """Pure: the next roll step (None: no roll) and the StatefulSet's update revision."""
    if primary is None or sts is None:
        return None, None
    revision = rolling.update_revision(sts)
    if revision is None:
        return None, None
    return rolling.next_step(
        roll_pods(c.name, listed, observed, primary), revision, primary, c.spec.instances
    ), revision


def roll_delete(body, decision, roll) -> list[w.Step]:
    """Pure: delete the outdated Pod, only when the topology is settled (Healthy): never during
    a failover, a switchover or while a replica is being configured (`restarted` names it)."""
    if not isinstance(roll, rolling.DeletePod) or not isinstance(decision, t.Healthy):
        return []
    return [_restart(roll, R.ROLLING_UPDATE, "restarting")]


def replace_stuck(c: MySQLCluster, listed, sts: Mapping[str, Any] | None) -> list[w.Step]:
    """Pure: delete the outdated Pod that does not run (rolling.replace_stuck), at any point of
    the cluster's life (a first Pod that cannot pull its image has no primary to wait for)."""
    step = rolling.replace_stuck(roll_pods(c.name, listed, (), None), rolling.update_revision(sts))
    return [] if step is None else [_restart(step, R.REPLACED_STUCK_POD, "replacing")]


def _restart(step: rolling.DeletePod, reason: str, doing: str) -> w.Chain:
    """Pure: the Pod deleted (its StatefulSet starts it again with the current template on the
    same volume), then a Normal Event saying why."""
    return w.Chain(
        (w.DeletePod(step.name), w.Post((("Normal", reason, f"{doing} {step.name}: {step.reason}"),)))
    )


def restarted(done: Iterable[Any]) -> str | None:
    """Pure: the Pod a restart's writes deleted, as the executor made them (None: none was)."""
    return next((d.write.pod for d in done if isinstance(d.write, w.DeletePod) and d.made), None)


class RestartGate:
    """The clusters of this operator whose Pods are being restarted (a roll under way): a restart
    a new operator version needs starts only while no other cluster's is under way. In memory,
    and a turn is also refused while another cluster's StatefulSet shows Pods not on its template
    (`take`'s `restarting`): a roll an operator process started before a restart still holds.

    A turn ends when nothing is outdated and every Pod is Ready (the last restarted one too).
    A cluster that just took its turn may still see its old StatefulSet (a cache, a controller
    that has not observed the new template yet): its "nothing outdated" does not end its turn
    until a pass saw the roll under way, or STARTING_SECONDS passed.

    A deleted cluster holds no turn: `forget` frees it, and a pass of it still running when it
    was deleted may mark it rolling again afterwards, so a turn is only held while `alive` says
    the cluster exists (asked outside the lock, of the other clusters only)."""

    STARTING_SECONDS = 120.0

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        default_policy: str = "Auto",
        alive: Callable[[str], bool] = lambda key: True,
    ) -> None:
        self.default_policy = default_policy  # for a cluster whose spec.operatorUpgrades is not set
        self._lock = threading.Lock()
        self._rolling: set[str] = set()
        self._started: dict[str, float] = {}  # turns taken, the roll not seen under way yet
        self._clock = clock
        self._alive = alive

    def seen(self, key: str, roll: rolling.RollStep | None, settled: bool = True) -> None:
        """A pass's roll step (None: not known in this pass); `settled`: every Pod is Ready."""
        if roll is None:
            return
        with self._lock:
            if not isinstance(roll, rolling.Done):
                self._rolling.add(key)
                self._started.pop(key, None)
            elif not settled and key in self._rolling:
                return  # its last restarted Pod is not serving yet
            elif self._clock() - self._started.get(key, float("-inf")) >= self.STARTING_SECONDS:
                self._rolling.discard(key)
                self._started.pop(key, None)

    def other(self, key: str) -> str | None:
        self._prune(key)
        with self._lock:
            return self._other(key)

    def _prune(self, key: str) -> None:
        """The turns of other clusters that no longer exist freed."""
        with self._lock:
            others = self._rolling - {key}
        for gone in [other for other in others if not self._alive(other)]:
            self.forget(gone)

    def _other(self, key: str) -> str | None:  # under the lock
        return min(self._rolling - {key}, default=None)

    def take(self, key: str, restarting: Iterable[str] = ()) -> str | None:
        """Start `key`'s restart unless another cluster's is under way (then: that one): one this
        gate holds, or one of `restarting` (clusters whose StatefulSets show a roll under way: after
        an operator restart the gate itself has not seen them yet)."""
        self._prune(key)
        with self._lock:
            other = self._other(key) or min(set(restarting) - {key}, default=None)
            if other is None:
                self._rolling.add(key)
                self._started[key] = self._clock()
            return other

    def forget(self, key: str) -> None:
        with self._lock:
            self._rolling.discard(key)
            self._started.pop(key, None)


def restarting_clusters(statefulsets: Iterable[Mapping[str, Any]], clusters: Mapping[str, str]) -> set[str]:
    """Pure: namespace/name of the clusters whose database StatefulSet has a roll under way. Only
    a StatefulSet an existing MySQLCluster controls counts (`clusters`: uid -> namespace/name;
    rolling.controlling_cluster): one labelled like the operator's but owned by no cluster holds
    no turn."""
    out = set()
    for s in statefulsets:
        labels = (s.get("metadata") or {}).get("labels") or {}
        if labels.get("app.kubernetes.io/component") != m.COMPONENT_DATABASE or not rolling.restarting(s):
            continue
        owner = rolling.controlling_cluster(s, clusters)
        if owner is not None:
            out.add(owner)
    return out


def restarting_now(reads: Any) -> set[str]:
    """Effect (reads): the clusters whose StatefulSets show a roll under way now, from what the
    operator sees (k8s/cache.Reads: its StatefulSets and the MySQLClusters that exist)."""
    return restarting_clusters(reads.owned_statefulsets(), reads.clusters_by_uid())


def template_hash(sts: Mapping[str, Any]) -> str:
    """Pure: a digest of the Pod template the operator builds (its canonical JSON)."""
    text = json.dumps(sts["spec"]["template"], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def written_template(existing: Mapping[str, Any], observed_generation: int | None) -> rolling.Written:
    """Pure: what the StatefulSet's annotations say about its template. One an older operator
    wrote has none: it was written from the spec the status had observed."""
    notes = (existing.get("metadata") or {}).get("annotations") or {}
    generation = notes.get(rolling.TEMPLATE_GENERATION_ANNOTATION)
    return rolling.Written(
        notes.get(rolling.APPLIED_TEMPLATE_ANNOTATION),
        notes.get(rolling.WANTED_TEMPLATE_ANNOTATION),
        int(generation) if generation and generation.isdigit() else observed_generation,
    )


def place_template(
    gate: RestartGate,
    c: MySQLCluster,
    body,
    obj: dict,
    existing: Mapping[str, Any] | None,
    dry_run: Callable[[dict], Mapping[str, Any]],
    restarting: Callable[[], set[str]] = set,
) -> tuple[rolling.TemplateStep, list[tuple[str, str, str]]]:
    """`obj` (the StatefulSet to apply) gets the Pod template rolling.template_step chooses: its
    own, or the existing one while a restart is staged; and the annotations that record which.
    Reads only: asks the API server (`dry_run`, a dry-run apply) whether the template would change
    when an older operator wrote it. Returns the step and the Events to post before the apply: a
    restart staged, an operator's restart started."""
    desired = template_hash(obj)
    key = f"{c.namespace}/{c.name}"
    written = None
    if existing is not None:
        written = written_template(existing, (body.get("status") or {}).get("observedGeneration"))
    same = False
    if written is not None and written.applied is None:
        dry = dry_run(obj)
        same = (dry.get("spec") or {}).get("template") == (existing.get("spec") or {}).get("template")
    approved = rolling.APPROVE_RESTART_ANNOTATION in ((body.get("metadata") or {}).get("annotations") or {})

    policy = rolling.Policy(c.spec.operator_upgrades or gate.default_policy, bool(c.spec.operator_upgrades))

    def step_for(elsewhere: str | None) -> rolling.TemplateStep:
        return rolling.template_step(written, desired, c.generation, same, policy, approved, elsewhere)

    step = step_for(gate.other(key))
    if isinstance(step, rolling.WriteTemplate) and step.operator_change:
        taken_by = gate.take(key, restarting())
        if taken_by is not None:  # another cluster started in between
            step = step_for(taken_by)
    notes = obj["metadata"].setdefault("annotations", {})
    notes[rolling.TEMPLATE_GENERATION_ANNOTATION] = str(c.generation)
    notes[rolling.WANTED_TEMPLATE_ANNOTATION] = desired
    if isinstance(step, rolling.StageTemplate):
        assert existing is not None and written is not None
        obj["spec"]["template"] = copy.deepcopy(existing["spec"]["template"])
        if written.applied is not None:
            notes[rolling.APPLIED_TEMPLATE_ANNOTATION] = written.applied
        return step, [("Normal", R.RESTART_PENDING, step.message)] if written.wanted != desired else []
    notes[rolling.APPLIED_TEMPLATE_ANNOTATION] = desired
    if step.operator_change:  # (the executor logs the Event it posts)
        return step, [("Normal", R.OPERATOR_RESTART, step.reason)]
    return step, []
