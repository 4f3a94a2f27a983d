"""Switchover requests: a person asks once for another primary; the pass carries it out or refuses
it, records which in the status, says it in an Event, and then forgets it. Pure: plain data in,
the requests and their outcome out (the Reconciler reads and writes; tests/unit/test_switchover.py).

Two sources, the annotation first:
  * the annotation ANNOTATION on the MySQLCluster, "<instance name or ordinal>[; who and why]",
    e.g. "db-1; alice: node maintenance". Until it is done or refused, status.switchover says
    it is Pending and why it waits (the annotation stays, so an operator restart resumes it); then
    the record says Done or Refused and the annotation is removed.
  * spec.primary (deprecated): a value the operator has not acted on yet (status.primaryRequest
    records the value, the generation it came with and its result) is a request like the
    annotation, once: a later failover away from it is never undone. A new value is a new
    request; a spec.primary request pending while an annotation asks is superseded (refused).

A request is Done once its target is the recorded primary (and the pass's promotion of it went
through); Refused when the target is no instance among spec.instances, is held out (errant
transactions), is being re-seeded, or has been unreachable for WAIT_SECONDS (once the cluster has
a primary: before, it waits for the bootstrap); else it waits (Pending), and the cluster is
repaired meanwhile (topology rule 5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from mysql_operator import histories
from mysql_operator import topology as t
from mysql_operator.redaction import redact
from mysql_operator.pods import pod_ordinal
from mysql_operator import reasons as R

ANNOTATION = "mysql.operator.dev/switchover-to"
WAIT_SECONDS = 300.0  # a target unreachable this long: the request is refused
PENDING, DONE, REFUSED = "Pending", "Done", "Refused"
STATUS_KEY = "switchover"  # status.switchover: the annotation's request
SPEC_STATUS_KEY = "primaryRequest"  # status.primaryRequest: spec.primary's
SPEC_SOURCE = "spec.primary"
REQUESTED_BY_LIMIT, MESSAGE_LIMIT = 256, 1024


@dataclass(frozen=True)
class Request:
    """One switchover asked for and not finished."""

    to: str  # the instance asked for (a name); as written when it names none
    requested_by: str  # who and why, as they said it ("" when they did not)
    requested_at: str  # when the operator first saw it (kept in the status while it waits)
    problem: str = ""  # why `to` is no instance to switch over to ("" when it is one)
    spec_value: int | None = None  # spec.primary's value, for a request made that way
    generation: int | None = None  # the spec's generation that asked (spec.primary)

    @property
    def from_spec(self) -> bool:
        return self.spec_value is not None

    @property
    def target(self) -> str | None:
        """The instance the engine should make primary, None when there is none."""
        return None if self.problem else self.to

    @property
    def who(self) -> str:
        return (
            f"spec.primary {self.spec_value}"
            if self.from_spec
            else self.requested_by or f"annotation {ANNOTATION}"
        )


@dataclass(frozen=True)
class Verdict:
    result: str  # PENDING | DONE | REFUSED
    message: str
    already: bool = False  # done without a move: the target was the primary when the pass began


@dataclass(frozen=True)
class Settled:
    """What a pass writes for the requests: status fields (None removes one), Events, and whether
    the annotation goes (its request finished)."""

    fields: dict[str, Any] = field(default_factory=dict)
    events: tuple[tuple[str, str, str], ...] = ()
    remove_annotation: bool = False


def annotation_value(to: str, who: str = "", reason: str = "") -> str:
    """The annotation's value for a request to `to` by `who` for `reason` (the CLI's)."""
    said = ": ".join(x for x in (who.strip(), reason.strip()) if x)
    return f"{to.strip()}; {said}" if said else to.strip()


def parse_value(value: str, cluster: str) -> tuple[str, str, int | None]:
    """(instance name, who and why, ordinal) of an annotation value "<name or ordinal>[; who and
    why]"; the ordinal is None (and the name as written) when it names no instance of `cluster`.
    Who and why is cut at REQUESTED_BY_LIMIT characters."""
    target, _, by = str(value).partition(";")
    target, by = target.strip()[:253], by.strip()[:REQUESTED_BY_LIMIT]
    ordinal = None
    if target.isascii():  # (int() takes digits str.isdigit() does not know)
        ordinal = int(target) if target.isdigit() else pod_ordinal(target, cluster)
    return (target if ordinal is None else f"{cluster}-{ordinal}"), by, ordinal


def pending(
    annotations: Mapping[str, Any],
    cluster: str,
    instances: int,
    spec_primary: int | None,
    generation: int | None,
    status: Mapping[str, Any],
    now: str,
) -> list[Request]:
    """The requests not finished yet, the one the pass acts on first: the annotation's, then a
    spec.primary value not acted on yet."""
    out = []
    value = annotations.get(ANNOTATION)
    if value is not None:
        to, by, ordinal = parse_value(str(value), cluster)
        if ordinal is None:
            problem = f"{to!r} names no instance of {cluster} (a name {cluster}-N, or an ordinal N)"
        elif ordinal >= instances:
            problem = f"{to} is not among the {instances} instances (spec.instances)"
        else:
            problem = ""
        rec = _record(status, STATUS_KEY)
        same = rec.get("result") == PENDING and (rec.get("to"), rec.get("requestedBy")) == (to, by)
        out.append(Request(to, by, (rec.get("requestedAt") or now) if same else now, problem))
    rec = _record(status, SPEC_STATUS_KEY)
    if spec_primary is not None and (rec.get("value") != spec_primary or rec.get("result") == PENDING):
        same = rec.get("value") == spec_primary
        out.append(
            Request(
                f"{cluster}-{spec_primary}",
                SPEC_SOURCE,
                (rec.get("requestedAt") or now) if same else now,
                spec_value=spec_primary,
                generation=rec.get("generation", generation) if same else generation,
            )
        )
    return out


def waiting(decision: t.Decision, desired: str | None, target: str) -> str:
    """Why a usable target is not the primary after a pass, in words that stay the same from one
    pass to the next (the status is written only when it changes)."""
    if isinstance(decision, t.Switchover) and decision.to == target:
        return f"switching over to {target}"
    if desired != target:
        return "the rolling update goes first (it moves the primary as its restarts need)"
    return f"the cluster must settle first ({decision.kind})"


def judge(
    req: Request,
    observed: Sequence[t.InstanceState],
    settings: t.Settings,
    before: str | None,
    primary: str | None,
    promoted: bool,
    why_waiting: str,
) -> Verdict:
    """The request after a pass: `before` and `primary` the recorded primary when it began and as
    it left it, `promoted` whether its promotion of `primary` (if any) went through,
    `why_waiting` what it did instead (`waiting`)."""
    if req.problem:
        return Verdict(REFUSED, req.problem)
    if primary == req.to and promoted:
        if before == req.to:
            return Verdict(DONE, f"{req.to} is the primary already", already=True)
        return Verdict(DONE, f"{req.to} is the primary")
    i = next((i for i in observed if i.name == req.to), None)
    if i is None:
        return Verdict(PENDING, f"waits for {req.to}: not observed yet")
    if i.reseeding:
        return Verdict(REFUSED, f"{i.name} is being re-seeded: ask again once it replicates")
    if not i.reachable:
        # (before the first primary, e.g. spec.primary at creation, it waits for the bootstrap)
        if primary is not None and i.unreachable_for >= WAIT_SECONDS:
            return Verdict(
                REFUSED,
                f"{i.name} has been unreachable for more than {WAIT_SECONDS:.0f} s: ask again once it "
                "answers",
            )
        return Verdict(
            PENDING, f"waits for {i.name}: unreachable (refused once it has been for {WAIT_SECONDS:.0f} s)"
        )
    blocked = histories.switchover_blocker(observed, settings, primary, req.to)
    if blocked:  # held out (errant): it would serve what the primary never had
        return Verdict(
            REFUSED,
            f"{blocked}: choose another instance, or rebuild it first (spec.replication.errantPolicy: "
            "Reseed)",
        )
    return Verdict(PENDING, f"waits: {why_waiting}")


def no_servers(req: Request) -> Verdict:
    """The request in a pass that talks to no server (none runs yet, or no credentials or CA)."""
    if req.problem:
        return Verdict(REFUSED, req.problem)
    return Verdict(PENDING, f"waits for {req.to}: no server observed yet")


def settle(
    requests: Sequence[Request],
    verdict: Verdict | None,
    status: Mapping[str, Any],
    spec_primary: int | None,
    now: str,
    secrets: Iterable[str] = (),
) -> Settled:
    """The status records, Events and annotation removal for the requests (`verdict`: the first's;
    a spec.primary request behind the annotation's is superseded). A spec.primary removed takes
    its record along (the same value set again is a new request)."""
    secrets = list(secrets)
    fields: dict[str, Any] = {}
    events = []
    if requests and verdict is not None:
        first, *rest = requests
        superseded = Verdict(REFUSED, f"superseded by the request of annotation {ANNOTATION} ({first.to})")
        for req, v in ((first, verdict), *((r, superseded) for r in rest)):
            message = redact(v.message, secrets)[:MESSAGE_LIMIT]
            rec: dict[str, Any] = (
                {"value": req.spec_value, "generation": req.generation}
                if req.from_spec
                else {"to": req.to, "requestedBy": redact(req.requested_by, secrets)}
            )
            rec.update(requestedAt=req.requested_at, result=v.result, message=message)
            if v.result != PENDING:
                rec["finishedAt"] = now
                if not (req.from_spec and v.already):  # an upgrade's spec.primary: 0 says nothing
                    events.append(_event(req, v, message, secrets))
            fields[SPEC_STATUS_KEY if req.from_spec else STATUS_KEY] = rec
    if spec_primary is None and status.get(SPEC_STATUS_KEY) is not None:
        fields[SPEC_STATUS_KEY] = None
    remove = (
        bool(requests) and verdict is not None and not requests[0].from_spec and verdict.result != PENDING
    )
    return Settled(fields, tuple(events), remove)


def finished(record: Mapping[str, Any] | None, before: Mapping[str, Any] | None, to: str, by: str) -> bool:
    """status.switchover shows the outcome of the request to `to` by `by` made after `before` was
    read (the CLI's --wait)."""
    if not record or record == before:
        return False
    return (record.get("to"), record.get("requestedBy")) == (to, by) and record.get("result") in (
        DONE,
        REFUSED,
    )


def _event(req: Request, v: Verdict, message: str, secrets: list[str]) -> tuple[str, str, str]:
    who = redact(req.who, secrets)
    if v.result == DONE:
        return "Normal", R.SWITCHOVER_DONE, f"{message}, as asked ({who})"
    return "Warning", R.SWITCHOVER_REFUSED, f"switchover to {req.to} ({who}) refused: {message}"


def _record(status: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    rec = status.get(key)
    return rec if isinstance(rec, Mapping) else {}
