"""What one pass found, as the one value its status is built from (`Summary`), and the names
the status uses for roles and reasons. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from mysql_operator import certificates
from mysql_operator import manifests as m
from mysql_operator import reasons as R
from mysql_operator import topology as t
from mysql_operator.pods import PodView
from mysql_operator.rolling import StageTemplate

T = t.Transition
# transitions that act: condition Progressing True, its reason the decision's kind
ACTING = (T.REPAIRING, T.BOOTSTRAPPING, T.FAILING_OVER, T.SWITCHING_OVER, T.PROMOTING)
CONDITION_TYPES = ("Ready", "Available", "Progressing", "Degraded", "SpecValid")
INVALID_SPEC = R.INVALID_SPEC  # the reason of a refused spec's conditions and of its Warning Event
LAST_VALID_SPEC = "lastValidSpec"  # status: {generation, spec} of the last spec that parsed
# the reason of Ready False / Degraded True while a commit on the primary would wait for a
# semi-sync acknowledgement that no connected replica can give yet
SEMISYNC_ACKS_MISSING = R.SEMISYNC_ACKS_MISSING
LAGGING = "lagging"  # status.instances[].role of a replica out of -ro for its lag
RESEEDING = "reseeding"  # status.instances[].role of an instance whose data is being replaced


@dataclass(frozen=True)
class ArchiverState:
    """The binlog archiver as the condition BinlogArchiving says it: `why` it does not archive
    ("" while it does) and the condition's reason."""

    why: str = ""
    reason: str = R.ARCHIVING


@dataclass(frozen=True)
class Summary:
    """Everything the status is computed from; plain data."""

    instances: int
    generation: int | None = None  # of the spec in effect (status.observedGeneration)
    # the spec in effect, as the MySQLCluster had it at `generation`: recorded as
    # status.lastValidSpec; None: no spec is in effect
    spec: Mapping[str, Any] | None = None
    # why the cluster's current spec (of `refused_generation`) is refused: with `spec` the pass
    # acted on the last spec that parsed (the cluster runs on, condition SpecValid False), without
    # it on nothing (phase Invalid)
    spec_error: str | None = None
    refused_generation: int | None = None
    secret_error: str | None = None
    # why an owned object (StatefulSet, Service, ...) could not be applied (apply_refusal)
    apply_error: str | None = None
    # why the certificate is missing or cannot be renewed (certificates.TLSProblem); tls_blocking:
    # the cluster has no certificate yet, so it waits
    tls_problem: certificates.TLSProblem | None = None
    tls_blocking: bool = False
    ready: int = 0
    primary: str | None = None
    primary_serving: bool = False
    # the primary Pod carries role=primary and is Ready, i.e. it is the -rw Service's endpoint
    # (as listed at the start of the pass: labels moved in this pass count from the next one)
    primary_in_service: bool = False
    decision: str | None = None  # kind, None when the engine did not run
    decision_reason: str = ""
    held_out: tuple[str, ...] = ()
    reseeding: tuple[str, ...] = ()  # "<instance>: <progress>" of instances being re-seeded
    unreachable: tuple[str, ...] = ()
    lagging: tuple[str, ...] = ()  # replicas out of -ro (spec.replication.maxReadLagSeconds)
    # why a commit on the serving primary would wait now (fewer semi-sync replicas connected than
    # a commit waits for: server_facts.commits_wait); "" when it would not
    commits_wait: str = ""
    max_read_lag_seconds: int = 0
    failed_steps: tuple[str, ...] = ()
    entries: tuple[Mapping[str, Any], ...] = ()
    # the version of the credentials Secret whose passwords the servers have
    credentials_version: str = ""
    # spec.backup.binlogs: None when off, else what the archiver does (archiver_state)
    binlog_archiver: ArchiverState | None = None
    # a rolling update under way (Pods on an older template): what it does now; "" when none
    rolling: str = ""
    # a Pod template a new operator version wants, staged (rolling.StageTemplate); None: none
    restart_pending: StageTemplate | None = None
    # the last restore drill's record (status.drill, as backup/drill_controller.py reports it);
    # None: no drill ran, or none was reported since the operator started (condition Restorable)
    drill: Mapping[str, Any] | None = None
    # switchover requests' records (switchover.settle: status.switchover, status.primaryRequest;
    # None removes one); a key left out stays as it is
    requests: Mapping[str, Any] = field(default_factory=dict)


def primary_in_service(pods: Mapping[int, PodView], primary_ordinal: int | None) -> bool:
    """The -rw Service routes to the primary: its Pod is labelled role=primary and Ready."""
    pod = pods.get(primary_ordinal) if primary_ordinal is not None else None
    return bool(pod and pod.ready and pod.role == m.ROLE_PRIMARY and not pod.deleting)
