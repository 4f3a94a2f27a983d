"""Level-triggered reconcile of one MySQLCluster: observe -> decide -> act, then publish status.

`Reconciler._reconcile(body)` is the one pass: kopf's create/update/resume handlers, the periodic
timer (`tick`) and the watches on owned Pods/StatefulSets (`nudge`) all end there. It is idempotent:

  parse spec (SpecError -> condition + Event, nothing touched)
  ensure the generated Secret (created only if missing; never regenerated; missing keys added)
  server-side apply every owned object (owner references; hand-made drift is overwritten)
  observe Pods; run the ReplicationEngine's pass (observe -> decide -> act; the same code the
  benchmarks and integration tests drive) when there is something to observe, with this module's
  hooks: the rolling update steers the wanted primary, a new primary is recorded in status
  BEFORE acting; move the role labels (demote first, so
  never two Pods carry role=primary); publish status; post Events for what was done.

The functions above `Reconciler` are pure (table-tested in tests/unit/test_reconcile_*.py).
Secrets never leave this module except into the server connections: step texts and errors are
redacted before they reach Events, status or logs.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import logging
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from kubernetes import client
from kubernetes.client.rest import ApiException

from mysql_operator import clock
from mysql_operator import manifests as m
from mysql_operator import certificates, restoring, rolling
from mysql_operator import topology as t
from mysql_operator.api import MySQLCluster, SpecError, parse
from mysql_operator.db.instance import redact
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.resolve import resolve
from mysql_operator.api import BACKUP_PLURAL, GROUP, VERSION, parse_backup
from mysql_operator.backup.restore import Source
from mysql_operator.db.instance import Instance, InstanceError, tls_context
from mysql_operator.k8s import jobs
from mysql_operator.manifests.backup_jobs import restore_job, restore_job_name
from mysql_operator.replication import (
    PRIMARY_CHANGES,
    ClusterState,
    Credentials,
    Member,
    ReplicationEngine,
    Step,
)

log = logging.getLogger(__name__)

CONDITION_TYPES = ("Ready", "Available", "Progressing", "Degraded")
TLS_ANNOTATION = f"{m.GROUP}/tls-not-after"  # on server Pods: changed when the certificate is renewed
TLS_RELOAD_RETRY_SECONDS = 5.0
TLS_PROBLEM_RECHECK_SECONDS = 5.0  # while the certificate is missing or cert-manager reports a problem
ACTIONS = PRIMARY_CHANGES + (t.Fence, t.ConfigureReplica, t.Decommission, t.ConfigureSemiSync)


# ---------------------------------------------------------------------------------------- pods
@dataclass(frozen=True)
class PodView:
    name: str
    ordinal: int
    running: bool = False
    ready: bool = False
    role: str | None = None  # the ROLE_LABEL value it carries now
    deleting: bool = False
    waiting: str = ""  # why it does not run yet, when that is not a normal step (see pod_waiting)


# waiting reasons every Pod passes through on its way to running: not worth a word in the status
_ROUTINE_WAITING = frozenset({"ContainerCreating", "PodInitializing"})


def pod_waiting(pod: Mapping[str, Any]) -> str:
    """Why a Pod is stuck, in the kubelet's or scheduler's words ("mysqld ErrImagePull: ...",
    "Unschedulable: 0/3 nodes ..."), or "" when it runs or is on its normal way there."""
    status = pod.get("status") or {}
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason"):
            return f"{c['reason']}: {c.get('message') or ''}".strip().rstrip(":")[:256]
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason and reason not in _ROUTINE_WAITING:
            text = f"{cs.get('name')} {reason}: {waiting.get('message') or ''}"
            return text.strip().rstrip(":")[:256]
    return ""


def pod_ordinal(name: str, cluster_name: str) -> int | None:
    prefix = f"{cluster_name}-"
    rest = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(rest) if rest.isdigit() else None


def pod_views(cluster_name: str, pods: Iterable[Mapping[str, Any]]) -> dict[int, PodView]:
    out = {}
    for p in pods:
        meta, status = p.get("metadata") or {}, p.get("status") or {}
        ordinal = pod_ordinal(meta.get("name", ""), cluster_name)
        if ordinal is None:
            continue
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        out[ordinal] = PodView(
            meta["name"],
            ordinal,
            running=status.get("phase") == "Running",
            ready=ready,
            role=(meta.get("labels") or {}).get(m.ROLE_LABEL),
            deleting=bool(meta.get("deletionTimestamp")),
            waiting=pod_waiting(p),
        )
    return out


def member_ordinals(instances: int, pod_ordinals: Iterable[int], primary_ordinal: int | None) -> list[int]:
    """Every instance the engine must know: the wanted ones, Pods still present beyond them
    (leaving after a scale down), and the recorded primary wherever it is."""
    extra = set(pod_ordinals) | ({primary_ordinal} if primary_ordinal is not None else set())
    return sorted(set(range(instances)) | extra)


def statefulset_replicas(instances: int, primary_ordinal: int | None, current: int | None) -> int:
    """Scale down never removes the primary's Pod: keep it until a switchover moved the primary."""
    if primary_ordinal is not None and primary_ordinal >= instances:
        return max(primary_ordinal + 1, min(current or 0, primary_ordinal + 1))
    return instances


# ---------------------------------------------------------------------------------------- roles
def desired_roles(
    observed: Sequence[t.InstanceState],
    primary: str | None,
    instances: int,
    settings: t.Settings,
    primary_ok: bool,
) -> dict[str, str | None]:
    """ROLE_LABEL value per instance: the recorded primary (when its promotion did not fail) is
    `primary`; instances that replicate an errant history or are leaving get no role (neither
    Service selects them); every other wanted instance is `replica`."""
    by_name = {i.name: i for i in observed}
    p = by_name.get(primary) if primary else None
    roles: dict[str, str | None] = {}
    for i in observed:
        if i.name == primary:
            roles[i.name] = m.ROLE_PRIMARY if primary_ok else None
        elif i.ordinal >= instances:
            roles[i.name] = None
        elif p is not None and p.reachable and i.reachable and t.errant_against_primary(i, p, settings):
            roles[i.name] = None
        elif p is None or primary is None:
            roles[i.name] = None  # not bootstrapped: nothing replicates yet
        else:
            roles[i.name] = m.ROLE_REPLICA
    return roles


def label_plan(
    current: Mapping[str, str | None], desired: Mapping[str, str | None]
) -> list[tuple[str, str | None]]:
    """Label patches in a safe order: every removal of `primary` before any new `primary`, so at
    no moment do two Pods carry role=primary (and the -rw Service never has two endpoints)."""
    primary = [n for n, v in desired.items() if v == m.ROLE_PRIMARY]
    changes = [(n, v) for n, v in desired.items() if n in current and current[n] != v]
    # a Pod labelled primary that is not the wanted primary loses the label, even when the
    # desired map does not mention it
    changes += [
        (n, None) for n, v in current.items() if v == m.ROLE_PRIMARY and n not in desired and n not in primary
    ]
    demote = [(n, v) for n, v in changes if current[n] == m.ROLE_PRIMARY]
    promote = [(n, v) for n, v in changes if v == m.ROLE_PRIMARY]
    rest = [c for c in changes if c not in demote and c not in promote]
    return sorted(demote) + sorted(rest) + sorted(promote)


# ---------------------------------------------------------------------------------------- events
def _camel(action: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in action.replace("_", "-").split("-"))


def events_from_steps(steps: Iterable[Step], secrets: Iterable[str] = ()) -> list[tuple[str, str, str]]:
    secrets = list(secrets)
    out = []
    for s in steps:
        message = redact(f"{s.instance}: {s.detail}" if s.detail else s.instance, secrets)
        out.append(("Normal" if s.ok else "Warning", _camel(s.action) + ("" if s.ok else "Failed"), message))
    return out


def decision_event(d: t.Decision | None, secrets: Iterable[str] = ()) -> tuple[str, str, str] | None:
    """The Event announcing a decision that changes the topology (before its steps' Events)."""
    if isinstance(d, (t.Failover, t.Switchover, t.Bootstrap, t.Promote)):
        etype = "Warning" if isinstance(d, t.Failover) else "Normal"
        return etype, d.kind, redact(d.reason or d.kind, list(secrets))
    return None


# ---------------------------------------------------------------------------------------- status
@dataclass(frozen=True)
class Summary:
    """Everything the status is computed from; plain data."""

    instances: int
    generation: int | None = None
    spec_error: str | None = None
    secret_error: str | None = None
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
    unreachable: tuple[str, ...] = ()
    failed_steps: tuple[str, ...] = ()
    entries: tuple[Mapping[str, Any], ...] = ()


def primary_in_service(pods: Mapping[int, PodView], primary_ordinal: int | None) -> bool:
    """The -rw Service routes to the primary: its Pod is labelled role=primary and Ready."""
    pod = pods.get(primary_ordinal) if primary_ordinal is not None else None
    return bool(pod and pod.ready and pod.role == m.ROLE_PRIMARY and not pod.deleting)


def service_routes_to(
    host: str | None, port: int, user: str, password: str, primary: str, tls_ctx: ssl.SSLContext | None = None
) -> bool:
    """A connection through a Service's ClusterIP reaches `primary` (its @@hostname, the Pod name)
    and it accepts writes: kube-proxy routes the -rw Service to the new primary, not to a stale
    endpoint (with none the connection is refused)."""
    if not host or host == "None":
        return False
    probe = Instance(host, port, user, password, connect_timeout=1.0, read_timeout=2.0, tls=tls_ctx)
    try:
        hostname, read_only = probe.execute("SELECT @@hostname, @@read_only")[0]
        return hostname == primary and not int(read_only)
    except InstanceError:
        return False
    finally:
        probe.close()


def phase(s: Summary) -> str:
    if s.spec_error:
        return "Invalid"
    if s.secret_error or s.decision == "Unrecoverable":
        return "Failed"
    if s.tls_problem is not None and s.tls_blocking and s.tls_problem.warning:
        return "Failed"  # the user must act (the timer keeps looking: the fix is seen within seconds)
    if s.primary is None:
        return "Bootstrapping" if s.decision else "Pending"
    if s.decision == "Failover":
        return "FailingOver"
    if s.decision == "Switchover":
        return "SwitchingOver"
    if not s.primary_serving:
        return "Unavailable"
    tls_degraded = s.tls_problem is not None and s.tls_problem.warning
    if (
        s.ready >= s.instances
        and not s.held_out
        and not s.unreachable
        and not s.failed_steps
        and not tls_degraded
    ):
        # writable is not enough: clients connect through -rw
        return "Ready" if s.primary_in_service else "Unavailable"
    return "Degraded"


def _cond(ctype: str, ok: bool, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": ctype, "status": "True" if ok else "False", "reason": reason, "message": message}


def conditions(s: Summary) -> list[dict[str, Any]]:
    if s.spec_error:
        msg = s.spec_error
        return [
            _cond("Ready", False, "InvalidSpec", msg),
            _cond("Available", False, "InvalidSpec", msg),
            _cond("Progressing", False, "InvalidSpec", msg),
            _cond("Degraded", True, "InvalidSpec", msg),
        ]
    ph = phase(s)
    ready_msg = f"{s.ready}/{s.instances} instances ready"
    stuck = [f"{e['name']}: {e['waiting']}" for e in s.entries if e.get("waiting")]
    if stuck:
        ready_msg += "; " + "; ".join(stuck)
    not_in_service = s.primary_serving and not s.primary_in_service
    if ph == "Ready":
        ready = _cond("Ready", True, "AllInstancesReady", ready_msg)
    elif s.ready < s.instances:
        ready = _cond("Ready", False, "InstancesNotReady", ready_msg)
    elif ph == "Unavailable" and not_in_service:
        ready = _cond(
            "Ready",
            False,
            "PrimaryNotInService",
            f"{s.primary} accepts writes but is not yet a ready endpoint of the -rw Service",
        )
    else:
        ready = _cond("Ready", False, ph, ready_msg)
    if s.primary_serving:
        available = _cond("Available", True, "PrimaryServing", f"{s.primary} accepts writes")
    elif s.primary is None:
        available = _cond("Available", False, "NoPrimary", "no primary yet")
    else:
        available = _cond("Available", False, "PrimaryNotServing", f"{s.primary} does not accept writes")

    tls_wait = s.tls_problem if s.tls_blocking else None
    if s.secret_error:
        progressing = _cond("Progressing", False, "CredentialsSecret", s.secret_error)
    elif tls_wait is not None:
        progressing = _cond("Progressing", not tls_wait.warning, tls_wait.reason, tls_wait.message)
    elif s.decision in {d.__name__ for d in ACTIONS}:
        progressing = _cond("Progressing", True, s.decision, s.decision_reason)
    elif s.decision == "WaitForDelay":
        progressing = _cond("Progressing", True, "Waiting", s.decision_reason)
    elif s.ready < s.instances:
        progressing = _cond("Progressing", True, "WaitingForInstances", ready_msg)
    elif not_in_service:
        progressing = _cond("Progressing", True, "WaitingForService", f"-rw Service endpoint for {s.primary}")
    else:
        progressing = _cond("Progressing", False, "Stable", "nothing to do")

    if s.secret_error:
        degraded = _cond("Degraded", True, "CredentialsSecret", s.secret_error)
    elif s.decision == "Unrecoverable":
        degraded = _cond("Degraded", True, "Unrecoverable", s.decision_reason)
    elif s.failed_steps:
        degraded = _cond("Degraded", True, "ActionFailed", "; ".join(s.failed_steps))
    elif s.primary is not None and s.primary in s.unreachable:
        # a stable message (no duration): the Warning Event is posted once per outage
        degraded = _cond("Degraded", True, "PrimaryUnreachable", f"primary {s.primary} unreachable")
    elif s.held_out:
        degraded = _cond("Degraded", True, "InstancesHeldOut", ", ".join(s.held_out) + " held out")
    elif s.primary is not None and s.unreachable:
        degraded = _cond("Degraded", True, "InstancesUnreachable", ", ".join(s.unreachable) + " unreachable")
    elif s.tls_problem is not None and s.tls_problem.warning:  # also posted as a Warning Event
        degraded = _cond("Degraded", True, s.tls_problem.reason, s.tls_problem.message)
    else:
        degraded = _cond("Degraded", False, "AsExpected" if s.primary else "Bootstrapping", "")
    return [ready, available, progressing, degraded]


def merge_conditions(
    old: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]], now: str, generation: int | None
) -> list[dict[str, Any]]:
    """lastTransitionTime moves only when a condition's status changes."""
    before = {c.get("type"): c for c in old or []}
    out = []
    for c in new:
        prev = before.get(c["type"])
        changed = prev is None or prev.get("status") != c["status"]
        item = dict(c)
        item["lastTransitionTime"] = now if changed else prev.get("lastTransitionTime", now)
        if generation is not None:
            item["observedGeneration"] = generation
        out.append(item)
    return out


def build_status(s: Summary, previous: Mapping[str, Any], now: str) -> dict[str, Any]:
    status: dict[str, Any] = {
        "phase": phase(s),
        "conditions": merge_conditions(previous.get("conditions") or [], conditions(s), now, s.generation),
        "readyInstances": s.ready,
        "instances": [dict(e) for e in s.entries],
    }
    if s.generation is not None:
        status["observedGeneration"] = s.generation
    primary = s.primary or previous.get("currentPrimary")
    if primary:
        status["currentPrimary"] = primary
    if previous.get("restore"):  # written by restore_gate; kept as it is
        status["restore"] = previous["restore"]
    return status


def degraded_events(previous: Mapping[str, Any], status: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """A Warning when Degraded turns True or changes its reason/message (not on every loop)."""

    def degraded(st):
        return next((c for c in st.get("conditions") or [] if c.get("type") == "Degraded"), {})

    old, new = degraded(previous), degraded(status)
    if new.get("status") != "True":
        return []
    if (old.get("status"), old.get("reason"), old.get("message")) == (
        "True",
        new.get("reason"),
        new.get("message"),
    ):
        return []
    return [("Warning", new.get("reason") or "Degraded", new.get("message") or "")]


def status_changed(previous: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether patching `status` would change anything. Only its own keys count: a merge patch
    leaves the others (lastBackup, written by the backup handlers) as they are."""

    def strip(st):
        out = {k: st.get(k) for k in status if k != "conditions"}
        out["conditions"] = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in st.get("conditions") or []
        ]
        return out

    return strip(previous) != strip(status)


def instance_entries(
    ordinals: Sequence[int],
    names: Mapping[int, str],
    pods: Mapping[int, PodView],
    observed: Mapping[str, t.InstanceState],
    lags: Mapping[str, int | None],
    roles: Mapping[str, str | None],
    primary: str | None,
    secrets: Iterable[str] = (),
) -> list[dict[str, Any]]:
    secrets = list(secrets)
    out = []
    for o in ordinals:
        name = names[o]
        pod, obs = pods.get(o), observed.get(name)
        role = roles.get(name)
        if role is None:
            role = "held-out" if obs is not None and obs.reachable and name in roles else "unknown"
        if name == primary and roles.get(name) is None and obs is not None:
            role = "primary-not-serving"
        e: dict[str, Any] = {
            "name": name,
            "role": role,
            "ready": bool(pod and pod.ready),
            "reachable": bool(obs and obs.reachable),
        }
        if obs is not None and obs.executed is not None:
            e["gtidExecuted"] = str(obs.executed)
        lag = lags.get(name)
        if lag is not None:
            e["lagSeconds"] = int(lag)
        if obs is not None and obs.last_error:
            e["error"] = redact(obs.last_error, secrets)[:512]
        if pod and pod.waiting:
            e["waiting"] = redact(pod.waiting, secrets)
        out.append(e)
    return out


def primary_since(status: Mapping[str, Any], primary: str | None) -> tuple[str, float] | None:
    """(primary, when it was made primary as a Unix time) from status.primarySince, if recorded."""
    raw = status.get("primarySince")
    if not primary or not raw:
        return None
    try:
        return primary, dt.datetime.fromisoformat(raw).timestamp()
    except (TypeError, ValueError):
        return None


def expected_identity(name: str, ordinal: int, pod: Mapping[str, Any] | None) -> dict[str, Any]:
    """Who must answer at a member's address: server_id from the ordinal (start.sh), the Pod's
    name as @@hostname or @@report_host, and the Pod's uid (a recreated Pod gets a new connection)."""
    return {"server_id": ordinal + 1, "hostname": name, "uid": ((pod or {}).get("metadata") or {}).get("uid")}


def promotion_succeeded(primary: str | None, steps: Sequence[Step]) -> bool:
    """After a Bootstrap/Failover/Switchover/Promote: the new primary serves unless a step on it
    failed (a replica that could not be repointed does not make the primary unavailable)."""
    return primary is not None and not any(not s.ok and s.instance == primary for s in steps)


def timer_can_skip(
    status: Mapping[str, Any], generation: int | None, since_apply: float, resync_seconds: float
) -> bool:
    return (
        status.get("phase") == "Pending"
        and not status.get("currentPrimary")
        and status.get("observedGeneration") == generation
        and since_apply < resync_seconds
    )


# ---------------------------------------------------------------------------------------- effects
@dataclass
class Result:
    phase: str
    applied: bool = False
    decision: str | None = None
    steps: list[Step] = field(default_factory=list)
    recheck_in: float | None = None  # seconds until the loop should look again, if sooner


# MySQL and MariaDB refuse a longer replication password (error 3056, ER_CHANGE_MASTER_PASSWORD_LENGTH).
MAX_REPLICATION_PASSWORD = 32


def password_problem(key: str, value: str) -> str | None:
    """Why a password from the user's Secret (under `key`) would break an option file, an SQL string
    or CHANGE MASTER, with the fix; None if usable. Never quotes the value. Pure."""
    try:
        value.encode("utf-8")  # undecodable bytes arrive as lone surrogates (surrogateescape)
    except UnicodeEncodeError:
        return "is not valid UTF-8: store the password as UTF-8 text"
    if any(ch in value for ch in "\n\r\0"):
        return "contains a line break or a NUL character: use a single-line password without NUL"
    if key == m.REPLICATION_PASSWORD_KEY and len(value) > MAX_REPLICATION_PASSWORD:
        return (
            f"is longer than {MAX_REPLICATION_PASSWORD} characters, the most a replica accepts "
            f"for its source's password: use a shorter one"
        )
    return None


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    engine: ReplicationEngine | None = None
    fingerprint: str = ""
    last_apply: float = 0.0
    again: bool = False
    routed_to: str | None = None  # the primary a connection through -rw was seen to reach
    last_decision: str | None = None  # logged when it changes
    tls: certificates.TLSState | None = None  # the cluster's CA and server certificate, as last ensured
    tls_checked: float = float("-inf")
    tls_served: dt.datetime | None = None  # the certificate every server was seen serving
    tls_reload_tried: float = float("-inf")
    tls_problem: certificates.TLSProblem | None = None  # as last found by _tls (None: fine)
    tls_spec: Any = None  # the spec.tls last checked: a change is checked at once


class Reconciler:
    """Holds one ReplicationEngine per cluster (it measures outages across loops) and a lock per
    cluster (handlers, timer and watches never act on one cluster at the same time)."""

    def __init__(
        self,
        api,
        resolver_mode: str = "auto",
        resync_seconds: float = 60.0,
        apply_timeout: float = 30.0,
        password_factory: Callable[[], str] = m.random_password,
        clock: Callable[[], float] = time.monotonic,
        job_image: str | None = None,
    ):
        self.api = api
        self.resolver_mode = resolver_mode
        self.resync_seconds = resync_seconds
        self.apply_timeout = apply_timeout
        self.password_factory = password_factory
        self.clock = clock
        self._entries: dict[tuple[str, str], _Entry] = {}
        self.job_image = job_image or jobs.job_image()  # of the Jobs that work on tenant bytes
        self._guard = threading.Lock()

    def _entry(self, namespace: str, name: str) -> _Entry:
        with self._guard:
            return self._entries.setdefault((namespace, name), _Entry())

    def forget(self, namespace: str, name: str) -> None:
        with self._guard:
            e = self._entries.pop((namespace, name), None)
        if e and e.engine:
            e.engine.close()

    def close(self) -> None:
        for key in list(self._entries):
            self.forget(*key)

    # -- entry points ------------------------------------------------------------------------------
    def reconcile(self, body: Mapping[str, Any], apply: bool | None = None) -> Result | None:
        """Reconcile now (waiting for a running reconcile of the same cluster to finish)."""
        meta = body["metadata"]
        entry = self._entry(meta["namespace"], meta["name"])
        with entry.lock:
            return self._reconcile(body, entry, apply)

    def tick(self, body: Mapping[str, Any]) -> Result | None:
        """The periodic timer. A cluster with nothing to observe (no Pod running, no primary:
        status Pending) only needs the resync; Pod watch events wake it when a Pod starts."""
        meta = body["metadata"]
        entry = self._entry(meta["namespace"], meta["name"])
        if timer_can_skip(
            body.get("status") or {},
            meta.get("generation"),
            self.clock() - entry.last_apply,
            self.resync_seconds,
        ):
            return None
        return self.nudge(meta["namespace"], meta["name"])

    def nudge(self, namespace: str, name: str, apply: bool | None = None) -> Result | None:
        """From a watch: reconcile unless one is running (then it runs once more at its end)."""
        entry = self._entry(namespace, name)
        if not entry.lock.acquire(blocking=False):
            entry.again = True
            return None
        try:
            result = None
            while True:
                entry.again = False
                body = k.read_cluster(self.api, namespace, name)
                if body is None or body["metadata"].get("deletionTimestamp"):
                    return None
                result = self._reconcile(body, entry, apply)
                if not entry.again:
                    return result
        finally:
            entry.lock.release()

    # -- the reconcile -----------------------------------------------------------------------------
    def _reconcile(self, body: Mapping[str, Any], entry: _Entry, apply: bool | None) -> Result:
        meta = body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        previous = dict(body.get("status") or {})
        try:
            c = parse(body)
        except SpecError as e:
            return self._publish(
                body,
                previous,
                Summary(instances=0, generation=meta.get("generation"), spec_error=str(e)),
                [],
                None,
            )

        passwords, secret_error = self._credentials(c, _owner(body))
        secrets = list(passwords.values())
        self._tls(c, body, entry)
        current_primary = previous.get("currentPrimary")
        primary_ordinal = pod_ordinal(current_primary or "", c.name)

        applied = False
        due = self.clock() - entry.last_apply >= self.resync_seconds
        if apply or (apply is None and due) or previous.get("observedGeneration") != c.generation:
            self._apply_objects(c, body, passwords, primary_ordinal)
            entry.last_apply = self.clock()
            applied = True

        listed = k.list_pods(self.api, ns, m.selector_labels(c))
        pods = pod_views(c.name, listed)
        raw_pods = {pod_ordinal(p["metadata"]["name"], c.name): p for p in listed}
        ordinals = member_ordinals(c.spec.instances, pods, primary_ordinal)
        names = {o: m.pod_name(c, o) for o in ordinals}
        ready = sum(1 for o, p in pods.items() if o < c.spec.instances and p.ready)

        held = restore_gate(self, body, c, previous, pods, names, passwords, ready, applied, secret_error)
        if held is not None:
            return held

        # the operator never talks to the servers without the CA to verify them (entry.tls)
        run_engine = (
            secret_error is None
            and entry.tls is not None
            and (current_primary is not None or any(p.running for p in pods.values()))
        )
        if not run_engine:
            summary = Summary(
                instances=c.spec.instances,
                generation=c.generation,
                secret_error=secret_error,
                tls_problem=entry.tls_problem,
                tls_blocking=entry.tls is None,
                ready=ready,
                primary=current_primary,
                entries=tuple(instance_entries(ordinals, names, pods, {}, {}, {}, current_primary)),
            )
            return self._publish(body, previous, summary, [], None, applied=applied)

        settings = t.Settings(
            instances=c.spec.instances,
            failover_enabled=c.spec.replication.failover.enabled,
            failover_delay_seconds=float(c.spec.replication.failover.delay_seconds),
            semisync=c.spec.replication.mode == "semisync",
            # replicas configured before TLS move to it (topology rule 10); as tls_ca_path in _engine
            replication_tls=entry.tls is not None and serves_tls(listed),
        )
        members = [
            Member(
                names[o],
                o,
                *resolve(c, o, raw_pods.get(o), self.resolver_mode),
                **expected_identity(names[o], o, raw_pods.get(o)),
                source_host=m.pod_host(c, o),
            )
            for o in ordinals
        ]
        engine = self._engine(entry, c, passwords, settings, members)
        state = ClusterState(current_primary)
        desired = m.pod_name(c, c.spec.primary) if c.spec.primary is not None else None

        engine.primary_since = primary_since(previous, current_primary)
        roll: list[rolling.RollStep | None] = [None]

        def steer(observed: Sequence[t.InstanceState], wanted: str | None) -> str | None:
            roll[0], revision = roll_step(self.api, c, listed, observed, current_primary)
            return roll_desired(wanted, roll[0], revision, listed)

        def record(st: ClusterState) -> None:
            k.patch_status(
                self.api,
                ns,
                name,
                {"currentPrimary": st.current_primary, "primarySince": clock.stamp(precise=True)},
            )

        def announce(decision: t.Decision) -> None:
            pre = decision_event(decision, secrets)
            if pre:
                k.post_events(self.api, body, [pre])
            if decision.kind != entry.last_decision:  # what the loop thinks, once per change
                log.info(
                    "%s/%s decision %s: %s", ns, name, decision.kind, redact(decision.reason or "-", secrets)
                )
                entry.last_decision = decision.kind

        started = time.monotonic()
        outcome = engine.reconcile(state, desired, steer=steer, record=record, announce=announce)
        decision, steps, observed = outcome.decision, outcome.steps, outcome.observed
        if steps or time.monotonic() - started > 1.0:  # acted, or an instance answered slowly
            log.info(
                "%s/%s %s pass took %.2fs (%d steps; unreachable: %s)",
                ns,
                name,
                decision.kind,
                time.monotonic() - started,
                len(steps),
                ", ".join(i.name for i in observed if not i.reachable) or "none",
            )
        roll_delete(self.api, body, decision, roll[0])
        self._serve_current_certificate(c, entry, engine)
        failed = [s for s in steps if not s.ok]

        primary = state.current_primary
        by_name = {i.name: i for i in observed}
        p = by_name.get(primary) if primary else None
        if isinstance(decision, PRIMARY_CHANGES):
            primary_ok = promotion_succeeded(primary, steps)
        else:
            primary_ok = bool(p and p.reachable and not p.read_only and not p.is_replica) or (
                isinstance(decision, t.WaitForDelay) and p is not None
            )
        roles = desired_roles(observed, primary, c.spec.instances, settings, primary_ok)
        self._move_labels(ns, pods, names, roles)

        lags = {
            n: (o.replica.seconds_behind if o.replica else None) for n, o in engine.last_observations.items()
        }
        held = tuple(
            n
            for n, r in roles.items()
            if r is None
            and n != primary
            and p is not None
            and by_name[n].reachable
            and by_name[n].ordinal < c.spec.instances
        )
        unreachable = tuple(i.name for i in observed if not i.reachable and i.ordinal < c.spec.instances)
        serving = (
            primary_ok
            and not isinstance(decision, t.WaitForDelay)
            or (isinstance(decision, t.WaitForDelay) and bool(p and p.reachable and not p.read_only))
        )
        summary = Summary(
            instances=c.spec.instances,
            generation=c.generation,
            ready=ready,
            primary=primary,
            primary_serving=serving and primary is not None,
            decision=decision.kind,
            tls_problem=entry.tls_problem,
            primary_in_service=self._primary_in_service(c, pods, primary, serving, entry, passwords),
            decision_reason=redact(decision.reason, secrets),
            held_out=held,
            unreachable=unreachable,
            failed_steps=tuple(redact(f"{s.instance} {s.action}: {s.detail}", secrets) for s in failed),
            entries=tuple(instance_entries(ordinals, names, pods, by_name, lags, roles, primary, secrets)),
        )
        result = self._publish(
            body, previous, summary, events_from_steps(steps, secrets), decision, applied=applied
        )
        result.steps = steps
        result.recheck_in = t.next_pass_in(decision, float("inf"))
        return result

    def _publish(self, body, previous, summary: Summary, events, decision, applied=False) -> Result:
        meta = body["metadata"]
        status = build_status(summary, previous, clock.stamp())
        events = list(events) + degraded_events(previous, status)
        if status_changed(previous, status):
            k.patch_status(self.api, meta["namespace"], meta["name"], status)
        if events:
            k.post_events(self.api, body, events)
        for etype, reason, message in events:
            log.log(
                logging.WARNING if etype == "Warning" else logging.INFO,
                "%s/%s %s: %s",
                meta["namespace"],
                meta["name"],
                reason,
                message,
            )
        return Result(
            phase=status["phase"], applied=applied, decision=decision.kind if decision is not None else None
        )

    def _tls(self, c: MySQLCluster, body, entry: _Entry) -> None:
        """Effect: the cluster's server certificate exists and is current (the operator's CA, or
        cert-manager's with spec.tls.issuerRef), checked every resync and at least ten times per
        certificate validity; every few seconds while it is missing or a problem is reported. A
        problem (cert-manager missing, issuer not Ready, an API error) keeps what was known and
        lands in the status (condition, and a Warning Event when the user must act); failover
        goes on with the current certificate."""
        every = min(self.resync_seconds, c.spec.tls.certificate_validity_seconds / 10)
        if entry.tls is None or entry.tls_problem is not None:
            every = min(every, TLS_PROBLEM_RECHECK_SECONDS)
        if entry.tls_spec == c.spec.tls and self.clock() - entry.tls_checked < every:
            return
        try:
            if c.spec.tls.issuer_ref is not None:
                state = certificates.ensure_cert_manager(self.api, c, _owner(body), entry.tls)
            else:
                state = certificates.ensure_secrets(self.api, c, _owner(body), clock.now())
        except (ApiException, k.ApplyError) as e:
            state = tls_api_problem(c, getattr(e, "status", None), getattr(e, "reason", None))
        entry.tls_checked = self.clock()
        entry.tls_spec = c.spec.tls
        if isinstance(state, certificates.TLSProblem):
            if state != entry.tls_problem:
                log.warning("%s/%s TLS %s: %s", c.namespace, c.name, state.reason, state.message)
            entry.tls_problem = state
            return
        if entry.tls_problem is not None:
            log.info("%s/%s TLS: the certificate is available again", c.namespace, c.name)
        entry.tls_problem = None
        renewed = entry.tls is not None and state.issued is not None
        entry.tls = state
        if renewed:
            message = (
                f"server certificate renewed ({state.issued}); valid until "
                f"{state.not_after:%Y-%m-%dT%H:%M:%SZ}: the servers reload it without a restart"
            )
            k.post_events(self.api, body, [("Normal", "CertificateRenewed", message)])
            log.info("%s/%s CertificateRenewed: %s", c.namespace, c.name, message)
            self._touch_pods(c, state)

    def _touch_pods(self, c: MySQLCluster, state: certificates.TLSState) -> None:
        """An annotation change makes the kubelet sync the Pods now, which rewrites the mounted
        Secret (instead of at its next periodic sync, up to a minute or more later)."""
        for p in k.list_pods(self.api, c.namespace, m.selector_labels(c)):
            try:
                client.CoreV1Api(self.api).patch_namespaced_pod(
                    p["metadata"]["name"],
                    c.namespace,
                    {"metadata": {"annotations": {TLS_ANNOTATION: f"{state.not_after:%Y-%m-%dT%H:%M:%SZ}"}}},
                )
            except ApiException as e:
                log.info("%s/%s: annotating %s: %s", c.namespace, c.name, p["metadata"]["name"], e.reason)

    def _serve_current_certificate(self, c: MySQLCluster, entry: _Entry, engine: ReplicationEngine) -> None:
        """Effect: every server serves the current certificate (reloaded where it serves an older
        one); retried every few seconds until the kubelet has rewritten the files everywhere."""
        state = entry.tls
        if state is None or entry.tls_served == state.not_after:
            return
        if self.clock() - entry.tls_reload_tried < TLS_RELOAD_RETRY_SECONDS:
            return
        entry.tls_reload_tried = self.clock()
        pending = certificates.serve_current(engine.instances, state.not_after)
        if not pending:
            entry.tls_served = state.not_after
            log.info(
                "%s/%s every server serves the certificate valid until %s",
                c.namespace,
                c.name,
                f"{state.not_after:%Y-%m-%dT%H:%M:%SZ}",
            )

    def _credentials(self, c: MySQLCluster, owner: Mapping[str, Any]) -> tuple[dict[str, str], str | None]:
        """Passwords by Secret key, and why they are unusable (None if fine). Creates the
        generated Secret if missing and adds missing keys; never changes a stored password."""
        secret = m.credentials_secret_name(c)
        data = k.read_secret_data(self.api, c.namespace, secret)
        if c.spec.credentials is not None:
            if data is None:
                return {}, (
                    f"spec.credentials.secretName: Secret {secret} does not exist: create it "
                    f"with keys {', '.join(_required_keys(c))}"
                )
            missing = [key for key in _required_keys(c) if not data.get(key)]
            if missing:
                return {}, (
                    f"spec.credentials.secretName: Secret {secret} lacks "
                    f"{', '.join(missing)}: add the missing keys"
                )
            present = _required_keys(c) + [key for key in _optional_keys(c) if data.get(key)]
            unusable = [f"key {key} {why}" for key in present if (why := password_problem(key, data[key]))]
            if unusable:
                return {}, f"spec.credentials.secretName: Secret {secret} " + "; ".join(unusable)
            return {key: data[key] for key in present}, None
        existing = data or {}
        fresh: dict[str, str] = {}

        def password_for(key: str) -> str:
            if existing.get(key):
                return existing[key]
            return fresh.setdefault(key, self.password_factory())

        built = m.credentials_secret(c, password_for)
        if data is None:
            if not k.create_secret(self.api, m.owned(built, owner)):  # lost a race: read it back
                return self._credentials(c, owner)
        elif fresh:
            k.add_secret_keys(
                self.api,
                c.namespace,
                secret,
                {key: base64.b64encode(v.encode()).decode() for key, v in fresh.items()},
            )
        return {key: password_for(key) for key in _required_keys(c) + _optional_keys(c)}, None

    def _apply_objects(self, c: MySQLCluster, body, passwords, primary_ordinal) -> None:
        owner = _owner(body)
        for obj in m.build_all(c, lambda key: passwords.get(key) or "unused"):
            if obj["kind"] == "Secret":
                continue  # created only if missing (see _credentials)
            obj = m.owned(obj, owner)
            if obj["kind"] == "StatefulSet":
                current = k.read_statefulset_replicas(self.api, c.namespace, obj["metadata"]["name"])
                obj["spec"]["replicas"] = statefulset_replicas(c.spec.instances, primary_ordinal, current)
            k.server_side_apply(self.api, obj)

    def _engine(
        self,
        entry: _Entry,
        c: MySQLCluster,
        passwords: Mapping[str, str],
        settings: t.Settings,
        members: Sequence[Member],
    ) -> ReplicationEngine:
        app_user = c.spec.database.user if c.spec.database else None
        ca_pem = entry.tls.ca_pem if entry.tls is not None else None
        fp = hashlib.sha256(
            repr(
                (
                    settings,
                    c.spec.replication.semi_sync_acks,
                    sorted(passwords.items()),
                    app_user,
                    c.spec.database,
                    ca_pem,
                )
            ).encode()
        ).hexdigest()
        if entry.engine is None or entry.fingerprint != fp:
            if entry.engine is not None:
                entry.engine.close()
            app = (
                Credentials(app_user, passwords[m.APP_PASSWORD_KEY])
                if app_user and passwords.get(m.APP_PASSWORD_KEY)
                else None
            )
            backup = (
                Credentials(m.BACKUP_USER, passwords[m.BACKUP_PASSWORD_KEY])
                if passwords.get(m.BACKUP_PASSWORD_KEY)
                else None
            )
            entry.engine = ReplicationEngine(
                members,
                Credentials(m.OPERATOR_USER, passwords[m.OPERATOR_PASSWORD_KEY]),
                Credentials(m.REPLICATION_USER, passwords[m.REPLICATION_PASSWORD_KEY]),
                settings,
                app=app,
                app_database=c.spec.database.name if c.spec.database else None,
                semisync_acks=c.spec.replication.semi_sync_acks,
                apply_timeout=self.apply_timeout,
                backup=backup,
                reduce_admin=True,
                # replicas verify their source against the CA mounted in their Pod; the operator
                # verifies every server against the same CA
                tls_ca_path=m.TLS_CA if settings.replication_tls else None,
                tls=_tls_context(entry),
            )
            entry.fingerprint = fp
        else:
            entry.engine.set_members(members)
        return entry.engine

    def _move_labels(
        self, ns: str, pods: Mapping[int, PodView], names: Mapping[int, str], roles: Mapping[str, str | None]
    ) -> None:
        current = {p.name: p.role for p in pods.values() if not p.deleting}
        for pod, value in label_plan(current, roles):
            try:
                k.set_pod_label(self.api, ns, pod, m.ROLE_LABEL, value)
            except ApiException as e:
                if e.status != 404:
                    raise
                if value == m.ROLE_PRIMARY:
                    return

    def _primary_in_service(
        self,
        c: MySQLCluster,
        pods: Mapping[int, PodView],
        primary: str | None,
        serving: bool,
        entry: _Entry,
        passwords: Mapping[str, str],
    ) -> bool:
        """The primary Pod is labelled and Ready, and a connection through -rw reaches it (an
        endpoint lags its Pod by seconds: EndpointSlice, kube-proxy). Probed once per primary."""
        if not serving or not primary_in_service(pods, pod_ordinal(primary or "", c.name)):
            entry.routed_to = None
            return False
        if entry.routed_to == primary:
            return True
        try:
            svc = client.CoreV1Api(self.api).read_namespaced_service(m.primary_service_name(c), c.namespace)
        except ApiException:
            return False
        if service_routes_to(
            svc.spec.cluster_ip,
            m.PORT,
            m.OPERATOR_USER,
            passwords[m.OPERATOR_PASSWORD_KEY],
            primary,
            _tls_context(entry),
        ):
            entry.routed_to = primary
            return True
        return False


# ---------------------------------------------------------------------------------------- rolling
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
            )
        )
    return out


def roll_desired(
    pinned: str | None, roll: rolling.RollStep | None, revision: str | None, pods: Iterable[Mapping[str, Any]]
) -> str | None:
    """Pure: the primary the engine should aim for during a roll. A SwitchTo moves it; a primary
    pinned by spec.primary to a Pod still on the old revision is not switched back to until
    that Pod was updated (else the roll would bounce the primary back before restarting it)."""
    if isinstance(roll, rolling.SwitchTo):
        return roll.name
    if pinned is None or roll is None or isinstance(roll, rolling.Done):
        return pinned
    pinned_pod = next((p for p in pods if (p.get("metadata") or {}).get("name") == pinned), None)
    if pinned_pod is None or revision is None:
        return pinned
    current = ((pinned_pod.get("metadata") or {}).get("labels") or {}).get(rolling.REVISION_LABEL)
    return pinned if current == revision else None


def roll_step(api, c: MySQLCluster, listed, observed, primary) -> tuple[rolling.RollStep | None, str | None]:
    """Effect: read the StatefulSet's update revision; the next roll step (None: no roll)."""
    if primary is None:
        return None, None
    try:
        sts = client.AppsV1Api(api).read_namespaced_stateful_set(m.statefulset_name(c), c.namespace)
    except ApiException as e:
        if e.status == 404:
            return None, None
        raise
    status = sts.status
    revision = rolling.update_revision(
        {
            "metadata": {"generation": sts.metadata.generation},
            "status": {
                "observedGeneration": status.observed_generation if status else None,
                "updateRevision": status.update_revision if status else None,
            },
        }
    )
    if revision is None:
        return None, None
    return rolling.next_step(
        roll_pods(c.name, listed, observed, primary), revision, primary, c.spec.instances
    ), revision


def roll_delete(api, body, decision, roll) -> None:
    """Effect: delete the outdated Pod, only when the topology is settled (Healthy): never during
    a failover, a switchover or while a replica is being configured."""
    if not isinstance(roll, rolling.DeletePod) or not isinstance(decision, t.Healthy):
        return
    meta = body["metadata"]
    try:
        client.CoreV1Api(api).delete_namespaced_pod(roll.name, meta["namespace"])
    except ApiException as e:
        if e.status != 404:
            raise
        return
    k.post_events(api, body, [("Normal", "RollingUpdate", f"restarting {roll.name}: {roll.reason}")])
    log.info(
        "%s/%s RollingUpdate: restarting %s: %s", meta["namespace"], meta["name"], roll.name, roll.reason
    )


# ---------------------------------------------------------------------------------------- restore
def restore_source(api, c: MySQLCluster) -> Source:
    """Effect (reads Kubernetes objects only): where spec.restore points. ValueError naming the
    field and the fix when it cannot be used. The bucket itself is only read by the restore Job."""
    r = c.spec.restore
    assert r is not None
    if r.from_backup is not None:
        try:
            backup = client.CustomObjectsApi(api).get_namespaced_custom_object(
                GROUP, VERSION, c.namespace, BACKUP_PLURAL, r.from_backup
            )
        except ApiException as e:
            if e.status != 404:
                raise
            backup = None
        location = restoring.backup_location(backup, r.from_backup)
        try:
            cluster_name = parse_backup(backup).cluster_name
        except SpecError as e:
            raise ValueError(f"spec.restore.fromBackup.name: MySQLBackup {r.from_backup}: {e}") from None
        s3 = parse_backup(backup).s3
        if s3 is None:
            owner = k.read_cluster(api, c.namespace, cluster_name)
            spec = parse(owner).spec if owner is not None else None
            s3 = spec.backup.s3 if spec is not None and spec.backup else None
        if s3 is None:
            raise ValueError(
                f"spec.restore.fromBackup.name: MySQLBackup {r.from_backup} names no storage "
                f"and its cluster {cluster_name} is gone: use spec.restore.s3 instead"
            )
        source = Source(s3, location)
    else:
        assert r.s3 is not None
        s3 = r.s3
        source = Source(s3, s3.path or "")
    secret = k.read_secret_data(api, c.namespace, s3.credentials_secret.name) or {}
    keys = (s3.credentials_secret.access_key_id_key, s3.credentials_secret.secret_access_key_key)
    missing = [key for key in keys if not secret.get(key)]
    if missing:
        raise ValueError(
            f"S3 credentials: Secret {s3.credentials_secret.name} lacks {', '.join(missing)} "
            "(or does not exist): create it with the access key id and secret access key"
        )
    return source


def restore_gate(
    rec: "Reconciler",
    body,
    c: MySQLCluster,
    previous,
    pods,
    names,
    passwords,
    ready: int,
    applied: bool,
    secret_error: str | None = None,
) -> Result | None:
    """spec.restore at creation: None when the reconcile may go on (no restore, or it succeeded);
    else the Result of a loop that held the cluster (Restoring / RestoreFailed) and published it.
    The load itself runs in the restore Job (see mysql_operator.restoring)."""
    if c.spec.restore is None:
        return None
    record = previous.get("restore")
    not_ready = [
        names.get(o, m.pod_name(c, o)) for o in range(c.spec.instances) if not (pods.get(o) and pods[o].ready)
    ]
    job: Mapping[str, Any] | str | None = None
    if (record or {}).get("phase") == restoring.RUNNING:
        found, job_pods = jobs.read_job(rec.api, c.namespace, restore_job_name(c))
        if found is not None:
            job = (
                jobs.job_result(found, job_pods, f"the restore Job {restore_job_name(c)}")
                or restoring.JOB_RUNNING
            )
    action = restoring.decide(True, record, previous.get("currentPrimary"), not_ready, job)
    if isinstance(action, restoring.Proceed):
        return None
    if isinstance(action, restoring.Start) and secret_error:
        action = restoring.WaitForInstances(secret_error)  # e.g. the user's Secret lacks restore-password
    secrets = list(passwords.values())
    events: list[tuple[str, str, str]] = []
    patch: dict[str, Any] = {}
    if isinstance(action, restoring.Start):
        described = restoring.describe_source(c.spec.restore.from_backup, c.spec.restore.s3)
        started = clock.stamp()
        try:
            source = restore_source(rec.api, c)
            record = restoring.record(restoring.RUNNING, described, started, job=restore_job_name(c))
            k.patch_status(rec.api, c.namespace, c.name, {"restore": record})  # before the Job exists
            jobs.create_job(
                rec.api,
                m.owned(
                    restore_job(
                        c, source.s3, source.path, rec.job_image, image_pull_policy=c.spec.image_pull_policy
                    ),
                    _owner(body),
                ),
            )
        except (ValueError, ApiException) as e:
            message = redact(
                str(e) if isinstance(e, ValueError) else f"creating the restore Job: {e.reason}", secrets
            )
            record = restoring.record(restoring.FAILED, described, started, clock.stamp(), message)
            patch["restore"] = record
            events.append(("Warning", "RestoreFailed", message))
            action = restoring.Failed(message)
        else:
            events.append(
                (
                    "Normal",
                    "RestoreStarted",
                    f"restoring {described} into every instance (Job {restore_job_name(c)})",
                )
            )
            action = restoring.InProgress()
    elif isinstance(action, restoring.Finished):
        result = action.result
        ok = bool(result.get("ok"))
        message = redact(str(result.get("message") or ""), secrets)[:1024]
        extra = {
            key: result[key] for key in ("durationSeconds", "gtidPosition", "bytesLoaded") if key in result
        }
        record = restoring.record(
            restoring.SUCCEEDED if ok else restoring.FAILED,
            record.get("source", ""),
            record.get("startedAt", clock.stamp()),
            clock.stamp(),
            message,
            **({"job": record["job"]} if record.get("job") else {}),
            **extra,
        )
        patch["restore"] = record
        if ok:
            primary = m.pod_name(c, c.spec.primary if c.spec.primary is not None else 0)
            patch["currentPrimary"] = primary  # the engine adopts: promote it, attach the others
        events.append(
            ("Normal", "RestoreSucceeded", message) if ok else ("Warning", "RestoreFailed", message)
        )
        log.log(logging.INFO if ok else logging.WARNING, "%s/%s restore: %s", c.namespace, c.name, message)
        action = restoring.InProgress() if ok else restoring.Failed(message)
    elif isinstance(action, restoring.Failed) and (record or {}).get("phase") != restoring.FAILED:
        # the Job is gone, or a primary without a record: recorded once, with its Event
        record = restoring.record(
            restoring.FAILED,
            (record or {}).get("source", ""),
            (record or {}).get("startedAt", clock.stamp()),
            clock.stamp(),
            action.message,
        )
        patch["restore"] = record
        events.append(("Warning", "RestoreFailed", action.message))
    if patch:
        k.patch_status(rec.api, c.namespace, c.name, patch)

    ordinals = sorted(set(range(c.spec.instances)) | set(pods))
    all_names = {o: m.pod_name(c, o) for o in ordinals}
    summary = Summary(
        instances=c.spec.instances,
        generation=c.generation,
        ready=ready,
        entries=tuple(instance_entries(ordinals, all_names, pods, {}, {}, {}, None)),
    )
    now = clock.stamp()
    status = restoring.overlay_status(build_status(summary, previous, now), action, record, now)
    if "currentPrimary" in patch:
        status["currentPrimary"] = patch["currentPrimary"]
    if status_changed(previous, status):
        k.patch_status(rec.api, c.namespace, c.name, status)
    if events:
        k.post_events(rec.api, body, events)
    return Result(phase=status["phase"], applied=applied)


def tls_api_problem(c: MySQLCluster, status: int | None, reason: str | None) -> certificates.TLSProblem:
    """Pure: an API error while ensuring the certificate, as a problem the status reports (the
    servers keep their current certificate meanwhile)."""
    answer = f"HTTP {status} {reason or ''}".strip() if status else (reason or "no answer")
    if c.spec.tls.issuer_ref is not None:
        return certificates.TLSProblem(
            "CertManagerAPIError",
            (
                f"spec.tls.issuerRef: reading or applying cert-manager objects (Certificate "
                f"{m.tls_secret_name(c)}, the issuer) or Secret {m.tls_secret_name(c)} failed: {answer}: "
                "check the operator's permissions (the chart's RBAC) and the API server"
            ),
        )
    return certificates.TLSProblem(
        "TLSSecretsAPIError",
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


def _tls_context(entry: _Entry) -> ssl.SSLContext | None:
    """Verify servers against the cluster's CA once it is known."""
    return tls_context(entry.tls.ca_pem) if entry.tls is not None else None


def _owner(body: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": body.get("apiVersion"), "kind": body.get("kind"), "metadata": body["metadata"]}


def _required_keys(c: MySQLCluster) -> list[str]:
    keys = [m.ROOT_PASSWORD_KEY, m.OPERATOR_PASSWORD_KEY, m.REPLICATION_PASSWORD_KEY]
    if c.spec.database and c.spec.database.user:
        keys.append(m.APP_PASSWORD_KEY)
    if c.spec.restore:  # a new cluster: the restore account loads the dump
        keys.append(m.RESTORE_PASSWORD_KEY)
    return keys


def _optional_keys(c: MySQLCluster) -> list[str]:
    """Keys always in the generated Secret, used when present in a Secret of the user's (one
    from before they existed must keep working): without backup-password the cluster has no
    backup account and its backups fail saying so."""
    return [m.BACKUP_PASSWORD_KEY]
