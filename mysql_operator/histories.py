"""What the instances' histories say about each other: who is ahead, who holds what another
lacks (errant, diverged), what may have been acknowledged, who needs a copy of the data, who
can give one. Pure predicates over `topology.InstanceState`s; rules.py decides with them.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from mysql_operator.db.gtid import errant as gtid_errant
from mysql_operator.topology import (
    InstanceState,
    Settings,
)


def union(sets: Iterable[Any]) -> Any:
    out = None
    for s in sets:
        if s is None:
            continue
        out = s if out is None else out.union(s)
    return out


def replication_broken(i: InstanceState, settings: Settings) -> str | None:
    """Why `i` can never catch up by restarting replication (history diverged), or None."""
    for errno, thread in ((i.io_errno, "IO"), (i.sql_errno, "SQL")):
        if errno in settings.divergence_errnos:
            return f"{i.name}: replication {thread} error {errno}: {i.last_error}".rstrip(": ")
    return None


def errant_against_primary(i: InstanceState, primary: InstanceState, settings: Settings) -> str | None:
    """Why replica `i` must be held out while `primary` serves, or None.

    GTIDs written by the primary itself are ignored: observations are not simultaneous, and a
    replica may already have applied what the primary committed after it was observed."""
    broken = replication_broken(i, settings)
    if broken:
        return broken
    if i.executed is None or primary.executed is None:
        return None
    extra = gtid_errant(i.executed, primary.executed)
    if primary.origin is not None:
        extra = extra.without_origins([primary.origin])
    if not extra.is_empty():
        return f"{i.name} has transactions the primary {primary.name} lacks: {extra}"
    return None


def source_behind(i: InstanceState, source: InstanceState | None) -> bool:
    """`i` holds everything its source has: a replication error on its source (MariaDB's 1236,
    "the GTID is not in the master's binlog") then says the source lost a tail it had sent - a
    semi-sync primary truncates at restart what it sent but never committed - not that `i`
    diverged."""
    return (
        source is not None
        and i.source == source.name
        and not i.sql_errno
        and i.known is not None
        and source.known is not None
        and i.known.contains(source.known)
    )


def errant_among_peers(
    i: InstanceState, peers: Sequence[InstanceState], settings: Settings, source: InstanceState | None = None
) -> str | None:
    """With no primary to compare to: `i` is errant if it wrote transactions itself that no peer
    has (a local write on a replica), or its replication broke on divergence (unless its
    `source` is merely behind it: `source_behind`). A peer that does not answer counts with what
    it had when it last answered: the old primary had what `i` wrote as an earlier primary."""
    broken = replication_broken(i, settings)
    if broken and not source_behind(i, source):
        return broken
    if i.executed is None or i.origin is None:
        return None
    others = union(p.known if p.reachable else p.last_executed for p in peers if p.name != i.name)
    own_only = i.executed.subtract(others) if others is not None else i.executed
    own_only = own_only.subtract(own_only.without_origins([i.origin]))  # keep only its own origin
    if not own_only.is_empty():
        return f"{i.name} wrote transactions no other instance has: {own_only}"
    return None


def held(i: InstanceState) -> Any:
    """What `i` holds: its known set when it answers, else what it had when it last answered."""
    return i.known if i.reachable else i.last_executed


def may_be_acknowledged(i: InstanceState, peers: Sequence[InstanceState]) -> Any:
    """What `i` holds (or held when it last answered) that may have been acknowledged to a
    client: everything but what it wrote itself that no peer has (errant: a local write, or a
    commit of a primary that nobody received). A replica acknowledged what it received; a
    former primary's own writes were acknowledged on a replica's word, and that replica (a
    peer, maybe the lost primary with its last answer) has them too. None: nothing known."""
    mine = held(i)
    if mine is None or i.origin is None:
        return mine
    others = union(held(q) for q in peers if q.name != i.name)
    theirs = mine.without_origins([i.origin])
    own = mine.subtract(theirs)
    return theirs if others is None else theirs.union(own.intersect(others))


def replica_needs_configuring(i: InstanceState, source: str, settings: Settings) -> str | None:
    """Why replica `i` must be (re)pointed at `source`, or None when it is on its way.

    An IO thread that is connected or still connecting to the right source, with a running SQL
    thread and no error, is left alone: repointing it restarts the connection and would turn a
    slow connect into churn. An error counts only once it has persisted for the grace period."""
    if not i.is_replica:
        return "not a replica"
    if i.source != source:
        return f"replicates from {i.source}"
    if i.io_errno or i.sql_errno:
        if i.error_for < settings.replica_error_grace_seconds:
            return None
        return f"replication error for {i.error_for:.0f}s: {i.last_error}".rstrip(": ")
    if not (i.io_running or i.io_connecting) or not i.sql_running:
        return "replication stopped"
    return None


def most_advanced(cands: Sequence[InstanceState], prefer: str | None = None) -> InstanceState | None:
    """The candidate whose known set contains every other candidate's, preferring `prefer`,
    then the lowest ordinal; None if none contains all (histories diverged)."""

    def covers_all(c: InstanceState) -> bool:
        return all(c.known.contains(o.known) for o in cands if o.name != c.name and o.known is not None)

    ok = [c for c in cands if c.known is not None and covers_all(c)]
    if not ok:
        return None
    ok.sort(key=lambda c: (c.name != prefer, c.ordinal))
    return ok[0]


def by_name(instances: Sequence[InstanceState]) -> dict[str, InstanceState]:
    return {i.name: i for i in instances}


def names(xs: Iterable[InstanceState]) -> tuple[str, ...]:
    return tuple(x.name for x in sorted(xs, key=lambda i: i.ordinal))


def needs_seed(i: InstanceState, primary: InstanceState) -> bool:
    """`i` lacks transactions the primary no longer has in its binary logs: replication alone
    can never bring it up to date."""
    return bool(
        primary.purged is not None and i.executed is not None and not i.executed.contains(primary.purged)
    )


def newer_than(i: InstanceState, primary: InstanceState) -> str:
    """Why `i`'s data cannot hold what was acknowledged on `primary` before it became
    unreachable (its data directory is newer: a lost volume initialised again), or "": it lacks
    the transactions the primary had already purged from its binary logs, or it holds none at all
    while the primary had some. Promoting it would discard the cluster's data."""
    had, purged = primary.last_executed, primary.last_purged
    known = i.known
    if had is not None and not had.is_empty() and (known is None or known.is_empty()):
        return f"{i.name} holds no transaction (new data) while {primary.name} had {had}"
    if purged is not None and not purged.is_empty() and known is not None and not known.contains(purged):
        return (
            f"{i.name} lacks transactions {primary.name} had already purged from its binary logs "
            f"({purged}): its data is newer than the cluster's"
        )
    return ""


def only_behind(i: InstanceState, primary: InstanceState) -> bool:
    """`i` lacks transactions the primary purged and has none the primary lacks: its replication
    error (the source purged what it needs) is no divergence, and a copy discards nothing."""
    if not needs_seed(i, primary) or primary.executed is None:
        return False
    return bool(gtid_errant(i.executed, primary.executed).is_empty())


def choose_donor(
    primary: InstanceState, replicas: Sequence[InstanceState], settings: Settings, exclude: str
) -> str:
    """Where a re-seed copies from: the most advanced replica of the primary that replicates
    without error (the copy loads it, not the primary), else the primary."""
    cands = [
        i
        for i in replicas
        if i.name != exclude
        and i.ordinal < settings.instances
        and i.source == primary.name
        and i.io_running
        and i.sql_running
        and not (i.io_errno or i.sql_errno)
        and not needs_seed(i, primary)
    ]
    best = most_advanced(cands)
    return best.name if best is not None else primary.name


def switchover_blocker(
    instances: Sequence[InstanceState], settings: Settings, current_primary: str | None, desired: str
) -> str:
    """Why `desired` cannot take over from the serving recorded primary now ("" when it can): it
    is no instance among `settings.instances`, does not answer, is being re-seeded, or is held
    out (errant against the primary). Rule 5's test; the reconciler says it of a waiting request."""
    named = by_name(instances)
    d = named.get(desired)
    if d is None or d.ordinal >= settings.instances:
        return f"{desired} is not among the {settings.instances} instances"
    if not d.reachable:
        return f"{d.name} is unreachable"
    if d.reseeding:
        return f"{d.name} is being re-seeded"
    p = named.get(current_primary or "")
    if p is not None and p.name != d.name and p.reachable and not p.read_only and not p.is_replica:
        diverged = errant_against_primary(d, p, settings)  # only against a primary that serves
        if diverged and not only_behind(d, p):
            return f"held out: {diverged}"
    return ""
