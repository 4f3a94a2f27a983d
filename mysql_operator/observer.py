"""What the engine remembers of each member between passes, and the states a pass decides on.

    states = observer.states(members, observations, clones, started, now, wall)

From one round of observations (db/observation.Observation, one per member) and what earlier
rounds left here, `states` builds the `topology.InstanceState`s `rules.decide` reads: how long
a member has been unreachable or in a replication error (measured from when an observation
first saw it begin, never from an older success: an idle loop must not turn a blip into a
failover), whether a primary restarted since it was seen serving, whether a replica heard from
its source since the last round, its executed GTIDs when it no longer answers. No I/O: the
engine observes, this remembers and reads.
"""

from __future__ import annotations

from typing import Any, Mapping

from mysql_operator import topology as t
from mysql_operator.db.observation import CloneStatus, Observation
from mysql_operator.members import Member
from mysql_operator.server_facts import refused


def stuck(o: Observation) -> bool:
    """The server took the login but a statement timed out: alive, yet stuck (a server that is
    down refuses or never completes the connection: "cannot connect")."""
    return not o.reachable and " failed: (2013" in (o.error or "") and "cannot connect" not in (o.error or "")


def down_evidence(o: Observation, m: Member, answered_in: Mapping[str, str | None]) -> str:
    """Why an unreachable member's server does not run, or "" when nothing shows it (it may be
    serving others). Only about the Pod it was last seen answering in (`answered_in`: member ->
    Pod uid): a Pod recreated since (a force delete) may leave the old server running on the
    node, at an address no one looks at. The evidence: its server refused the connection
    (nothing listens at the address), or its Pod says so (Member.pod_down), or that Pod was
    deleted after the kubelet saw its server end (Member.ended_before: the Pod that replaced it,
    if any, has not answered yet; its server starts read-only)."""
    if o.reachable or m.name not in answered_in:
        return ""
    if answered_in[m.name] != m.uid:
        ended = m.ended_before
        if ended is not None and ended[0] == answered_in[m.name]:
            return f"{ended[1]} and was deleted (its server ended)"
        return ""
    if refused(o.error or ""):
        return "its server refused the connection (nothing listens on its port)"
    return m.pod_down


class Observer:
    RECENT_OUTAGE_SECONDS = 60.0  # an outage that ended this recently still times a failover
    # a server's start time estimated from Uptime (whole seconds, read a moment before `now`)
    # moves by more than this when it restarted
    RESTART_TOLERANCE = 1.5
    # a replica whose received heartbeats or transactions changed this recently still hears its
    # source: 2.5 heartbeat periods (db/dialect.py: 1 s), so a pass that comes sooner than the
    # next heartbeat, or a heartbeat late on a busy machine, is not taken for silence
    HEARD_SECONDS = 2.5

    def __init__(self) -> None:
        # (name, wall-clock time it was made primary), from the cluster status: it outlives the
        # operator process, so a primary that restarted since is known as such after a restart
        self.primary_since: tuple[str, float] | None = None
        # per member, its executed GTIDs as the cluster status recorded them: what it had when
        # the operator last saw it answer, for a member not seen answering here (the status
        # outlives the operator process: a failover after a restart still knows it)
        self.recorded_executed: Mapping[str, Any] = {}
        # start of the first failed observation in the current streak, per member
        self.down_since: dict[str, float] = {}
        # per member, (start, end) of its last outage that ended
        self.recovered: dict[str, tuple[float, float]] = {}
        # first observation of the current replication error streak, per member: (errnos, since)
        self.error_since: dict[str, tuple[tuple[int, int], float]] = {}
        # per replica, what it had received from its source when last observed (heartbeats,
        # GTIDs), and the start of the round that saw it change (None: not seen changing): a
        # change says the source is alive as the replica sees it
        self.received_mark: dict[str, tuple[tuple[int | None, str], float | None]] = {}
        # when each member's server started (clock - Uptime), seen while it served as a writable
        # primary: a later, different start means that primary restarted (crash, kill, new Pod)
        self.booted_serving: dict[str, float] = {}
        self.last_observations: dict[str, Observation] = {}
        self.last_error: dict[str, str] = {}  # per member, why its last observation failed
        self.stuck_since: dict[str, float] = {}  # per member: first observation of it stuck
        # per member, the uid of the Pod it last answered in (None: a member without a Pod)
        self.answered_in: dict[str, str | None] = {}
        # per unreachable member, what shows its server does not run (down_evidence), if anything
        self.evidence: dict[str, str] = {}

    def down_for(self, name: str, now: float) -> float | None:
        """Seconds since `name` first failed to answer in its current outage, or in its last one
        when that ended within RECENT_OUTAGE_SECONDS (a primary that restarted answers again by
        the time it is replaced); None otherwise."""
        since = self.down_since.get(name)
        if since is None:
            last = self.recovered.get(name)
            if last is None or now - last[1] > self.RECENT_OUTAGE_SECONDS:
                return None
            since = last[0]
        return now - since

    def unreachable(self, name: str, error: str, now: float) -> None:
        """`name` stopped answering between two rounds (seen by a check of its own)."""
        self.down_since.setdefault(name, now)
        self.last_error[name] = error

    def states(
        self,
        members: Mapping[str, Member],
        observations: Mapping[str, Observation],
        clones: Mapping[str, CloneStatus | None],
        started: float,
        now: float,
        wall: float,
    ) -> list[t.InstanceState]:
        """The state of each observed member (in the order of `observations`), remembered for
        the next round. `started`: when the round began; `clones`: each member's copy
        (reseed.Reseeds.stage)."""
        by_address = {(h, m.port): m.name for m in members.values() for h in (m.host, m.source_host) if h}
        states = []
        for name, o in observations.items():
            m = members[name]
            if stuck(o):
                self.stuck_since.setdefault(name, started)
            else:
                self.stuck_since.pop(name, None)
            if o.error:
                self.last_error[name] = o.error
            if o.reachable:
                since = self.down_since.pop(name, None)
                if since is not None:
                    self.recovered[name] = (since, started)
                self.last_observations[name] = o
                self.answered_in[name] = m.uid
            else:
                self.down_since.setdefault(name, started)
            restarted = self.restarted(name, o, now, wall)
            heard = self.heard(name, o, started)
            clone = clones.get(name)
            previous = self.last_observations.get(name)
            r = o.replica
            errnos = (r.io_errno, r.sql_errno) if r else (0, 0)
            if errnos == (0, 0):
                self.error_since.pop(name, None)
            elif self.error_since.get(name, ((), 0.0))[0] != errnos:
                self.error_since[name] = (errnos, started)
            states.append(
                t.InstanceState(
                    name=name,
                    ordinal=m.ordinal,
                    reachable=o.reachable,
                    origin=o.origin if o.reachable else (previous.origin if previous else None),
                    read_only=o.read_only,
                    source=(
                        by_address.get((r.source_host, r.source_port), f"{r.source_host}:{r.source_port}")
                        if r and r.source_host
                        else None
                    ),
                    io_running=bool(r and r.io_running),
                    io_connecting=bool(r and r.io_state not in ("Yes", "No", "")),
                    sql_running=bool(r and r.sql_running),
                    io_errno=r.io_errno if r else 0,
                    sql_errno=r.sql_errno if r else 0,
                    last_error=(r.sql_error or r.io_error) if r else (o.error or ""),
                    executed=o.executed,
                    received=r.received if r else None,
                    purged=o.purged,
                    unreachable_for=0.0 if o.reachable else now - self.down_since[name],
                    # its outage began with this round (no earlier round nor check of its own saw it)
                    missed_once=not o.reachable and self.down_since[name] == started,
                    down_evidence=self._evidence(name, o, m),
                    last_executed=previous.executed if previous else self.recorded_executed.get(name),
                    last_purged=previous.purged if previous else None,
                    error_for=now - self.error_since[name][1] if name in self.error_since else 0.0,
                    semisync_source=o.semisync_source_enabled,
                    semisync_replica=o.semisync_replica_enabled,
                    semisync_ack_count=o.semisync_ack_count,
                    restarted=restarted,
                    tls_verified=bool(r and r.tls_verified),
                    source_heard=heard,
                    clone=clone.stage if clone else None,
                    clone_error=clone.error if clone else "",
                    clone_bytes=(clone.copied, clone.total) if clone else (0, 0),
                )
            )
        return states

    def _evidence(self, name: str, o: Observation, m: Member) -> str:
        self.evidence[name] = down_evidence(o, m, self.answered_in)
        return self.evidence[name]

    def heard(self, name: str, o: Observation, at: float) -> bool:
        """Whether replica `name`'s IO thread runs and received anything (a heartbeat,
        transactions) from its source in the HEARD_SECONDS before this round (started `at`)."""
        if not o.reachable:
            return False
        r = o.replica
        if r is None:
            self.received_mark.pop(name, None)
            return False
        mark = (o.heartbeats, str(r.received))
        before = self.received_mark.get(name)
        if before is None or before[0] != mark:  # the first sight of it compares with nothing
            self.received_mark[name] = (mark, None if before is None else at)
        changed_at = self.received_mark[name][1]
        return r.io_running and changed_at is not None and at - changed_at <= self.HEARD_SECONDS

    def restarted(self, name: str, o: Observation, now: float, wall: float) -> bool:
        """Whether `name` restarted since it was last seen serving as the writable primary."""
        if not o.reachable or o.uptime is None:
            return False
        booted = now - o.uptime
        if o.replica is not None:  # a replica: a restart of it matters to nobody here
            self.booted_serving.pop(name, None)
            return False
        if not o.read_only:
            self.booted_serving[name] = booted
            return False
        since = self.booted_serving.get(name)
        if since is not None and booted > since + self.RESTART_TOLERANCE:
            return True
        # not seen serving by this process (the operator restarted): compare with when it was
        # made primary; a server that booted later has restarted since it was promoted
        if self.primary_since is None or self.primary_since[0] != name:
            return False
        return wall - o.uptime > self.primary_since[1] + self.RESTART_TOLERANCE
