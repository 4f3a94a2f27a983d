"""The cluster's ReplicationEngine, kept across passes in its ClusterEntry and built again
(engine_config.build_engine) only when what it was built from changes."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Callable, Mapping, Sequence


from mysql_operator import topology as t
from mysql_operator.api import MySQLCluster
from mysql_operator.pass_state import ClusterEntry
from mysql_operator.db_ops import DbOps
from mysql_operator.members import Member
from mysql_operator.replication import ReplicationEngine
from mysql_operator.engine_config import binlog_retention, build_engine


def engine_for(
    entry: ClusterEntry,
    c: MySQLCluster,
    passwords: Mapping[str, str],
    settings: t.Settings,
    members: Sequence[Member],
    apply_timeout: float,
    connect: Callable[[Member], DbOps] | None = None,
) -> ReplicationEngine:
    """The cluster's engine, kept across passes (it measures outages and remembers its members):
    built again when what it was built from changes (settings, credentials, the CA)."""
    app_user = c.spec.database.user if c.spec.database else None
    ca_pem = entry.tls.state.ca_pem if entry.tls.state is not None else None
    fp = hashlib.sha256(
        repr(
            (
                dataclasses.replace(settings, force_failover=False),
                c.spec.replication.semi_sync_acks,
                sorted(passwords.items()),
                app_user,
                c.spec.database,
                ca_pem,
            )
        ).encode()
    ).hexdigest()
    if entry.engine is None or entry.fingerprint != fp:
        if entry.engine is not None:
            entry.engine.close()
        entry.engine = build_engine(
            c,
            members,
            passwords,
            settings,
            apply_timeout=apply_timeout,
            tls=entry.tls.context(),
            connect=connect,
        )
        entry.fingerprint = fp
    else:
        entry.engine.set_members(members)
        entry.engine.settings = settings  # the fingerprint leaves out a force-failover request
    entry.engine.binlogs.retention = binlog_retention(c)
    return entry.engine
