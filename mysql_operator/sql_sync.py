"""The cluster's MySQLDatabases, MySQLUsers and MySQLGrants synced through its primary, as the
SQL account, when the pass finds one serving writes (sql_objects.py does the work)."""

from __future__ import annotations

import logging
import ssl
from typing import Mapping, Sequence


from mysql_operator import manifests as m
from mysql_operator import topology as t
from mysql_operator.api import MySQLCluster
from mysql_operator.db.instance import Instance
from mysql_operator.members import Member
from mysql_operator.sql_claims import Owned
from mysql_operator.sql_objects import SqlObjects
from mysql_operator.db.flavor import Flavor

log = logging.getLogger(__name__)


def sync_sql_objects(
    sql: SqlObjects,
    c: MySQLCluster,
    tls: ssl.SSLContext | None,
    decision: t.Decision | None,
    primary: str | None,
    members: Sequence[Member],
    passwords: Mapping[str, str],
) -> None:
    """The cluster's MySQLDatabases, MySQLUsers and MySQLGrants, through its primary as the SQL
    account, once nothing else is going on (sql_objects.py)."""
    member = next((mb for mb in members if mb.name == primary), None)
    password = passwords.get(m.SQL_PASSWORD_KEY)
    connect = None
    if decision is None:
        unavailable = f"cluster {c.name} has no server running yet: applied once it has a primary"
    elif not isinstance(decision, t.STEADY) or member is None or member.host is None:
        unavailable = f"cluster {c.name} has no primary serving writes ({decision.kind}): applied once it has"
    elif not password:
        unavailable = f"the credentials Secret of cluster {c.name} has no {m.SQL_PASSWORD_KEY}: add it (docs/upgrades.md)"
    else:
        unavailable = ""
        host, port = member.host, member.port

        def connect() -> Instance:
            return Instance(
                host,
                port,
                m.SQL_USER,
                password,
                name=f"{member.name} ({m.SQL_USER})",
                tls=tls,
                tls_name=member.source_host,
                read_timeout=10,
            )

    try:
        db = c.spec.database
        owned = Owned(c.name, db.name if db else None, db.user if db else None)
        sql.sync(c.namespace, c.name, connect, Flavor(c.spec.flavor), unavailable, owned)
    except Exception:  # noqa: BLE001 - never the cluster's pass: retried at the next sync
        log.exception("%s/%s: SQL objects", c.namespace, c.name)
