"""The Events a pass posts: one per step, one for its decision, and those of what changed
between its status and the one before (degraded, spec refused or accepted, archiving, waiting
Pods). Pure."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from mysql_operator import reasons as R
from mysql_operator import topology as t
from mysql_operator.members import Step
from mysql_operator.redaction import redact
from mysql_operator.summary import INVALID_SPEC


def step_reason(action: str) -> str:
    """The Event reason of a step's action: "stop_io" and "re-seed" name StopIo and ReSeed."""
    return "".join(w[:1].upper() + w[1:] for w in action.replace("_", "-").split("-"))


def events_from_steps(steps: Iterable[Step], secrets: Iterable[str] = ()) -> list[tuple[str, str, str]]:
    secrets = list(secrets)
    out = []
    for s in steps:
        message = redact(f"{s.instance}: {s.detail}" if s.detail else s.instance, secrets)
        etype = "Normal" if s.ok and not s.warn else "Warning"
        out.append((etype, step_reason(s.action) + ("" if s.ok else "Failed"), message))
    return out


def decision_event(d: t.Decision | None, secrets: Iterable[str] = ()) -> tuple[str, str, str] | None:
    """The Event announcing a decision that changes the topology (before its steps' Events)."""
    if isinstance(d, (t.Failover, t.Switchover, t.Bootstrap, t.Promote)):
        etype = "Warning" if isinstance(d, t.Failover) else "Normal"
        return etype, d.kind, redact(d.reason or d.kind, list(secrets))
    return None


def archiving_events(previous: Mapping[str, Any], status: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """A Warning when binary-log archiving stops (BinlogArchiving True -> False), not while the
    archiver starts for the first time; one when its Pod starts failing (reason ArchiverFailing:
    a tool image it cannot use, an image that cannot be pulled), once per episode."""

    def archiving(st: Mapping[str, Any]) -> Mapping[str, Any]:
        return next((c for c in st.get("conditions") or [] if c.get("type") == "BinlogArchiving"), {})

    old, new = archiving(previous), archiving(status)
    if old.get("status") == "True" and new.get("status") == "False":
        return [("Warning", R.BINLOG_ARCHIVING_STOPPED, new.get("message") or "")]
    if new.get("reason") == R.ARCHIVER_FAILING and old.get("reason") != R.ARCHIVER_FAILING:
        return [("Warning", R.ARCHIVER_FAILING, new.get("message") or "")]
    return []


def waiting_events(previous: Mapping[str, Any], status: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """A Warning when an instance's Pod gets stuck (status.instances[].waiting appears: an image
    that cannot be pulled, a volume that cannot be mounted, a crash loop), once per episode: not
    again while the kubelet's words change (ErrImagePull, then ImagePullBackOff...)."""
    before = {e.get("name"): e.get("waiting") for e in previous.get("instances") or []}
    return [
        ("Warning", R.INSTANCE_WAITING, f"{e['name']} cannot start: {e['waiting']}")
        for e in status.get("instances") or []
        if e.get("waiting") and not before.get(e.get("name"))
    ]


def _condition(status: Mapping[str, Any], ctype: str) -> Mapping[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == ctype), {})


def degraded_events(previous: Mapping[str, Any], status: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """A Warning when Degraded turns True or changes its reason/message (not on every loop); not
    for a refused spec (spec_events says that), nor for a re-seed's progress (its message counts
    the bytes copied: one Event per re-seed, the Reseed steps' Events say the rest)."""
    old, new = _condition(previous, "Degraded"), _condition(status, "Degraded")
    if new.get("status") != "True" or new.get("reason") == INVALID_SPEC:
        return []
    same = ("True", new.get("reason")) == (old.get("status"), old.get("reason"))
    if same and (new.get("reason") == R.RESEEDING or old.get("message") == new.get("message")):
        return []
    return [("Warning", new.get("reason") or "Degraded", new.get("message") or "")]


def spec_events(previous: Mapping[str, Any], status: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """A Warning InvalidSpec naming the refused field and the fix, once per refused generation
    (SpecValid False with another observedGeneration or message than before), not every pass."""
    old, new = _condition(previous, "SpecValid"), _condition(status, "SpecValid")
    if new.get("status") != "False":
        return []
    key = ("status", "observedGeneration", "message")
    if [old.get(k) for k in key] == [new.get(k) for k in key]:
        return []
    return [("Warning", INVALID_SPEC, new.get("message") or "")]
