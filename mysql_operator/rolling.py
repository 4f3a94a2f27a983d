"""Rolling updates, replicas first and the primary last through a switchover.

The StatefulSet uses `updateStrategy: OnDelete`: a Pod template change (image, resources,
config...) makes a new `status.updateRevision` but restarts nothing. Each reconcile asks
`next_step` what to do next, one Pod at a time:

  * a wanted Pod missing, terminating or not Ready, or a replica not replicating -> Wait
  * an outdated replica                         -> DeletePod (highest ordinal first)
  * only the primary outdated                   -> SwitchTo an updated, Ready, replicating replica
  * the outdated Pod is no longer the primary   -> DeletePod (covered by the replica rule)
  * a single instance                           -> DeletePod (no replica to move the primary to)
  * nothing outdated                            -> Done

Apart from that order, `replace_stuck`: an outdated Pod whose server does not run (an image that
cannot be pulled, a config error, unschedulable, crashing) serves nothing and is replaced at once,
so a fix to the spec (a pull Secret, an image, resources) reaches it without waiting for a Ready
Pod that never comes.

Which template is written at all is `template_step`: a template change the user asked for
(the spec's generation moved) is written at once; one that comes from a new operator version
(same generation, another template) is staged: the StatefulSet keeps its template, the status
says a restart is pending (condition RestartPending), and it is written when spec.operatorUpgrades
is Auto and no other cluster of this operator is rolling (one cluster at a time), or when the
user approves it (annotation APPROVE_RESTART_ANNOTATION) under Manual.

Pure: plain data in, a decision out (table-tested in tests/unit/test_rolling.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping
from mysql_operator import reasons as R

REVISION_LABEL = "controller-revision-hash"
# on the StatefulSet (not its template: they never make a revision)
APPLIED_TEMPLATE_ANNOTATION = "mysql.operator.dev/template-hash"  # the template it has
WANTED_TEMPLATE_ANNOTATION = "mysql.operator.dev/template-wanted"  # the one staged (else = applied)
TEMPLATE_GENERATION_ANNOTATION = "mysql.operator.dev/template-generation"  # the spec's, when written
# on the MySQLCluster, under operatorUpgrades: Manual: restart for the staged template now
APPROVE_RESTART_ANNOTATION = "mysql.operator.dev/approve-restart"


@dataclass(frozen=True)
class RollPod:
    name: str
    ordinal: int
    revision: str | None  # the Pod's controller-revision-hash label
    ready: bool = False
    deleting: bool = False
    replicating: bool = False  # a replica whose IO and SQL threads run (ignored for the primary)
    stuck: str = ""  # why its server does not run, when that is not a normal step (pods.pod_waiting)


@dataclass(frozen=True)
class Done:
    reason: str = "every Pod runs the current template"


@dataclass(frozen=True)
class Wait:
    reason: str


@dataclass(frozen=True)
class DeletePod:
    name: str
    reason: str


@dataclass(frozen=True)
class SwitchTo:
    name: str
    reason: str


RollStep = Done | Wait | DeletePod | SwitchTo


def in_progress(step: RollStep | None) -> str:
    """What a rolling update under way does now, for the status ("" when none is)."""
    if isinstance(step, DeletePod):
        return f"restarting {step.name}: {step.reason}"
    if isinstance(step, SwitchTo):
        return f"switching over to {step.name}: {step.reason}"
    if isinstance(step, Wait):
        return f"waiting: {step.reason}"
    return ""


def restarting(statefulset: Mapping[str, Any]) -> bool:
    """Pure: some of the StatefulSet's Pods are not on its template yet (a roll under way), or its
    controller has not observed its latest template. Counted from the Pods' revision labels, so it
    holds across operator restarts (with OnDelete, status.currentRevision never moves)."""
    meta, status = statefulset.get("metadata") or {}, statefulset.get("status") or {}
    if status.get("observedGeneration") != meta.get("generation"):
        return True
    return (status.get("updatedReplicas") or 0) < ((statefulset.get("spec") or {}).get("replicas") or 0)


def controlling_cluster(statefulset: Mapping[str, Any], clusters: Mapping[str, str]) -> str | None:
    """Pure: namespace/name of the MySQLCluster that controls the StatefulSet, or None. It is one
    only when its controller ownerReference names a MySQLCluster by a uid `clusters` holds (uid ->
    namespace/name of the clusters that exist) with that cluster's name, in the StatefulSet's own
    namespace: a look-alike with the operator's labels, made by anyone who may create StatefulSets,
    is nobody's, and so holds no cluster's restart turn."""
    meta = statefulset.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") is not True or ref.get("kind") != "MySQLCluster":
            continue
        key = clusters.get(str(ref.get("uid") or ""))
        if key is not None and key == f"{meta.get('namespace')}/{ref.get('name')}":
            return key
    return None


def update_revision(statefulset: Mapping[str, Any] | None) -> str | None:
    """The revision Pods must run, or None while the StatefulSet controller has not yet observed
    the latest template (its updateRevision would be stale)."""
    if not statefulset:
        return None
    meta, status = statefulset.get("metadata") or {}, statefulset.get("status") or {}
    if status.get("observedGeneration") != meta.get("generation"):
        return None
    return status.get("updateRevision")


def outdated(pods: Iterable[RollPod], revision: str) -> list[RollPod]:
    return [p for p in pods if p.revision != revision]


def replace_stuck(pods: Iterable[RollPod], revision: str | None) -> DeletePod | None:
    """The outdated, stuck Pod to delete now (the highest ordinal), or None."""
    if revision is None:
        return None
    stuck = [p for p in pods if p.stuck and not p.deleting and p.revision != revision]
    if not stuck:
        return None
    p = max(stuck, key=lambda p: p.ordinal)
    return DeletePod(
        p.name, f"{p.name} does not run ({p.stuck}) and has revision {p.revision}, not {revision}"
    )


def next_step(pods: Iterable[RollPod], revision: str | None, primary: str | None, instances: int) -> RollStep:
    if revision is None:
        return Wait("the StatefulSet controller has not observed the latest template yet")
    wanted = {p.ordinal: p for p in pods if p.ordinal < instances}
    old = sorted(outdated(wanted.values(), revision), key=lambda p: p.ordinal)
    if not old:
        return Done()
    missing = [o for o in range(instances) if o not in wanted]
    if missing:
        return Wait(f"instance {missing[0]} has no Pod yet")
    busy = [p for p in wanted.values() if p.deleting or not p.ready]
    if busy:
        return Wait(f"{busy[0].name} is not Ready")
    if primary is None or primary not in {p.name for p in wanted.values()}:
        return Wait("no primary among the wanted instances")
    lagging = [p for p in wanted.values() if p.name != primary and not p.replicating]
    if lagging:
        return Wait(f"{lagging[0].name} is not replicating")
    old_replicas = [p for p in old if p.name != primary]
    if old_replicas:
        p = old_replicas[-1]
        return DeletePod(p.name, f"{p.name} runs revision {p.revision}, not {revision}")
    # only the primary is outdated
    fresh = sorted(
        (p for p in wanted.values() if p.name != primary and p.revision == revision), key=lambda p: p.ordinal
    )
    if fresh:
        return SwitchTo(fresh[0].name, f"moving the primary off {primary} before updating it")
    return DeletePod(primary, f"{primary} is the only instance: it restarts with revision {revision}")


@dataclass(frozen=True)
class Written:
    """What the StatefulSet's annotations say about its template (None: an operator older than
    these annotations wrote it)."""

    applied: str | None
    wanted: str | None
    generation: int | None


@dataclass(frozen=True)
class Policy:
    """Auto or Manual: the cluster's spec.operatorUpgrades (`from_spec`), else the operator's default."""

    name: str
    from_spec: bool = True

    @property
    def source(self) -> str:
        return (
            "spec.operatorUpgrades"
            if self.from_spec
            else "chart value operatorUpgrades, the operator's default"
        )


@dataclass(frozen=True)
class WriteTemplate:
    reason: str
    # the restart it makes comes from the operator, not the spec: it holds the one-at-a-time turn
    operator_change: bool = False


@dataclass(frozen=True)
class StageTemplate:
    reason: str  # RestartPending's reason
    message: str  # what it waits for, and how to go on


TemplateStep = WriteTemplate | StageTemplate


def template_step(
    written: Written | None,
    desired: str,
    generation: int | None,
    same_as_applied: bool,
    policy: Policy,
    approved: bool,
    rolling_elsewhere: str | None,
) -> TemplateStep:
    """Write the desired Pod template (hash `desired`) into the StatefulSet now, or stage it.
    `same_as_applied`: the API server says writing it would not change the template (asked when
    the applied hash is unknown); `rolling_elsewhere`: another cluster whose Pods are being
    restarted (namespace/name), or None."""
    if written is None:
        return WriteTemplate("a new StatefulSet")
    if desired == written.applied or same_as_applied:
        return WriteTemplate("the Pod template is unchanged")
    if desired != written.wanted and written.generation is not None and generation != written.generation:
        return WriteTemplate(f"the spec changed (generation {written.generation} -> {generation})")
    what = "this operator version changes the Pod template (the spec did not change)"
    if policy.name == "Manual" and not approved:
        return StageTemplate(
            R.WAITING_FOR_APPROVAL,
            f"{what}: restarting the Pods waits for you ({policy.source}: Manual): annotate "
            f"the cluster with {APPROVE_RESTART_ANNOTATION}=true to roll them, replicas first and the "
            "primary last through a switchover",
        )
    if rolling_elsewhere is not None:
        return StageTemplate(
            R.WAITING_FOR_OTHER_CLUSTER,
            f"{what}: its Pods restart once {rolling_elsewhere} has finished restarting (one cluster "
            "at a time)",
        )
    return WriteTemplate(f"{what}: rolling its Pods now", operator_change=True)
