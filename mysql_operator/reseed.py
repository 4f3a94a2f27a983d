"""Re-seeding one instance: its data replaced by a copy of another's, begun, watched until the
instance answers from a server started on the copy, begun again later when a copy failed.

MySQL copies inside the recipient's server (CLONE; `clone_status` says how far it got), then
restarts on the copy (start.sh supervises it). MariaDB restarts the recipient's Pod on a request
the operator writes: its init container receives a mariadb-backup stream (sh/seed.sh) and says
how far it got on a progress port; the request is withdrawn once the instance answers again.

    stage = reseeds.stage(name, observation, host, wall)   # observing: reads, never writes
    reseeds.begin(copy_of, recipient, donor, ...)          # acting: the copy begun
    reseeds.withdraw_finished(steps)                       # acting: finished requests withdrawn

`ReplicationEngine` owns one `Reseeds` per cluster and calls it; the hooks (`keep_evidence`,
`request_seed`, `seed_done`) are the reconcile wiring's (Kubernetes) or a test's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from mysql_operator import topology as t
from mysql_operator.db import seed_progress
from mysql_operator.db.dialect import Dialect
from mysql_operator.db.flavor import Flavor
from mysql_operator.db.observation import CloneStatus, Observation
from mysql_operator.manifests.common import SEED_PROGRESS_PORT
from mysql_operator.members import Credentials, Member, Step


class ReseedError(Exception):
    """A copy that could not be begun (the decision's Event says why)."""


@dataclass
class Copy:
    """A re-seed begun here: when (wall clock), whether it is a MariaDB request to withdraw once
    done (MySQL's CLONE needs none), the donor, and the last known progress."""

    asked: float
    requested: bool
    donor: str  # the instance copied from
    last: CloneStatus = field(default_factory=lambda: CloneStatus(t.CLONE_COPYING))


class Recipient(Protocol):
    """What a re-seed does on the instance whose data is replaced (db/instance.Instance)."""

    @property
    def dialect(self) -> Dialect: ...
    def errant_events(self, gtids: str, limit: int = ...) -> list[str]: ...
    def set_read_only(self, on: bool) -> None: ...
    def start_clone(self, host: str, port: int, user: str, password: str, tls_ca: str | None) -> None: ...


class Donor(Protocol):
    def ensure_clone_plugin(self) -> None: ...
    def release_stuck_commits(self, keep_users: Sequence[str] = ()) -> int: ...


class Reseeds:
    RETRY_SECONDS = 60.0  # a copy that failed, or could not be asked for, is begun again after this

    def __init__(self) -> None:
        self.copies: dict[str, Copy] = {}  # per instance being re-seeded (both flavors)
        self.retry_at: dict[str, float] = {}  # per instance: when a copy may be begun again
        self.finished: list[str] = []  # MariaDB requests whose copy is done: to withdraw
        self.progress_port = SEED_PROGRESS_PORT  # where a MariaDB recipient tells how far it is
        # keep_evidence(instance, errant GTIDs, their binary log events) -> where they were kept;
        # called before an instance's errant transactions are discarded (an exception: nothing is)
        self.keep_evidence: Callable[[str, str, list[str]], str] | None = None
        # request_seed(instance, donor, donor's host) asks for a MariaDB copy (the request, then
        # the Pod restarted); seed_done(instance) withdraws it once the instance answers on it
        self.request_seed: Callable[[str, str, str], None] | None = None
        self.seed_done: Callable[[str], None] | None = None

    # -- observing -------------------------------------------------------------------------------
    def stage(self, name: str, o: Observation, host: str | None, wall: float) -> CloneStatus | None:
        """The copy onto `name` begun here, under way until the instance answers from a server
        started after it (a MariaDB request is then due for withdrawal: `finished`): MySQL's
        CLONE as the server reports it, then copied while the server restarts on it; a MariaDB
        copy as its recipient's progress port tells. Otherwise: what the server reports.
        Reads only (the server's observation, the progress port)."""
        copy = self.copies.get(name)
        if copy is None:
            return o.clone
        booted = wall - o.uptime if o.reachable and o.uptime is not None else None
        if booted is None or booted < copy.asked:
            if o.clone is not None:  # MySQL: the server's own account of it
                if o.clone.stage == t.CLONE_FAILED:
                    self._done(name)
                    return o.clone
                copy.last = o.clone
            elif copy.requested and not o.reachable and host:
                # MariaDB: its Pod's init container receives the copy (MySQL: the server
                # restarts on its copy, its last account of it stands)
                got = seed_progress.read(host, self.progress_port)
                if got:
                    copy.last = CloneStatus(t.CLONE_COPYING, copied=got[0], total=got[1])
            return copy.last
        self._done(name)
        return o.clone

    def _done(self, name: str) -> None:
        copy = self.copies.pop(name, None)
        if copy is not None and copy.requested:
            self.finished.append(name)

    def donor_of(self, d: t.Reseed) -> str:
        """The instance `d.name` is being copied from: the one begun here, else the decision's
        (a copy an earlier operator process began)."""
        copy = self.copies.get(d.name)
        return copy.donor if copy is not None else d.donor

    # -- acting ----------------------------------------------------------------------------------
    def withdraw_finished(self, steps: list[Step]) -> None:
        """Withdraw the requests of the MariaDB copies seen done. One that cannot be withdrawn is
        left: never carried out twice (the copy's marker in the volume names the request)."""
        finished, self.finished = self.finished, []
        for name in finished:
            if self.seed_done is None:
                continue
            try:
                self.seed_done(name)
            except Exception as e:  # noqa: BLE001 - the Kubernetes API's errors
                steps.append(Step(name, "reseed", f"its finished copy's request stays: {e}", warn=True))

    def begin(
        self,
        d: t.Reseed,
        recipient: Recipient,
        donor: Donor,
        donor_member: Member,
        clone_login: Credentials,
        tls_ca_path: str | None,
        now: float,
        wall: float,
        steps: list[Step],
        failed: str | None = None,
    ) -> None:
        """Replace `d.name`'s data by a copy of `d.donor`'s, once per RETRY_SECONDS (`failed`:
        why the last copy failed). Errant transactions are recorded (keep_evidence) before
        anything is discarded; the recipient is read-only before the copy begins."""
        if d.donor == d.name:
            raise ReseedError(f"{d.name}: no other instance to copy from")
        if now < self.retry_at.get(d.name, float("-inf")):
            return
        self.retry_at[d.name] = now + self.RETRY_SECONDS
        if failed is not None:
            steps.append(Step(d.name, "reseed", f"the last copy failed: {failed}; again", ok=False))
        kept = ""
        if d.errant:
            events = recipient.errant_events(d.errant)
            if self.keep_evidence is None:
                raise ReseedError(f"{d.name}: nowhere to keep its errant transactions; not re-seeded")
            where = self.keep_evidence(d.name, d.errant, events)
            kept = f"; its errant transactions {d.errant} are discarded, recorded in {where}"
        if donor_member.replication_host is None:
            raise ReseedError(f"{d.donor} has no address; {d.name} not re-seeded")
        recipient.set_read_only(True)
        if recipient.dialect.flavor is Flavor.MARIADB:
            if self.request_seed is None:
                raise ReseedError(f"{d.name}: no way to restart it on a copy here; not re-seeded")
            try:
                self.request_seed(d.name, d.donor, donor_member.replication_host)
            except Exception as e:  # noqa: BLE001 - the Kubernetes API's errors: retried later
                raise ReseedError(f"{d.name}: its copy could not be asked for: {e}") from None
            self.copies[d.name] = Copy(wall, requested=True, donor=d.donor)
            steps.append(
                Step(d.name, "reseed", f"restarting it on a copy of {d.donor} (mariadb-backup){kept}")
            )
            return
        donor.ensure_clone_plugin()
        recipient.start_clone(
            donor_member.replication_host,
            donor_member.port,
            clone_login.user,
            clone_login.password,
            tls_ca_path,
        )
        self.copies[d.name] = Copy(wall, requested=False, donor=d.donor)
        steps.append(Step(d.name, "reseed", f"copying the data of {d.donor}{kept}"))

    @staticmethod
    def release_stuck_commits(recipient: str, donor_name: str, donor: Donor, steps: list[Step]) -> None:
        """A copy from the primary (MySQL CLONE) waits for its commits to end, and they wait for
        an acknowledgement only the copy's recipient will give once copied: the primary ends
        those waits (Instance.release_stuck_commits)."""
        killed = donor.release_stuck_commits()
        if killed:
            steps.append(
                Step(
                    donor_name,
                    "release",
                    f"{killed} connection(s) closed: their commits waited for a semi-sync "
                    f"acknowledgement no replica can give before {recipient}'s copy of {donor_name} "
                    "ends (their clients got an error, not an acknowledgement)",
                    warn=True,
                )
            )
