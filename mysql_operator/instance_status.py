"""What the status says of each instance (status.instances[]: role, lag, a re-seed's progress)
and of the binary log archiver, and what a pass reads back from the status it published before
(the replicas it found lagging, the recorded primary's GTIDs and since when). Pure."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Collection, Iterable, Mapping, Sequence

from mysql_operator import reasons as R
from mysql_operator import topology as t
from mysql_operator.db.gtid import GtidParseError, parser_for
from mysql_operator.pods import PodView, pod_waiting
from mysql_operator.redaction import redact
from mysql_operator.summary import LAGGING, RESEEDING, ArchiverState


def archiver_state(
    name: str, deployment_status: Mapping[str, Any] | None, pod_trouble: str = ""
) -> ArchiverState:
    """Summary.binlog_archiver from the archiver Deployment's status (None: not seen, or
    deleted) and what its Pod's trouble is (archiver_pod_trouble): archiving while its Pod is
    ready (it archived from the primary lately: its readiness probe)."""
    if deployment_status is None:
        return ArchiverState(
            f"the archiver Deployment {name} does not exist yet: it is made at the operator's next apply",
            R.ARCHIVER_NOT_READY,
        )
    if (deployment_status.get("readyReplicas") or 0) >= 1:
        return ArchiverState()
    if pod_trouble:
        return ArchiverState(
            f"the archiver Pod (Deployment {name}) cannot archive: {pod_trouble}", R.ARCHIVER_FAILING
        )
    return ArchiverState(
        f"the archiver Pod (Deployment {name}) is not ready: no transaction reaches the backup storage "
        f"until it is (its log says why: kubectl logs deploy/{name} -c archiver)",
        R.ARCHIVER_NOT_READY,
    )


def archiver_pod_trouble(pod: Mapping[str, Any]) -> str:
    """Why an archiver Pod cannot run or keeps failing, in its own words: the message its last
    run ended with (the archiver's report: `{"ok": false, "message": ...}`, or its log's last
    lines), else why it waits (an image that cannot be pulled, an unschedulable Pod); "" when
    neither. Its words stay while it restarts, so the condition does not flap with its back-off."""
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        if cs.get("name") != "archiver":
            continue
        last = (cs.get("lastState") or {}).get("terminated") or (cs.get("state") or {}).get("terminated")
        if last and last.get("exitCode"):
            text = last.get("message") or ""
            try:
                said = json.loads(text)
                text = said.get("message") if isinstance(said, dict) else None
            except ValueError:
                pass
            text = " ".join(str(text or "").split())[-1024:]
            return (
                text or f"its last run ended with exit status {last['exitCode']} ({last.get('reason') or ''})"
            )
    return pod_waiting(pod)


def instance_entries(
    ordinals: Sequence[int],
    names: Mapping[int, str],
    pods: Mapping[int, PodView],
    observed: Mapping[str, t.InstanceState],
    lags: Mapping[str, int | None],
    roles: Mapping[str, str | None],
    primary: str | None,
    secrets: Iterable[str] = (),
    lagging: Collection[str] = (),
) -> list[dict[str, Any]]:
    secrets = list(secrets)
    out = []
    for o in ordinals:
        name = names[o]
        pod, obs = pods.get(o), observed.get(name)
        role = roles.get(name)
        if role is None and name in lagging:
            role = LAGGING
        elif obs is not None and obs.reseeding:
            role = RESEEDING
        elif role is None:
            role = "held-out" if obs is not None and obs.reachable and name in roles else "unknown"
        if name == primary and roles.get(name) is None and obs is not None:
            role = "primary-not-serving"
        e: dict[str, Any] = {
            "name": name,
            "role": role,
            "ready": bool(pod and pod.ready),
            "reachable": bool(obs and obs.reachable),
        }
        # unreachable: what it had when it last answered (what a failover compares with)
        executed = None if obs is None else obs.executed if obs.reachable else obs.last_executed
        if executed is not None:
            e["gtidExecuted"] = str(executed)
        lag = lags.get(name)
        if lag is not None:
            e["lagSeconds"] = int(lag)
        if obs is not None and obs.clone is not None:
            e["reseed"] = reseed_entry(obs)
        if obs is not None and obs.last_error:
            e["error"] = redact(obs.last_error, secrets)[:512]
        if pod and pod.waiting:
            e["waiting"] = redact(pod.waiting, secrets)
        out.append(e)
    return out


def _copy_bytes(i: t.InstanceState) -> tuple[int, int]:
    """(bytes copied, bytes expected). MariaDB's expected bytes are the donor's estimate, made
    before the copy: the copy also carries the redo log written while it runs, so an estimate
    passed is raised to what was copied (never more copied than expected in the status)."""
    done, total = i.clone_bytes
    return done, max(total, done) if total else total


def reseed_entry(i: t.InstanceState) -> dict[str, Any]:
    """status.instances[].reseed: the stage of the physical copy onto it and the bytes copied."""
    done, total = _copy_bytes(i)
    out: dict[str, Any] = {"phase": i.clone, "bytesCopied": done, "bytesTotal": total}
    if i.clone_error:
        out["error"] = i.clone_error[:512]
    return out


def reseed_progress(i: t.InstanceState, waiting: str = "") -> str:
    """For the Degraded condition: which instance is re-seeded, and how far it is - or why its
    Pod does not get on with it (`waiting`: pods.pod_waiting, e.g. the seed container failing)."""
    done, total = _copy_bytes(i)
    if waiting:
        return f"{i.name} re-seeding: {waiting}"
    if i.clone == t.CLONE_COPIED:
        return f"{i.name} re-seeded: restarting on the copied data"
    mb = 1024 * 1024
    return (
        f"{i.name} re-seeding: {done // mb} of {total // mb} MiB copied" if total else f"{i.name} re-seeding"
    )


def were_lagging(status: Mapping[str, Any]) -> frozenset[str]:
    """The replicas the last published status showed out of -ro for their lag."""
    return frozenset(e.get("name", "") for e in status.get("instances") or [] if e.get("role") == LAGGING)


def recorded_executed(status: Mapping[str, Any], flavor: str) -> dict[str, Any]:
    """status.instances[].gtidExecuted by instance name, parsed (`flavor`'s GTIDs); an entry that
    does not parse is left out."""
    parse = parser_for(flavor)
    out: dict[str, Any] = {}
    for e in status.get("instances") or []:
        if not isinstance(e, Mapping) or not isinstance(e.get("name"), str):
            continue
        raw = e.get("gtidExecuted")
        if isinstance(raw, str):
            try:
                out[e["name"]] = parse(raw)
            except GtidParseError:
                continue
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
