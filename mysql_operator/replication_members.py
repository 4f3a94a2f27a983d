"""The replication engine's members: what it is made with (credentials, settings, TLS, the hooks
its caller sets), one connection per member, and every member observed at once.

`EngineMembers` is the bottom of the engine's chain of classes (replication.py lists them): it
holds what the others share - the members and their connections (`instances`), the `Observer`
that remembers them between passes, and the state of the primary's duties, the re-seeds and the
binary-log upkeep - and `observe`, the first stage of every pass.
"""

from __future__ import annotations

import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Sequence

from mysql_operator.manifests.config import FALLBACK_TIMEOUT_MS, NO_FALLBACK_TIMEOUT_MS
from mysql_operator import topology as t
from mysql_operator.binlog_upkeep import BinlogUpkeep
from mysql_operator.duties import Accounts, Events
from mysql_operator.observer import Observer
from mysql_operator.reseed import Reseeds
from mysql_operator.members import Credentials, Member
from mysql_operator.db.observation import Observation, identity_mismatch
from mysql_operator.db.instance import Instance
from mysql_operator.db_ops import DbOps


class EngineMembers:
    def __init__(
        self,
        members: Sequence[Member],
        admin: Credentials,
        replication: Credentials,
        settings: t.Settings,
        app: Credentials | None = None,
        app_database: str | None = None,
        semisync_acks: int | None = None,
        apply_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        connect_timeout: float = 1.0,
        read_timeout: float = 2.0,
        wall_clock: Callable[[], float] = time.time,
        backup: Credentials | None = None,
        monitor: Credentials | None = None,
        binlog: Credentials | None = None,
        reduce_admin: bool = False,
        tls_ca_path: str | None = None,
        tls: ssl.SSLContext | None = None,
        connect: Callable[[Member], DbOps] | None = None,
    ):
        if settings.replication_tls and tls_ca_path is None:
            # rule 10 would reconfigure replicas for TLS on every pass without ever getting it
            raise ValueError("settings.replication_tls needs tls_ca_path")
        self.tls_ca_path, self.tls = tls_ca_path, tls
        self.admin, self.replication, self.app, self.backup = admin, replication, app, backup
        self.monitor = monitor  # the metrics sidecar's account (@localhost)
        self.binlog = binlog  # the binary-log archiver's account (spec.backup.binlogs)
        # `admin` is the operator's own account (not a person's): reduce it to its list
        self.reduce_admin = reduce_admin
        self.app_database = app_database
        self.settings = settings
        self.semisync_acks = t.semisync_acks(settings.instances, semisync_acks)
        self.apply_timeout = apply_timeout
        self.clock = clock
        self.wall_clock = wall_clock
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self.members: dict[str, Member] = {}
        self.connect = connect or self._instance
        self.instances: dict[str, DbOps] = {}
        self.observer = Observer()  # what is remembered of each member between passes
        # what a serving primary does beyond replication, once per primary (duties.py)
        self.primary_accounts = Accounts()
        self.primary_events = Events()
        self.reseeds = Reseeds()  # copies under way and their hooks (reseed.py)
        # restart_instance(instance) restarts a server that takes logins but answers no query, and
        # an old primary that may still serve its clients when a failover replaces it
        # (its Pod deleted); never the primary, at most once per STUCK_RETRY_SECONDS
        self.restart_instance: Callable[[str], None] | None = None
        # stop_instance(instance): an old primary a failover cannot reach, restarted (its Pod
        # deleted) and waited for until its process is gone; True when it is (None: restart_instance)
        self.stop_instance: Callable[[str], bool] | None = None
        # promoted(instance): it has just been made writable (the read-write Service may route to
        # it now, not at the end of the pass: the repointing of the others can take seconds)
        self.promoted: Callable[[str], None] | None = None
        self._restarted_at: dict[str, float] = {}
        self.binlogs = BinlogUpkeep()  # spec.replication.binlogRetention (binlog_upkeep.py)
        self.set_members(members)

    # -- membership ------------------------------------------------------------------------------

    @property
    def semisync_timeout_ms(self) -> int:
        """How long a commit waits for its acknowledgements: for ever, unless the user allowed
        the fallback to asynchronous replication (spec.replication.allowAsyncFallback)."""
        return FALLBACK_TIMEOUT_MS if self.settings.async_fallback else NO_FALLBACK_TIMEOUT_MS

    def set_members(self, members: Sequence[Member]) -> None:
        """Scale: the members now present (new ones are observed and configured next time)."""
        new = {m.name: m for m in members}
        for name in list(self.instances):
            if name not in new or new[name] != self.members.get(name):
                self.instances.pop(name).close()
        for m in members:
            if m.name not in self.instances:
                self.instances[m.name] = self.connect(m)
        self.members = new

    def _instance(self, m: Member) -> Instance:
        return Instance(
            m.host,
            m.port,
            self.admin.user,
            self.admin.password,
            name=m.name,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            connect_attempts=2,
            tls=self.tls,
            tls_name=m.source_host,
        )

    def close(self) -> None:
        for i in self.instances.values():
            i.close()

    # -- observe ---------------------------------------------------------------------------------
    def down_for(self, name: str) -> float | None:
        """Seconds `name` has been (or recently was) unreachable (observer.Observer.down_for)."""
        return self.observer.down_for(name, self.clock())

    def observe(self, only: Iterable[str] | None = None) -> list[t.InstanceState]:
        """Every member's state, or only those of `only`."""
        wanted = set(self.members if only is None else only)
        names = sorted(wanted & set(self.members), key=lambda n: self.members[n].ordinal)
        started = self.clock()
        with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
            observations = dict(zip(names, pool.map(lambda n: self.instances[n].observe(), names)))
        for name in names:
            m = self.members[name]
            why = identity_mismatch(observations[name], m.server_id, m.hostname)
            if why:  # a stale address (deleted Pod, reused IP) reaching another server
                self.instances[name].close()
                observations[name] = Observation(
                    reachable=False, error=f"{name} at {m.host}:{m.port} {why}: not this instance"
                )
        now, wall = self.clock(), self.wall_clock()
        clones = {n: self.reseeds.stage(n, o, self.members[n].host, wall) for n, o in observations.items()}
        return self.observer.states(self.members, observations, clones, started, now, wall)
