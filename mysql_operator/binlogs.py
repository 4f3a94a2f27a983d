"""Binary log lifecycle: which of an instance's binary logs may go. Pure.

The servers never purge by themselves (binlog_expire_logs_seconds = 0): they would purge a file a
stopped or lagging replica still needs, and that replica could then only be rebuilt by a copy.
The operator purges instead, one instance at a time, from what it observed:

  * `files`: the instance's binary logs, oldest first, each with the GTIDs written BEFORE it
    (its Previous_gtids / Gtid_list header event) - the last one is the file being written;
  * `others`: what every other instance holds (executed GTIDs; for one that does not answer, what
    it held when it last did - it cannot have gained anything since; None: never seen).

Any other instance may replicate from this one (after a failover it may be the primary), so a file
is needed while another instance lacks a GTID written in it or after it. The plan:

  * retention (spec.replication.binlogRetention.hours): files older than that go, by the server's
    own `PURGE BINARY LOGS BEFORE` (it knows the files' times) - but only while no other instance
    needs anything but the file being written; otherwise they wait (the size cap still holds);
  * size cap (spec.replication.binlogRetention.maxSize): while the files together are larger, the
    oldest go (never the file being written), even if another instance needs them; those
    instances are named - they can then only be re-seeded, and the operator says so.

An instance that lacks what this one purged already cannot be served by it whatever happens here,
and does not hold anything back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class BinlogFile:
    name: str
    size: int
    previous: Any  # GtidSet: every GTID written before this file (None: header not read)


@dataclass(frozen=True)
class Retention:
    seconds: int  # 0: no time limit (only the size cap)
    max_bytes: int  # 0: no size cap


@dataclass(frozen=True)
class PurgeBefore:
    """PURGE BINARY LOGS BEFORE NOW() - INTERVAL `seconds` SECOND."""

    seconds: int


@dataclass(frozen=True)
class PurgeTo:
    """PURGE BINARY LOGS TO `file` (every file before it goes) to stay under the size cap;
    `starves`: instances that needed a file that goes (they can only be re-seeded now)."""

    file: str
    total_bytes: int
    starves: tuple[str, ...] = ()


PurgePlan = PurgeBefore | PurgeTo | None


def first_needed(files: Sequence[BinlogFile], holds: Any) -> int:
    """Index of the oldest file an instance holding `holds` still needs: the last file whose
    earlier GTIDs it all holds (it needs that file's own and later ones). 0 when the header of a
    file is unknown or the instance lacks even what came before the first file."""
    needed = 0
    for i, f in enumerate(files):
        if f.previous is None or not holds.contains(f.previous):
            break
        needed = i
    return needed


def plan_purge(files: Sequence[BinlogFile], others: Mapping[str, Any], retention: Retention) -> PurgePlan:
    if len(files) < 2:
        return None  # only the file being written: nothing can go
    last = len(files) - 1
    needs: dict[str, int] = {}
    first = files[0].previous
    for name, holds in others.items():
        if holds is None:
            needs[name] = 0  # never seen: keep everything for it
        elif first is not None and not holds.contains(first):
            continue  # lacks what is already purged here: these files cannot help it
        else:
            needs[name] = first_needed(files, holds)
    total = sum(f.size for f in files)
    if retention.max_bytes and total > retention.max_bytes:
        keep, kept = last, files[last].size
        while keep > 0 and kept + files[keep - 1].size <= retention.max_bytes:
            keep -= 1
            kept += files[keep].size
        if keep > 0:
            starves = tuple(sorted(n for n, i in needs.items() if i < keep))
            return PurgeTo(files[keep].name, total, starves)
    if retention.seconds and all(i == last for i in needs.values()):
        return PurgeBefore(retention.seconds)
    return None
