"""What a failed e2e test leaves behind, and the primary changes and re-seeds no test asked for.

`save_bundle` writes one folder per failed test outside the clone (EVIDENCE_ROOT: the variable
MYSQLOP_E2E_EVIDENCE, else /var/tmp/mysqlop-e2e-evidence), its INDEX.txt saying what each file is:
the Pod logs (the `mysqld` container's is the server's error log: the servers' my.cnf names no
log file, so MariaDB and MySQL write it to stderr; a log_error a cluster's spec.config sets is read
from its Pod), every Event sorted by time, the Pods' and Jobs' states, the MySQLClusters as stored
with their status history (each status patch the operator made, read back from the API server's
audit log, tests/support/audit.py), the operator's requests on the namespace (the same log), and
each server's replication state asked over SQL with the operator's account.

`disruptions` and `undeclared` read the Events the operator posts when it moves a primary or
replaces an instance's data (EVENT_KINDS): e2e/conftest.py fails a test during which one happened
that the test did not declare with `@pytest.mark.causes(...)`.

The parsing is pure (tests/unit/test_e2e_evidence.py); the rest reads a running cluster.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

EVIDENCE_VARIABLE = "MYSQLOP_E2E_EVIDENCE"
DEFAULT_ROOT = Path("/var/tmp/mysqlop-e2e-evidence")
KEEP_DAYS = 7  # bundles older than this under DEFAULT_ROOT are removed at a session's start

OPERATOR_ACCOUNT = "mysql-operator"  # tests/support/audit.py OPERATOR_SERVICE_ACCOUNT

# The Event reasons the operator posts (mysql_operator/status_events.py decision_event,
# events_from_steps; engine_hooks.py force_failover_done) by the kind of disruption a test declares
# it causes
EVENT_KINDS: dict[str, str] = {
    "Failover": "Failover",
    "FailoverForced": "Failover",
    "FailoverHeld": "Failover",  # the primary lost, its failover held: a primary change under way
    "Switchover": "Switchover",
    "Reseed": "Reseed",
    "ReseedFailed": "Reseed",
    "NeedsSeedFailed": "Reseed",  # an instance whose data must be replaced (needs-seed step)
}
KINDS = frozenset(EVENT_KINDS.values())
# listed beside them in the report, never failing a test: the operator restarting a server that
# took logins but answered no query
NOTED = frozenset({"RestartStuck", "RestartStuckFailed"})


def root() -> Path:
    return Path(os.environ.get(EVIDENCE_VARIABLE) or DEFAULT_ROOT)


# ------------------------------------------------------------------------------ Events (pure)
@dataclass(frozen=True)
class Disruption:
    """One Event of EVENT_KINDS or NOTED."""

    namespace: str
    involved: str  # Kind/name
    reason: str
    type: str
    message: str
    first: str  # ISO timestamps, as the API server has them ("" when absent)
    last: str
    count: int

    @property
    def kind(self) -> str | None:
        return EVENT_KINDS.get(self.reason)

    def line(self) -> str:
        times = self.first if self.first == self.last or not self.last else f"{self.first} .. {self.last}"
        return (
            f"{times} {self.namespace} {self.involved} {self.type} {self.reason} x{self.count}"
            f"{f' ({self.kind})' if self.kind and self.kind != self.reason else ''}: {self.message}"
        )


def _get(obj: Any, *names: str) -> Any:
    """A field of an API object or its dict form (snake_case or camelCase names)."""
    for name in names:
        if isinstance(obj, Mapping):
            if name in obj:
                return obj[name]
        elif hasattr(obj, name):
            return getattr(obj, name)
    return None


def _stamp(value: Any) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return value.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")
    return str(value)


def parse_time(value: str) -> dt.datetime | None:
    if not value:
        return None
    try:
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def event_times(e: Any) -> tuple[str, str]:
    """(first, last) of a core/v1 Event: its first/last timestamps, else its eventTime, else
    when the API server stored it."""
    meta = _get(e, "metadata")
    created = _get(meta, "creation_timestamp", "creationTimestamp") if meta is not None else None
    first = _get(e, "first_timestamp", "firstTimestamp") or _get(e, "event_time", "eventTime") or created
    last = _get(e, "last_timestamp", "lastTimestamp") or first
    return _stamp(first), _stamp(last)


def disruption(e: Any, namespace: str = "") -> Disruption | None:
    """The Event (a kubernetes client V1Event or its dict) as a Disruption, None if its reason
    is none of EVENT_KINDS or NOTED."""
    reason = _get(e, "reason") or ""
    if reason not in EVENT_KINDS and reason not in NOTED:
        return None
    obj = _get(e, "involved_object", "involvedObject") or {}
    meta = _get(e, "metadata") or {}
    first, last = event_times(e)
    return Disruption(
        namespace=namespace or _get(meta, "namespace") or _get(obj, "namespace") or "",
        involved=f"{_get(obj, 'kind') or '?'}/{_get(obj, 'name') or '?'}",
        reason=reason,
        type=_get(e, "type") or "",
        message=(_get(e, "message") or "").strip(),
        first=first,
        last=last,
        count=int(_get(e, "count") or 1),
    )


def disruptions(
    events: Iterable[Any], since: dt.datetime | None = None, namespace: str = ""
) -> list[Disruption]:
    """The Events of EVENT_KINDS and NOTED last seen at or after `since` (to the second: the
    API keeps Event timestamps in whole seconds), oldest first."""
    floor = since.replace(microsecond=0) if since is not None else None
    out = []
    for e in events:
        d = disruption(e, namespace)
        if d is None:
            continue
        last = parse_time(d.last) or parse_time(d.first)
        if floor is not None and last is not None and last < floor:
            continue
        out.append(d)
    return sorted(out, key=lambda d: (d.first, d.last))  # (stable: the API's order within a second)


def undeclared(found: Iterable[Disruption], declared: Iterable[str]) -> list[Disruption]:
    """The disruptions of a kind the test did not declare (`@pytest.mark.causes(...)`)."""
    allowed = set(declared)
    return [d for d in found if d.kind is not None and d.kind not in allowed]


def declared_kinds(marker_args: Iterable[Iterable[str]]) -> set[str]:
    """The kinds named by every `causes` marker of a test; a name that is no kind raises."""
    kinds = {k for args in marker_args for k in args}
    unknown = kinds - KINDS
    if unknown:
        raise ValueError(f"pytest.mark.causes: unknown kinds {sorted(unknown)}; known: {sorted(KINDS)}")
    return kinds


def report(found: list[Disruption], declared: Iterable[str]) -> str:
    """The report section: every disruption, the undeclared ones marked."""
    allowed = set(declared)
    lines = [f"declared (@pytest.mark.causes): {', '.join(sorted(allowed)) or 'none'}"]
    for d in found:
        flag = "UNDECLARED " if d.kind is not None and d.kind not in allowed else ""
        lines.append(f"{flag}{d.line()}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ audit log (pure)
def _is_operator(event: Mapping[str, Any], account: str = OPERATOR_ACCOUNT) -> bool:
    user = (event.get("user") or {}).get("username", "")
    return user.startswith("system:serviceaccount:") and user.endswith(f":{account}")


def audit_events(lines: Iterable[str], namespaces: Iterable[str]) -> Iterator[dict]:
    """The audit log's entries (JSON lines) of the operator's ServiceAccount about objects in
    `namespaces`, in the log's order."""
    wanted = set(namespaces)
    needles = [f'"namespace":"{ns}"' for ns in wanted]
    for line in lines:
        if f':{OPERATOR_ACCOUNT}"' not in line or not any(n in line for n in needles):
            continue  # most lines: another account's or another namespace's
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line being written as we read
        ref = event.get("objectRef") or {}
        if ref.get("namespace") in wanted and _is_operator(event):
            yield event


def label_history(events: Iterable[Mapping[str, Any]], label: str) -> list[tuple[str, str, str | None]]:
    """Every patch of the operator that set or removed `label` on a Pod, in the log's order:
    (time, Pod, value; None: removed)."""
    out = []
    for e in events:
        ref = e.get("objectRef") or {}
        body = e.get("requestObject")
        if ref.get("resource") != "pods" or e.get("verb") != "patch" or not isinstance(body, Mapping):
            continue
        labels = (body.get("metadata") or {}).get("labels") or {}
        if label in labels:
            when = e.get("stageTimestamp") or e.get("requestReceivedTimestamp") or ""
            out.append((when, ref.get("name", ""), labels[label]))
    return out


def status_history(events: Iterable[Mapping[str, Any]]) -> list[dict]:
    """Every status write of the operator on MySQLClusters (in the log's order, which is the API
    server's): when, which cluster, the patch it sent and the status it left (the audit log's
    request and response bodies; RequestResponse level, tests/support/audit.py)."""
    out = []
    for e in events:
        ref = e.get("objectRef") or {}
        if ref.get("resource") != "mysqlclusters" or e.get("verb") not in ("patch", "update"):
            continue
        body = e.get("requestObject")
        if not isinstance(body, Mapping) or "status" not in body:
            continue  # an annotation removed, kopf's progress: not the status
        if ref.get("subresource") not in (None, "", "status"):
            continue
        response = e.get("responseObject") if isinstance(e.get("responseObject"), Mapping) else {}
        out.append(
            {
                "time": e.get("stageTimestamp") or e.get("requestReceivedTimestamp"),
                "namespace": ref.get("namespace"),
                "cluster": ref.get("name"),
                "subresource": ref.get("subresource") or "",
                "code": (e.get("responseStatus") or {}).get("code"),
                "user": (e.get("user") or {}).get("username"),
                "patch": body["status"],
                "status": (response or {}).get("status"),
            }
        )
    return out


def request_line(e: Mapping[str, Any]) -> str:
    """One audit entry as a line: when, verb, object, answer."""
    ref = e.get("objectRef") or {}
    what = ref.get("resource", "")
    if ref.get("subresource"):
        what += "/" + ref["subresource"]
    if ref.get("apiGroup"):
        what = f"{what}.{ref['apiGroup']}"
    status = e.get("responseStatus") or {}
    message = f" {status['message'][:300]}" if status.get("message") else ""
    name = ref.get("name") or ""
    body = e.get("requestObject")
    if not name and isinstance(body, Mapping):  # a create with generateName: the name it got
        response = e.get("responseObject") if isinstance(e.get("responseObject"), Mapping) else {}
        name = ((response or {}).get("metadata") or {}).get("name", "")
    reason = (
        f" reason={body.get('reason')}" if isinstance(body, Mapping) and body.get("kind") == "Event" else ""
    )
    return (
        f"{e.get('stageTimestamp') or e.get('requestReceivedTimestamp')} {e.get('verb')} {what} "
        f"{ref.get('namespace', '')}/{name} -> {status.get('code')}{reason}{message}"
    )


def safe_name(text: str, limit: int = 150) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)[:limit].strip("_") or "test"


# ------------------------------------------------------------------------------ the cluster
def list_disruptions(api, namespaces: Iterable[str], since: dt.datetime | None) -> list[Disruption]:
    """The disruptions in the namespaces now (a namespace gone has none)."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    found: list[Disruption] = []
    for ns in namespaces:
        try:
            events = core.list_namespaced_event(ns, _request_timeout=20).items
        except Exception:  # noqa: BLE001 - gone, or the API server slow: nothing to say about it
            continue
        found += disruptions(events, since, ns)
    return sorted(found, key=lambda d: (d.first, d.last))


# namespaces deleted while the process runs (e2e/helpers.py scenario_namespace): their
# disruptions as seen just before, so a test that made and deleted one is still checked
_SNAPSHOTS: dict[str, list[Disruption]] = {}


def snapshot(api, namespace: str) -> None:
    _SNAPSHOTS[namespace] = list_disruptions(api, [namespace], None)


def snapshots(namespaces: Iterable[str], since: dt.datetime | None) -> list[Disruption]:
    floor = since.replace(microsecond=0) if since is not None else None
    return [
        d
        for ns in namespaces
        for d in _SNAPSHOTS.get(ns, [])
        if floor is None or (parse_time(d.last) or parse_time(d.first) or floor) >= floor
    ]


INDEX = """Evidence of one failed e2e test ({test}).
Saved {saved} for the window {since} .. now; namespaces: {namespaces}.

INDEX.txt                  this file
failure.txt                the failure as pytest reported it (when there was one to copy)
disruptions.txt            the Failover/Switchover/Reseed Events (and RestartStuck) of the test's
                           namespaces since it began, and what the test declared it causes
operator.log               the log of the operator the test ran itself (host_operator), if it did
<namespace>/               one folder per namespace: the test's, and the chart's operator's
                           ({operator_namespace}: its Pods' logs are the operator's log)
  events.txt               every Event of the namespace, oldest first: first and last time,
                           count, type, reason, object, message
  pods.txt                 each Pod: phase, node, IP, conditions, and each (init) container's
                           readiness, restart count, state and last termination (reason, exit
                           code, when)
  jobs.txt                 each Job (backups, restores, the evidence copies): counts and conditions
  statefulsets.txt         each StatefulSet: replicas, ready, current and update revisions
  mysqlclusters.json       the MySQLClusters (and MySQLBackups) as stored: spec and status
  status-history.jsonl     every status write of the operator on the namespace's MySQLClusters, in
                           order, one JSON object a line: time, cluster, HTTP code, the patch it
                           sent, the status it left (from the API server's audit log)
  audit.txt                the operator's requests on the namespace (its writes, reads, Events
                           posted), one a line: time, verb, object, HTTP code
  audit.jsonl              the same requests, whole audit entries (writes with their request and
                           response bodies; never a Secret's: tests/support/audit.py)
  servers/<pod>.txt        each server asked over SQL with the operator's account (its Pod IP):
                           version, server_id, read_only, the GTID positions, SHOW REPLICA STATUS,
                           semi-sync state, binary logs, scheduled events, sessions; the error met
                           instead when it did not answer
  logs/<pod>.<container>.log            the container's log (`mysqld`: the server's error log,
                                        written to stderr; `seed`/`seed-donor`: the re-seed copies)
  logs/<pod>.<container>.previous.log   the container's log before its last restart
  logs/<pod>.error.log                  the server's error log read from its file, when its
                                        log_error names one
"""


def save_bundle(
    handle,
    test: str,
    namespaces: list[str],
    since: dt.datetime | None,
    *,
    operator_namespace: str,
    failure: str = "",
    disruption_report: str = "",
    operator_log: Path | None = None,
) -> Path:
    """Everything above for `namespaces` (the chart's operator's too), in a new folder; its path.
    Nothing here raises: what could not be read is said in the file that would have held it."""
    started = time.monotonic()
    stamp = dt.datetime.now(dt.timezone.utc)
    base = root() / f"{stamp.strftime('%Y%m%dT%H%M%SZ')}-{safe_name(test)}"
    out, suffix = base, 0
    while out.exists():  # the same test failing twice within a second (a rerun)
        suffix += 1
        out = base.with_name(f"{base.name}-{suffix}")
    out.mkdir(parents=True)
    api = handle.api_client()
    all_ns = [operator_namespace] + [ns for ns in namespaces if ns != operator_namespace]
    (out / "INDEX.txt").write_text(
        INDEX.format(
            test=test,
            saved=stamp.isoformat(timespec="seconds"),
            since=since.isoformat(timespec="seconds") if since else "?",
            namespaces=", ".join(all_ns),
            operator_namespace=operator_namespace,
        )
    )
    if failure:
        (out / "failure.txt").write_text(failure)
    (out / "disruptions.txt").write_text(
        disruption_report or report(list_disruptions(api, namespaces, since), ()) + "\n"
    )
    if operator_log is not None and operator_log.exists():
        _copy_tail(operator_log, out / "operator.log", 20_000_000)
    for ns in all_ns:
        _guard(out / ns / "errors.txt", save_namespace, api, ns, out / ns, servers=ns != operator_namespace)
    test_ns = [ns for ns in all_ns if ns != operator_namespace]
    if test_ns:
        _guard(out / "errors.txt", save_audit, handle, test_ns, out)
    with (out / "INDEX.txt").open("a") as f:
        f.write(f"\n(collected in {time.monotonic() - started:.1f} s)\n")
    return out


def _guard(errors: Path, fn, *args, **kwargs) -> None:
    try:
        fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - evidence is best effort: say what failed, go on
        errors.parent.mkdir(parents=True, exist_ok=True)
        with errors.open("a") as f:
            f.write(f"{getattr(fn, '__name__', fn)}: {type(e).__name__}: {e}\n")


def _copy_tail(src: Path, dst: Path, limit: int) -> None:
    with src.open("rb") as f:
        f.seek(max(0, src.stat().st_size - limit))
        dst.write_bytes(f.read())


def save_namespace(api, namespace: str, out: Path, servers: bool = True) -> None:
    """Logs, Events, Pods, Jobs, StatefulSets, the custom objects and (`servers`) each server's
    replication state, of one namespace."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    out.mkdir(parents=True, exist_ok=True)
    try:
        pods = core.list_namespaced_pod(namespace, _request_timeout=30).items
    except client.ApiException as e:
        (out / "errors.txt").write_text(f"the namespace's Pods could not be listed: {e.status} {e.reason}\n")
        return
    logs = out / "logs"
    logs.mkdir(exist_ok=True)
    for pod in pods:
        for c in (pod.spec.init_containers or []) + pod.spec.containers:
            for previous in (False, True):
                try:
                    text = core.read_namespaced_pod_log(
                        pod.metadata.name, namespace, container=c.name, previous=previous, _request_timeout=30
                    )
                except Exception:  # noqa: BLE001 - no such log (never ran, no restart)
                    continue
                suffix = ".previous" if previous else ""
                (logs / f"{pod.metadata.name}.{c.name}{suffix}.log").write_text(text or "")
    _guard(out / "errors.txt", _save_events, core, namespace, out / "events.txt")
    (out / "pods.txt").write_text("\n\n".join(pod_state(p) for p in pods) + "\n")
    _guard(out / "errors.txt", _save_workloads, api, namespace, out)
    objs = client.CustomObjectsApi(api)
    stored: dict[str, list] = {}
    for plural in ("mysqlclusters", "mysqlbackups"):
        try:
            stored[plural] = objs.list_namespaced_custom_object(
                "mysql.operator.dev", "v1alpha1", namespace, plural, _request_timeout=30
            )["items"]
        except Exception:  # noqa: BLE001 - no such resource here (CRDs not installed)
            continue
    (out / "mysqlclusters.json").write_text(json.dumps(stored, indent=2, default=str))
    if servers:
        for cluster in stored.get("mysqlclusters", []):
            _guard(out / "errors.txt", save_servers, api, cluster, pods, out / "servers", logs)


def _save_events(core, namespace: str, path: Path) -> None:
    events = core.list_namespaced_event(namespace, _request_timeout=30).items
    rows = []
    for e in events:
        first, last = event_times(e)
        obj = e.involved_object
        rows.append(
            (
                last or first,
                f"{first} {last} x{e.count or 1} {e.type} {e.reason} "
                f"{obj.kind}/{obj.name}: {(e.message or '').strip()}",
            )
        )
    path.write_text(
        "first last count type reason object: message\n" + "\n".join(r for _, r in sorted(rows)) + "\n"
    )


def pod_state(p) -> str:
    """A Pod's phase, conditions and container states, as lines."""
    st = p.status
    lines = [
        f"{p.metadata.name} phase={st.phase} node={p.spec.node_name} ip={st.pod_ip} "
        f"uid={p.metadata.uid} created={_stamp(p.metadata.creation_timestamp)}"
        + (
            f" deleting-since={_stamp(p.metadata.deletion_timestamp)}"
            if p.metadata.deletion_timestamp
            else ""
        )
        + (f" reason={st.reason} message={st.message}" if st.reason or st.message else ""),
        f"  labels: {p.metadata.labels}",
    ]
    for c in st.conditions or []:
        lines.append(
            f"  condition {c.type}={c.status} since {_stamp(c.last_transition_time)}"
            + (f" {c.reason}: {c.message}" if c.reason or c.message else "")
        )
    for kind, statuses in (("init", st.init_container_statuses), ("container", st.container_statuses)):
        for s in statuses or []:
            lines.append(
                f"  {kind} {s.name}: ready={s.ready} restarts={s.restart_count} "
                f"state={_container_state(s.state)} image={s.image}"
            )
            if s.last_state and (s.last_state.terminated or s.last_state.waiting or s.last_state.running):
                lines.append(f"    last: {_container_state(s.last_state)}")
    return "\n".join(lines)


def _container_state(state) -> str:
    if state is None:
        return "?"
    if state.running:
        return f"running since {_stamp(state.running.started_at)}"
    if state.waiting:
        return f"waiting {state.waiting.reason}: {state.waiting.message or ''}".rstrip(": ")
    if state.terminated:
        t = state.terminated
        return (
            f"terminated {t.reason} exit={t.exit_code}"
            + (f" signal={t.signal}" if t.signal else "")
            + f" {_stamp(t.started_at)} .. {_stamp(t.finished_at)}"
            + (f": {t.message.strip()[:500]}" if t.message else "")
        )
    return "?"


def _save_workloads(api, namespace: str, out: Path) -> None:
    from kubernetes import client

    jobs = client.BatchV1Api(api).list_namespaced_job(namespace, _request_timeout=30).items
    lines = []
    for j in jobs:
        s = j.status
        lines.append(
            f"{j.metadata.name} active={s.active or 0} succeeded={s.succeeded or 0} failed={s.failed or 0} "
            f"start={_stamp(s.start_time)} completion={_stamp(s.completion_time)} labels={j.metadata.labels}"
        )
        lines += [
            f"  condition {c.type}={c.status} {_stamp(c.last_transition_time)} {c.reason or ''}: {c.message or ''}"
            for c in s.conditions or []
        ]
    (out / "jobs.txt").write_text("\n".join(lines) + "\n")
    sets = client.AppsV1Api(api).list_namespaced_stateful_set(namespace, _request_timeout=30).items
    (out / "statefulsets.txt").write_text(
        "\n".join(
            f"{s.metadata.name} replicas={s.spec.replicas} ready={s.status.ready_replicas} "
            f"current={s.status.current_revision} update={s.status.update_revision} "
            f"observedGeneration={s.status.observed_generation}/{s.metadata.generation}"
            for s in sets
        )
        + "\n"
    )


# what each server is asked; a statement one flavor lacks answers its error, which is written
SERVER_QUERIES = (
    "SELECT @@hostname, @@version, @@server_id, @@read_only, @@log_error, @@datadir",
    "SELECT @@super_read_only",
    "SELECT @@gtid_executed",  # MySQL
    "SELECT @@server_uuid",
    "SELECT @@gtid_binlog_pos, @@gtid_slave_pos, @@gtid_current_pos, @@gtid_strict_mode",  # MariaDB
    "SHOW REPLICA STATUS",
    "SHOW SESSION STATUS LIKE 'Ssl_cipher'",  # this connection's: TLS or not
    "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync%'",
    "SHOW GLOBAL VARIABLES LIKE 'rpl_semi_sync%'",
    "SHOW BINARY LOGS",
    # scheduled events: where each runs (a replica's scheduler can put back ENABLED: duties.Events)
    "SELECT EVENT_SCHEMA, EVENT_NAME, STATUS, ORIGINATOR, DEFINER, LAST_EXECUTED FROM information_schema.EVENTS",
    "SELECT ID, USER, HOST, DB, COMMAND, TIME, STATE, LEFT(INFO, 200) FROM information_schema.PROCESSLIST",
)
FALLBACKS = {"SHOW REPLICA STATUS": "SHOW SLAVE STATUS"}  # servers older than the word


def _passwords(api, cluster: Mapping[str, Any]) -> list[str]:
    """The operator's password: as last applied to the servers, then as the Secret has it."""
    import base64

    from kubernetes import client

    core = client.CoreV1Api(api)
    meta, spec = cluster["metadata"], cluster.get("spec") or {}
    secret = ((spec.get("credentials") or {}).get("secretName")) or f"{meta['name']}-credentials"
    found = []
    for name in (f"{meta['name']}-credentials-applied", secret):
        try:
            data = core.read_namespaced_secret(name, meta["namespace"], _request_timeout=20).data or {}
        except Exception:  # noqa: BLE001
            continue
        if "operator-password" in data:
            pw = base64.b64decode(data["operator-password"]).decode()
            if pw not in found:
                found.append(pw)
    return found


def server_report(host: str, passwords: list[str], user: str = OPERATOR_ACCOUNT) -> tuple[str, str]:
    """(the report of one server over SQL, its log_error value ("" when unknown)). Short timeouts;
    every error is written into the report, none raised. TLS when the server offers it,
    unverified (a cluster with spec.tls.required refuses plaintext)."""
    import ssl

    import pymysql
    import pymysql.cursors

    tls = ssl.create_default_context()
    tls.check_hostname = False
    tls.verify_mode = ssl.CERT_NONE
    conn, errors = None, []
    for pw in passwords or [""]:
        try:
            conn = pymysql.connect(
                host=host,
                port=3306,
                user=user,
                password=pw,
                connect_timeout=3,
                read_timeout=5,
                write_timeout=5,
                autocommit=True,
                ssl=tls,
                cursorclass=pymysql.cursors.DictCursor,
            )
            break
        except Exception as e:  # noqa: BLE001
            errors.append(f"{type(e).__name__}: {e}")
    if conn is None:
        return f"no connection to {host}:3306 as {user}: {'; '.join(errors) or 'no password found'}\n", ""
    lines, log_error = [f"{host}:3306 as {user}"], ""
    with conn:
        for sql in SERVER_QUERIES:
            lines.append(f"\n> {sql}")
            try:
                rows = _rows(conn, sql)
            except Exception as e:  # noqa: BLE001 - a statement the flavor lacks, or a timeout
                lines.append(f"  error: {type(e).__name__}: {e}")
                if sql not in FALLBACKS:
                    continue
                sql = FALLBACKS[sql]
                lines.append(f"> {sql}")
                try:
                    rows = _rows(conn, sql)
                except Exception as e:  # noqa: BLE001
                    lines.append(f"  error: {type(e).__name__}: {e}")
                    continue
            if not rows:
                lines.append("  (no rows)")
            if rows and set(rows[0]) == {"Variable_name", "Value"}:  # SHOW STATUS, SHOW VARIABLES
                lines += [f"  {r['Variable_name']} = {r['Value']}" for r in rows]
                continue
            for n, row in enumerate(rows):
                if len(rows) > 1:
                    lines.append(f"  -- row {n + 1}")
                lines += [f"  {k}: {v}" for k, v in row.items()]
                if "@@log_error" in row:
                    log_error = str(row["@@log_error"] or "")
                    datadir = str(row.get("@@datadir") or "")
                    if log_error.startswith("./") and datadir:
                        log_error = datadir.rstrip("/") + log_error[1:]
    return "\n".join(lines) + "\n", log_error


def _rows(conn, sql: str) -> list[dict]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def save_servers(api, cluster: Mapping[str, Any], pods: list, out: Path, logs: Path) -> None:
    name = cluster["metadata"]["name"]
    mine = [
        p
        for p in pods
        if (p.metadata.labels or {}).get("app.kubernetes.io/instance") == name
        and (p.metadata.labels or {}).get("app.kubernetes.io/component") == "database"
    ]
    if not mine:
        return
    out.mkdir(parents=True, exist_ok=True)
    passwords = _passwords(api, cluster)
    for p in mine:
        if not p.status.pod_ip:
            (out / f"{p.metadata.name}.txt").write_text(f"no Pod IP (phase {p.status.phase})\n")
            continue
        text, log_error = server_report(p.status.pod_ip, passwords)
        (out / f"{p.metadata.name}.txt").write_text(text)
        if log_error.startswith("/"):  # a file, not stderr (the container's log)
            (logs / f"{p.metadata.name}.error.log").write_text(_read_in_pod(api, p, log_error))


def _read_in_pod(api, pod, path: str, limit: int = 2_000_000) -> str:
    from kubernetes.stream import stream

    from kubernetes import client

    try:
        return stream(
            client.CoreV1Api(api).connect_get_namespaced_pod_exec,
            pod.metadata.name,
            pod.metadata.namespace,
            container="mysqld",
            command=["tail", "-c", str(limit), path],
            stderr=True,
            stdin=False,
            stdout=True,
            tty=False,
            _request_timeout=30,
        )
    except Exception as e:  # noqa: BLE001
        return f"could not read {path} in the mysqld container: {type(e).__name__}: {e}\n"


def audit_log_path(state: Mapping[str, Any]) -> Path | None:
    """The local cluster's audit log: where its state says, else where the control plane puts it
    (tests/support/audit.py log_path)."""
    from tests.support import audit
    from tests.support import cluster as cluster_mod

    candidates = []
    if state.get("audit_log"):
        candidates.append(Path(state["audit_log"]))
    candidates.append(cluster_mod.state_dir() / "control-plane" / "logs" / "audit.log")
    suite = os.environ.get(audit.SUITE_DIR_VARIABLE)
    if suite:
        candidates.append(Path(suite) / "control-plane.log")
    existing = [p for p in candidates if p.exists()]
    return max(existing, key=lambda p: p.stat().st_mtime) if existing else None


def label_patches(handle, namespace: str, label: str) -> list[tuple[str, str, str | None]]:
    """label_history of the operator's patches in `namespace`, from the local cluster's audit log."""
    from tests.support import audit

    path = audit_log_path(handle.state)
    assert path is not None, "no audit log found for the local cluster"
    events: list[dict] = []
    for log in audit.with_rotated(path):  # oldest first
        with log.open(encoding="utf-8", errors="replace") as f:
            events += audit_events(f, [namespace])
    return label_history(events, label)


def save_audit(handle, namespaces: list[str], out: Path) -> None:
    """status-history.jsonl, audit.txt and audit.jsonl of each namespace, from one read of the log."""
    path = audit_log_path(handle.state)
    if path is None:
        for ns in namespaces:
            (out / ns).mkdir(parents=True, exist_ok=True)
            (out / ns / "audit.txt").write_text("no audit log found for the local cluster\n")
        return
    by_ns: dict[str, list[dict]] = {ns: [] for ns in namespaces}
    with path.open(encoding="utf-8", errors="replace") as f:
        for e in audit_events(f, namespaces):
            by_ns[e["objectRef"]["namespace"]].append(e)
    for ns, events in by_ns.items():
        d = out / ns
        d.mkdir(parents=True, exist_ok=True)
        (d / "status-history.jsonl").write_text(
            "".join(json.dumps(h, sort_keys=True) + "\n" for h in status_history(events))
        )
        (d / "audit.txt").write_text(f"from {path}\n" + "".join(request_line(e) + "\n" for e in events))
        (d / "audit.jsonl").write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in events))


def prune(days: float = KEEP_DAYS) -> None:
    """What DEFAULT_ROOT holds (bundles, hack/test.sh's folders of them) older than `days`,
    removed (a root elsewhere, named by the variable, is the user's to clear)."""
    import shutil

    if not DEFAULT_ROOT.is_dir():
        return
    cutoff = time.time() - days * 86400
    for d in DEFAULT_ROOT.iterdir():
        try:
            if d.is_dir() and d.stat().st_mtime < cutoff:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            continue
