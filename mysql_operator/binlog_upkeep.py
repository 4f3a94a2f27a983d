"""Binary logs purged past spec.replication.binlogRetention on the instances that answer:
binlogs.plan_purge decides (pure), `BinlogUpkeep.maintain` carries it out, each instance looked at
every `check_seconds`. The replication engine reads the binary logs of those `due` before it acts
(survey.py) and calls `maintain` at the end of a steady pass."""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

from mysql_operator import topology as t
from mysql_operator.binlogs import BinlogFile, PurgeBefore, PurgeTo, Retention, plan_purge
from mysql_operator.db.observation import InstanceError, Observation
from mysql_operator.members import Step


class BinlogOps(Protocol):
    def binary_logs(self) -> list[BinlogFile]: ...
    def purge_binary_logs(self, plan: PurgeBefore | PurgeTo) -> list[str]: ...


class BinlogUpkeep:
    def __init__(self) -> None:
        self.retention: Retention | None = None  # None: the operator purges nothing
        self.check_seconds = 300.0
        self.checked_at: dict[str, float] = {}  # per instance, when its binary logs were looked at

    def due(self, observed: Sequence[t.InstanceState], now: float) -> list[str]:
        """The instances whose binary logs `maintain` looks at `now` (each every check_seconds,
        when it answers and is not being re-seeded)."""
        if self.retention is None:
            return []
        return [
            s.name
            for s in observed
            if s.reachable
            and not s.reseeding
            and now - self.checked_at.get(s.name, float("-inf")) >= self.check_seconds
        ]

    def maintain(
        self,
        observed: Sequence[t.InstanceState],
        last_observations: Mapping[str, Observation],
        instances: Mapping[str, BinlogOps],
        now: float,
        steps: list[Step],
    ) -> None:
        """Purge binary logs past the retention on every instance that answers, never one another
        instance still needs unless the size cap forces it (binlogs.plan_purge). An instance that
        does not answer holds back what it needed when it last answered (`last_observations`)."""
        if self.retention is None:
            return
        holds: dict[str, Any] = {}
        for s in observed:
            if s.reseeding:
                continue  # its data is being replaced: it will need what its donor needed
            last = last_observations.get(s.name)
            holds[s.name] = s.executed if s.reachable else (last.executed if last else None)
        for name in self.due(observed, now):
            self.checked_at[name] = now
            others = {n: h for n, h in holds.items() if n != name}
            try:
                i = instances[name]
                plan = plan_purge(i.binary_logs(), others, self.retention)
                if plan is None:
                    continue
                gone = i.purge_binary_logs(plan)
            except InstanceError as e:
                steps.append(Step(name, "purge-binlogs", str(e), ok=False))
                continue
            if gone:
                steps.append(purged(name, plan, gone, self.retention))


def purged(name: str, plan: PurgeBefore | PurgeTo, gone: list[str], retention: Retention) -> Step:
    """The Step that says what a purge removed, and why (a warning when the size cap starved an
    instance that still needed them)."""
    what = f"{len(gone)} binary log(s) {gone[0]}..{gone[-1]}"
    if isinstance(plan, PurgeBefore):
        return Step(name, "purge-binlogs", f"{what}: older than the retention")
    starved = (
        f"; {', '.join(plan.starves)} still needed them and can now only be re-seeded" if plan.starves else ""
    )
    return Step(
        name,
        "purge-binlogs",
        f"{what}: the binary logs took {plan.total_bytes} bytes, more than "
        f"spec.replication.binlogRetention.maxSize ({retention.max_bytes}){starved}",
        warn=bool(plan.starves),
    )
