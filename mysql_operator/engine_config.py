"""What the replication engine takes from a cluster's spec - its settings, its accounts and
their passwords, the binary log retention - and the engine built from them: the same for the
operator's pass (reconcile.py) and the tests that drive the engine against real servers."""

from __future__ import annotations

import ssl
from typing import Any, Callable, Mapping, Sequence

from mysql_operator import manifests as m
from mysql_operator import topology as t
from mysql_operator.api import MySQLCluster, binlog_max_bytes
from mysql_operator.binlogs import Retention
from mysql_operator.members import Credentials, Member
from mysql_operator.replication import ReplicationEngine


def engine_settings(
    c: MySQLCluster, replication_tls: bool = False, force_failover: bool = False
) -> t.Settings:
    """Pure: what the replication decisions and the engine take from the spec."""
    r = c.spec.replication
    return t.Settings(
        instances=c.spec.instances,
        failover_enabled=r.failover.enabled,
        failover_delay_seconds=float(r.failover.delay_seconds),
        semisync=r.mode == "semisync",
        async_fallback=r.allow_async_fallback,
        replication_tls=replication_tls,
        # what the primary waits for: MariaDB's semi-sync waits for one acknowledgement, always
        semisync_acks=t.semisync_acks(c.spec.instances, r.semi_sync_acks) if c.spec.flavor == "mysql" else 1,
        force_failover=force_failover,
        # a physical copy: MySQL's CLONE, MariaDB's mariadb-backup (sh/seed.sh)
        reseed=True,
        reseed_errant=r.reseed_errant,
    )


def binlog_retention(c: MySQLCluster) -> Retention:
    """Pure: spec.replication.binlogRetention as the engine purges by it."""
    return Retention(c.spec.replication.binlog_retention_seconds, binlog_max_bytes(c.spec))


def build_engine(
    c: MySQLCluster,
    members: Sequence[Member],
    passwords: Mapping[str, str],
    settings: t.Settings,
    apply_timeout: float = 30.0,
    tls: ssl.SSLContext | None = None,
    connect: Callable[[Member], Any] | None = None,
) -> ReplicationEngine:
    """The engine for a cluster, with its accounts and the semi-sync values of its spec: the
    same values manifests/config.py renders into my.cnf (tests/unit/test_replication_actions.py
    compares them)."""
    app_user = c.spec.database.user if c.spec.database else None
    app = (
        Credentials(app_user, passwords[m.APP_PASSWORD_KEY])
        if app_user and passwords.get(m.APP_PASSWORD_KEY)
        else None
    )
    backup = (
        Credentials(m.BACKUP_USER, passwords[m.BACKUP_PASSWORD_KEY])
        if passwords.get(m.BACKUP_PASSWORD_KEY)
        else None
    )
    monitor = (
        Credentials(m.MONITOR_USER, passwords[m.MONITOR_PASSWORD_KEY], "localhost")
        if passwords.get(m.MONITOR_PASSWORD_KEY)
        else None
    )
    binlog = (
        Credentials(m.BINLOG_USER, passwords[m.BINLOG_PASSWORD_KEY])
        if passwords.get(m.BINLOG_PASSWORD_KEY)
        else None
    )
    return ReplicationEngine(
        members,
        Credentials(m.OPERATOR_USER, passwords[m.OPERATOR_PASSWORD_KEY]),
        Credentials(m.REPLICATION_USER, passwords[m.REPLICATION_PASSWORD_KEY]),
        settings,
        app=app,
        app_database=c.spec.database.name if c.spec.database else None,
        semisync_acks=c.spec.replication.semi_sync_acks,
        apply_timeout=apply_timeout,
        backup=backup,
        monitor=monitor,
        binlog=binlog,
        reduce_admin=True,
        # replicas verify their source against the CA mounted in their Pod; the operator
        # verifies every server against the same CA
        tls_ca_path=m.TLS_CA if settings.replication_tls else None,
        tls=tls,
        connect=connect,
    )
