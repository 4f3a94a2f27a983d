"""What acting on a replication decision reads of its servers beyond their observation, read once
before the decision is recorded or acted on (replication.ReplicationEngine.survey): the scheduled
events of the primary that serves (and of the servers a carry-over of its events is being checked
on), the binary logs of the servers whose retention check is due. The effects then read these
instead of the servers (duties.Events, binlog_upkeep.BinlogUpkeep), through `Surveyed`, which
also keeps what they change of them: an event enabled reads as ENABLED afterwards, purged files
are gone from the list. A server the survey did not read is read when asked (a caller that did
not survey: the tests of single actions)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from mysql_operator.binlogs import BinlogFile, PurgeBefore, PurgeTo
from mysql_operator.db.observation import Event, InstanceError
from mysql_operator.members import Credentials

T = TypeVar("T")


def attempt(read: Callable[[], T]) -> T | InstanceError:
    """Effect (a read): its answer, or the InstanceError it raised (raised again when used)."""
    try:
        return read()
    except InstanceError as e:
        return e


@dataclass
class Survey:
    now: float = 0.0  # the engine's clock when it was read (the binary logs' checks are due then)
    events: dict[str, list[Event] | InstanceError] = field(default_factory=dict)
    binlogs: dict[str, list[BinlogFile] | InstanceError] = field(default_factory=dict)

    def ops(self, name: str, server: Any) -> Any:
        """`server` (DbOps) with what the survey read of it answered from the survey."""
        if name not in self.events and name not in self.binlogs:
            return server
        return Surveyed(server, self, name)


class Surveyed:
    """A server's events and binary logs as the survey read them (what the effects on it change
    kept up to date); everything else goes to the server."""

    def __init__(self, server: Any, survey: Survey, name: str) -> None:
        self._server, self._survey, self._name = server, survey, name

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._server, attr)

    @staticmethod
    def _known(found: list[T] | InstanceError | None, read: Callable[[], list[T]]) -> list[T]:
        if found is None:
            return read()
        if isinstance(found, InstanceError):
            raise found
        return list(found)

    def events(self) -> list[Event]:
        return self._known(self._survey.events.get(self._name), self._server.events)

    def enable_event(self, event: Event, as_user: Credentials | None) -> None:
        self._server.enable_event(event, as_user)
        found = self._survey.events.get(self._name)
        if isinstance(found, list):
            self._survey.events[self._name] = [
                dataclasses.replace(e, status="ENABLED") if e.key == event.key else e for e in found
            ]

    def binary_logs(self) -> list[BinlogFile]:
        return self._known(self._survey.binlogs.get(self._name), self._server.binary_logs)

    def purge_binary_logs(self, plan: PurgeBefore | PurgeTo) -> list[str]:
        gone = self._server.purge_binary_logs(plan)
        found = self._survey.binlogs.get(self._name)
        if isinstance(found, list):
            self._survey.binlogs[self._name] = [f for f in found if f.name not in gone]
        return gone
