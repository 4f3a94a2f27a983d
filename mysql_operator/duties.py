"""What a serving primary does beyond replication, once per primary: the accounts converged on it
(`Accounts`, db/accounts.py's lists) and the scheduled events carried over to it (`Events`).

Each keeps which primary it has done and when to try again after a failure; the replication
engine (replication_accounts.py) calls them at a pass where that primary serves, saying whether a replica
acknowledges commits now and the time (their statements replicate: never while no replica could
acknowledge them, or the primary's own DDL would wait for ever). They reach the server through the small
interfaces below (db/instance.Instance in production).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

from mysql_operator.db import accounts
from mysql_operator.db.accounts import Grant
from mysql_operator.db.dialect import Dialect
from mysql_operator.db.observation import REPLICA_SIDE_DISABLED, SPECIFIC_ACCESS_DENIED, Event, InstanceError
from mysql_operator.members import Credentials, Step

RETRY_SECONDS = 30.0  # after a failure, a primary is tried again this much later


class AccountOps(Protocol):
    @property
    def dialect(self) -> Dialect: ...
    def ensure_database(self, name: str) -> None: ...
    def ensure_user(
        self, user: str, host: str, password: str, grants: Iterable[Grant], local: bool = False
    ) -> list[str]: ...
    def shed_privileges(self, grants: Iterable[Grant], host: str = "%") -> list[str]: ...


class EventOps(Protocol):
    def events(self) -> list[Event]: ...
    def enable_event(self, event: Event, as_user: Credentials | None) -> None: ...


@dataclass(frozen=True)
class AccountSet:
    """The accounts the operator keeps on a cluster's primary (None: not kept), and whether its
    own account (`admin`, not a person's) is reduced to its list."""

    admin: Credentials
    replication: Credentials
    app: Credentials | None = None
    app_database: str | None = None
    backup: Credentials | None = None
    monitor: Credentials | None = None
    binlog: Credentials | None = None
    reduce_admin: bool = False


class Accounts:
    """The accounts of db/accounts.py, on the primary (the statements replicate): replication,
    application (and its database), backup, monitoring and binlog accounts created or converged
    to exactly their grants, and, with `reduce_admin`, the operator's own account reduced to its
    list (`shed_privileges`: accounts made before the lists existed hold ALL PRIVILEGES). Only on a
    primary that serves (the operator's account may write on a read-only server: elsewhere it
    would make errant transactions). Once per primary and engine (new passwords make a new
    engine); after a failure, again RETRY_SECONDS later."""

    def __init__(self) -> None:
        self.done_on: str | None = None  # the primary whose accounts were converged
        self.retry_at = float("-inf")

    def converge(
        self,
        primary: str,
        p: AccountOps,
        wanted: AccountSet,
        acknowledged: bool,
        now: float,
        steps: list[Step],
    ) -> None:
        if self.done_on == primary or now < self.retry_at or not acknowledged:
            return  # not acknowledged: at a pass that sees a replica acknowledging
        try:
            v = p.dialect.version
            kept = [(wanted.replication, "replication", accounts.replication_grants(v))]
            if wanted.app and wanted.app_database:
                p.ensure_database(wanted.app_database)
                kept.append(
                    (
                        wanted.app,
                        f"application ({wanted.app_database})",
                        accounts.app_grants(v, wanted.app_database),
                    )
                )
            if wanted.backup:
                kept.append((wanted.backup, "backup", accounts.backup_grants(v)))
            if wanted.monitor:
                kept.append((wanted.monitor, "monitoring", accounts.monitor_grants(v)))
            if wanted.binlog:
                kept.append((wanted.binlog, "binlog archiving", accounts.binlog_grants(v)))
            for creds, what, grants in kept:
                changes = p.ensure_user(creds.user, creds.host, creds.password, grants)
                if changes:
                    steps.append(Step(primary, "user", f"{what} account {creds.user}: {'; '.join(changes)}"))
            admin = wanted.admin
            shed = (
                p.shed_privileges(accounts.operator_grants(v, wanted.app_database), admin.host)
                if wanted.reduce_admin
                else []
            )
            if shed:
                steps.append(
                    Step(primary, "user", f"operator account {admin.user}: revoked {', '.join(shed)}")
                )
        except InstanceError as e:
            self.retry_at = now + RETRY_SECONDS
            steps.append(Step(primary, "user", str(e), ok=False))
            return
        self.done_on = primary


class Events:
    """Scheduled events keep running across a change of primary. A server marks every event it
    gets by replication replica-side disabled (MariaDB SLAVESIDE_DISABLED, MySQL
    REPLICA_SIDE_DISABLED) - one ENABLED on its source and one the user DISABLEd alike - and a
    promoted replica keeps them so: its scheduler skips them. The status alone cannot say which
    ran: this remembers the events ENABLED on the primary at each pass where it serves, and on a
    new primary enables those of them it holds replica-side disabled; the others are left as they
    are. A plain ALTER EVENT makes whoever runs it the definer, so each is enabled as its definer:
    an event of the application account with that account's login (ALTER EVENT ... ENABLE); any
    other with the operator's, naming the definer (ALTER DEFINER = ... EVENT ... ENABLE), which
    the server allows only where a person granted the operator's account SET USER (MariaDB) /
    SET_ANY_DEFINER (MySQL) - it does not hold it: that would make it root-equivalent. Those the
    server refuses (1227) are left replica-side disabled, named in one warning per primary with
    the two ways to enable them, and not tried again there.
    The statements replicate: the replicas, the old primary too once it replicates, hold them
    replica-side disabled again. Once per primary, again RETRY_SECONDS after another failure. An
    event created or changed on the old primary after its last serving pass is not known; an
    engine that never saw a primary serve (a new operator process) knows nothing to enable, and
    names the primary's replica-side disabled events in a warning.
    A server's scheduler can undo the replicated change: it writes its in-memory copy of an event
    (status included) back to the event's row after each run, outside its queue's lock, so a run
    that starts as the change is applied leaves the event ENABLED there, and running (both
    MariaDB's and MySQL's schedulers do this). So once the statements are in the primary's GTIDs,
    every other server that has them is asked again: where one still holds an event ENABLED
    that was enabled here, the event is enabled here again (the statement replicates once more),
    at most REPAIRS times per primary."""

    def __init__(self) -> None:
        self.done_on: str | None = None  # the primary whose events were carried over
        self.retry_at = float("-inf")
        # the events ENABLED on the primary at its last serving pass (None: no primary seen)
        self.enabled: frozenset[tuple[str, str]] | None = None
        # (primary, events) the server refused to enable as their definers (warned once): left
        # alone while the others are retried there
        self.refused: tuple[str, frozenset[tuple[str, str]]] | None = None
        self.check: _Check | None = None  # the events enabled here, until every server holds them so

    def carry_over(
        self,
        primary: str,
        p: EventOps,
        acknowledged: bool,
        now: float,
        app: Credentials | None,
        admin: Credentials,
        steps: list[Step],
        seen: Seen | None = None,
    ) -> None:
        """`seen`: the primary's GTIDs and the other servers as observed at this pass (None: the
        replicas are not asked)."""
        if self.done_on == primary and self.check and seen:
            self._settle(primary, p, seen, app, steps)
        if self.done_on != primary:
            self.check = None
            if now < self.retry_at or not acknowledged:
                return  # not acknowledged: at a pass that sees a replica acknowledging
            try:
                held = [e for e in p.events() if e.status in REPLICA_SIDE_DISABLED]
            except InstanceError as e:
                self.retry_at = now + RETRY_SECONDS
                steps.append(Step(primary, "events", str(e), ok=False))
                return
            if self.enabled is None:
                if held:
                    steps.append(
                        Step(
                            primary,
                            "events",
                            f"{len(held)} event(s) replicated from a former primary do not run here: "
                            f"{', '.join(map(str, held))}; not known whether they ran there "
                            "(ALTER EVENT ... ENABLE those that should)",
                            warn=True,
                        )
                    )
            elif not self._enable(primary, p, held, app, admin, steps):
                self.retry_at = now + RETRY_SECONDS
                return
            self.done_on, self.refused = primary, None
        with contextlib.suppress(InstanceError):  # the next pass looks again
            self.enabled = frozenset(e.key for e in p.events() if e.status == "ENABLED")

    def to_ask(self, primary: str, seen: Seen) -> list[str]:
        """The other servers whose events `carry_over` asks for at this pass: those that hold the
        statements of a carry-over still being checked and have not been found settled."""
        c = self.check
        if self.done_on != primary or c is None or c.mark is None:
            return []
        return [
            name
            for name, _, executed in seen.others
            if name not in c.settled and executed is not None and executed.contains(c.mark)
        ]

    def _enable(
        self,
        primary: str,
        p: EventOps,
        held: list[Event],
        app: Credentials | None,
        admin: Credentials,
        steps: list[Step],
    ) -> bool:
        """On a new primary: enable the `held` events that ran on the old one, each as its
        definer. False when one failed other than by the server's refusal to let the operator's
        account name its definer (those are warned about once, then left alone)."""
        ran = self.enabled or frozenset()
        on, refused_before = self.refused or (None, frozenset())
        if on != primary:
            refused_before = frozenset()
        enabled: list[Event] = []
        refused: list[Event] = []
        failed: list[str] = []
        for e in held:
            if e.key not in ran or e.key in refused_before:
                continue
            try:
                _enable_as_definer(p, e, app)
                enabled.append(e)
            except InstanceError as err:
                if _definer_login(e, app) is None and err.errno == SPECIFIC_ACCESS_DENIED:
                    refused.append(e)
                else:
                    failed.append(f"{e}: {err}")
        if enabled:
            steps.append(
                Step(primary, "events", f"enabled {len(enabled)} events: {', '.join(map(str, enabled))}")
            )
        if refused:
            self.refused = (primary, refused_before | {e.key for e in refused})
            steps.append(
                Step(
                    primary,
                    "events",
                    f"{len(refused)} event(s) that ran on the former primary left replica-side "
                    f"disabled here: {', '.join(f'{e} (definer {e.definer})' for e in refused)}; the "
                    f"operator's account {admin.user}@{admin.host} may not enable an event "
                    "as another account. Enable each as its definer (ALTER EVENT ... ENABLE), or "
                    "grant the operator's account SET USER (MariaDB) / SET_ANY_DEFINER (MySQL) as "
                    "root for it to do so at the next change of primary",
                    warn=True,
                )
            )
        if enabled:
            self.check = _Check(frozenset(e.key for e in enabled))
        if failed:
            steps.append(Step(primary, "events", "; ".join(failed), ok=False))
            return False
        return True

    def _settle(
        self, primary: str, p: EventOps, seen: Seen, app: Credentials | None, steps: list[Step]
    ) -> None:
        """The servers that have the statements and still run an event enabled here: the event
        enabled here again (see the class)."""
        c = self.check
        assert c is not None
        if c.mark is None:
            c.mark = seen.executed  # observed after the statements: a server holding it has them
            return
        stray: dict[str, frozenset[tuple[str, str]]] = {}
        for name, ops, executed in seen.others:
            if name in c.settled or executed is None or not executed.contains(c.mark):
                continue
            with contextlib.suppress(InstanceError):  # the next pass asks again
                running = c.keys & {e.key for e in ops.events() if e.status == "ENABLED"}
                if running:
                    stray[name] = frozenset(running)
                else:
                    c.settled.add(name)
        if not stray:
            if c.settled >= {name for name, _, _ in seen.others}:
                self.check = None
            return
        where = ", ".join(
            f"{n} ({', '.join('.'.join(k) for k in sorted(ks))})" for n, ks in sorted(stray.items())
        )
        if c.repairs >= REPAIRS:
            self.check = None
            steps.append(
                Step(
                    primary,
                    "events",
                    f"event(s) still ENABLED on a server that replicates them: {where}, after {REPAIRS} "
                    "tries; it runs them and fails (read-only). ALTER EVENT ... ENABLE them on the primary",
                    warn=True,
                )
            )
            return
        c.repairs += 1
        c.mark = None
        keys = frozenset().union(*stray.values())
        try:
            again = [e for e in p.events() if e.key in keys and e.status == "ENABLED"]
            if not again:  # changed on the primary since (a person's ALTER EVENT): theirs now
                self.check = None
                return
            for e in again:
                _enable_as_definer(p, e, app)
        except InstanceError as err:
            steps.append(Step(primary, "events", f"enabling again for {where}: {err}", ok=False))
            return
        steps.append(
            Step(
                primary,
                "events",
                f"enabled again: {where} still ran them once the change had replicated "
                "(its scheduler wrote its own copy back)",
            )
        )


def _definer_login(e: Event, app: Credentials | None) -> Credentials | None:
    """The login of `e`'s definer the operator holds: the application account's, or None."""
    return app if app and e.definer == f"{app.user}@{app.host}" else None


def _enable_as_definer(p: EventOps, e: Event, app: Credentials | None) -> None:
    p.enable_event(e, _definer_login(e, app))


REPAIRS = 3  # times a primary enables its events again for a server whose scheduler undid it


@dataclass(frozen=True)
class Seen:
    """A pass's observation, for Events: the primary's GTIDs, and each other server's name, its
    EventOps and its GTIDs (None: it did not answer)."""

    executed: Any
    others: tuple[tuple[str, EventOps, Any], ...]


@dataclass
class _Check:
    keys: frozenset[tuple[str, str]]  # the events the carry-over enabled
    mark: Any = None  # the primary's GTIDs once they hold the statements (None: the next pass)
    settled: set[str] = field(default_factory=set)  # servers that hold none of them ENABLED
    repairs: int = 0
