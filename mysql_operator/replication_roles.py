"""The replication engine's role changes on one server: made primary, made a replica of a source,
fenced, decommissioned, semi-sync turned on or off.

`ServerRoles` extends `EngineMembers` (replication_members.py); the failover, switchover,
bootstrap and repointing above it are made of these steps."""

from __future__ import annotations

from typing import Sequence

from mysql_operator.members import Step
from mysql_operator.replication_members import EngineMembers


class ServerRoles(EngineMembers):
    # -- effects ---------------------------------------------------------------------------------
    def fence(self, names: Sequence[str], steps: list[Step]) -> None:
        for n in names:
            killed = self.instances[n].fence()
            steps.append(Step(n, "fence", f"{killed} client connections killed, read-only"))

    def _make_replica(self, name: str, source: str, steps: list[Step]) -> None:
        i, src = self.instances[name], self.members[source]
        i.set_read_only(True)
        i.set_semisync_source(False)
        i.set_semisync_replica(self.settings.semisync, restart_io=False)  # point_at restarts it
        i.point_at(
            src.replication_host,
            src.port,
            self.replication.user,
            self.replication.password,
            tls_ca=self.tls_ca_path,
        )
        self.observer.error_since.pop(name, None)  # a fresh start: an error must persist again
        steps.append(
            Step(
                name,
                "replicate",
                f"read-only replica of {source}" + (" over verified TLS" if self.tls_ca_path else ""),
            )
        )

    def _make_primary(self, name: str, replicas: int, steps: list[Step]) -> None:
        i = self.instances[name]
        if i.replica_status() is not None:
            i.reset_replica()
        i.set_semisync_replica(False)
        if self.settings.semisync and replicas > 0:
            i.set_semisync_source(
                True, self.semisync_acks, self.semisync_timeout_ms
            )  # before the first write
        else:
            i.set_semisync_source(False)
        i.set_read_only(False)
        if self.promoted is not None:
            try:
                self.promoted(name)
            except Exception as e:  # noqa: BLE001 - the Kubernetes API's: the pass's end labels it
                steps.append(Step(name, "route", f"not routed to yet: {e}", warn=True))
        steps.append(
            Step(
                name,
                "promote",
                "writable primary" + (", semi-sync" if self.settings.semisync and replicas else ""),
            )
        )

    def configure_replica(self, name: str, source: str, steps: list[Step]) -> None:
        self._make_replica(name, source, steps)

    def decommission(self, names: Sequence[str], steps: list[Step]) -> None:
        for n in names:
            i = self.instances[n]
            i.set_read_only(True)
            i.set_semisync_replica(False)
            i.reset_replica()
            steps.append(Step(n, "decommission", "replication stopped and reset; ready to remove"))

    def configure_semisync(self, on: bool, primary: str, replicas: Sequence[str], steps: list[Step]) -> None:
        p = self.instances[primary]
        if not on:
            p.set_semisync_source(False)
        for n in replicas:
            self.instances[n].set_semisync_replica(on)
        if on:
            p.set_semisync_source(True, self.semisync_acks, self.semisync_timeout_ms)
        steps.append(
            Step(
                primary,
                "semi-sync",
                ("on" if on else "off") + (f", {self.semisync_acks} ack(s)" if on else ""),
            )
        )
