"""The replication engine's accounts on a serving primary: converged, its scheduled events carried
over, passwords rotated and the replicas repointed with the new one, one at a time.

`PrimaryAccounts` extends `ServerRoles` (replication_roles.py); what a primary does beyond
replication is duties.py's, called from here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from mysql_operator.duties import AccountSet, Seen
from mysql_operator.members import Credentials, Step
from mysql_operator.db.observation import ACCESS_DENIED, InstanceError
from mysql_operator.server_facts import acknowledged_now
from mysql_operator.replication_roles import ServerRoles
from mysql_operator.survey import Survey


@dataclass(frozen=True)
class Rotation:
    """What a rotation did: the accounts (user, host) whose password changed, and those whose
    ALTER USER the primary refused for a privilege the operator's account lacks."""

    done: frozenset[tuple[str, str]]
    denied: frozenset[tuple[str, str]] = frozenset()


class PrimaryAccounts(ServerRoles):
    def converge_accounts(self, primary: str, steps: list[Step]) -> None:
        """duties.Accounts on a primary that serves, as this engine's accounts are now."""
        wanted = AccountSet(
            self.admin,
            self.replication,
            self.app,
            self.app_database,
            self.backup,
            self.monitor,
            self.binlog,
            self.reduce_admin,
        )
        p, acknowledged = self.instances[primary], self._acknowledged(primary)
        self.primary_accounts.converge(primary, p, wanted, acknowledged, self.clock(), steps)

    def carry_over_events(self, primary: str, steps: list[Step], survey: Survey | None = None) -> None:
        """duties.Events: the events that ran on the former primary run on this one; the events
        of the servers `survey` read come from it (None: read when needed)."""
        survey = survey or Survey()
        self.primary_events.carry_over(
            primary,
            survey.ops(primary, self.instances[primary]),
            self._acknowledged(primary),
            self.clock(),
            self.app,
            self.admin,
            steps,
            self._events_seen(primary, survey),
        )

    def _events_seen(self, primary: str, survey: Survey | None = None) -> Seen:
        """The observation duties.Events decides on: the primary's GTIDs and the other servers'
        (None: not answering), with their events as `survey` read them."""
        seen = self.observer.last_observations
        survey = survey or Survey()

        def executed(name: str):
            o = seen.get(name)
            return o.executed if o is not None and o.reachable else None

        others = tuple(
            (name, survey.ops(name, ops), executed(name))
            for name, ops in self.instances.items()
            if name != primary
        )
        return Seen(executed(primary), others)

    def _acknowledged(self, primary: str) -> bool:
        return acknowledged_now(self.observer.last_observations.get(primary))

    def rotate(self, primary: str, accounts: Sequence[Credentials], steps: list[Step]) -> Rotation:
        """New passwords for `accounts` (user, host), set on the primary with ALTER USER (the
        statements replicate). Connections already open stay open; the engine keeps using the
        credentials it was made with until the caller makes one with the new passwords. When the
        replication account's changes, every replica of the primary is pointed at it again with
        the new password, one at a time (a replica's IO thread would otherwise fail at its next
        connect)."""
        p = self.instances[primary]
        done, denied = set(), set()
        if not acknowledged_now(self.observer.last_observations.get(primary)):
            return Rotation(frozenset())  # at a pass that sees a replica acknowledging
        for a in accounts:
            try:
                p.set_password(a.user, a.host, a.password)
                steps.append(Step(primary, "rotate", f"new password for {a.user}@{a.host}"))
            except InstanceError as e:
                if e.errno in ACCESS_DENIED:  # the caller says what to do: no retry helps
                    denied.add((a.user, a.host))
                    steps.append(Step(primary, "rotate", f"{a.user}@{a.host}: {e}", warn=True))
                else:
                    steps.append(Step(primary, "rotate", f"{a.user}@{a.host}: {e}", ok=False))
                continue
            done.add((a.user, a.host))
            if a.user == self.replication.user and a.host == self.replication.host:
                self.replication = a
                self._repoint_in_turn(primary, steps)
        return Rotation(frozenset(done), frozenset(denied))

    REPOINT_WAIT_SECONDS = 20.0

    def _repoint_in_turn(self, primary: str, steps: list[Step]) -> None:
        """Every replica of `primary` pointed at it again (the replication account's new
        password), one at a time: the next only once this one is connected again, so that the
        others go on acknowledging commits meanwhile (a reconnect resolves the source's name and
        logs in again; with every replica reconnecting at once, each commit would wait for the
        slowest). One that does not reconnect within REPOINT_WAIT_SECONDS leaves the rest as they
        are: their open connections stay valid, and one that drops later fails with the old
        password and is repointed then."""
        replicas = [
            name
            for name, obs in sorted(self.observer.last_observations.items())
            if name != primary and obs.replica is not None
        ]
        for k, name in enumerate(replicas):
            try:  # a replica failing here reconnects with the old password: the
                self._make_replica(name, primary, steps)  # error repoints it later
            except InstanceError as e:
                steps.append(Step(name, "replicate", str(e), ok=False))
                continue
            rest = replicas[k + 1 :]
            if rest and not self._reconnected(name):
                steps.append(
                    Step(
                        name,
                        "replicate",
                        f"not connected to {primary} again within {self.REPOINT_WAIT_SECONDS:.0f}s: "
                        f"{', '.join(rest)} keep their connection and are repointed when it drops",
                        warn=True,
                    )
                )
                return

    def _reconnected(self, name: str) -> bool:
        try:
            return self.instances[name].wait_connected(self.REPOINT_WAIT_SECONDS)
        except InstanceError:
            return False
