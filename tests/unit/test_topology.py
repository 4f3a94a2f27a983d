"""Decisions over observed instances: one table row per situation, then property tests of the
invariants (never two writable primaries; never promote a candidate missing what another has;
never let an errant server serve; a blip shorter than the delay never fails over)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings as hsettings
from hypothesis import strategies as st

from mysql_operator.db.gtid import MariaDBGtids, MySQLGtidSet
from mysql_operator.topology import (
    Bootstrap,
    ConfigureReplica,
    ConfigureSemiSync,
    Decommission,
    Errant,
    Failover,
    FailoverHeld,
    Fence,
    Healthy,
    InstanceState,
    CLONE_COPIED,
    CLONE_COPYING,
    CLONE_FAILED,
    NeedsSeed,
    Reseed,
    Promote,
    Settings,
    Switchover,
    Unrecoverable,
    WaitForDelay,
    failover_quorum,
    planned_writable,
)
from mysql_operator.histories import errant_against_primary, may_be_acknowledged, switchover_blocker
from mysql_operator.rules import decide

G = MariaDBGtids.parse


def primary(n=0, gtids="0-1-10", **kw):
    base = dict(
        name=f"db-{n}",
        ordinal=n,
        reachable=True,
        origin=str(n + 1),
        read_only=False,
        executed=G(gtids),
        received=G(""),
    )
    base.update(kw)
    return InstanceState(**base)


def replica(n, gtids="0-1-10", received="", source="db-0", **kw):
    base = dict(
        name=f"db-{n}",
        ordinal=n,
        reachable=True,
        origin=str(n + 1),
        read_only=True,
        source=source,
        io_running=True,
        sql_running=True,
        executed=G(gtids),
        received=G(received or gtids),
    )
    base.update(kw)
    return InstanceState(**base)


def down(n, for_s=30.0, **kw):
    return InstanceState(
        name=f"db-{n}", ordinal=n, reachable=False, origin=str(n + 1), unreachable_for=for_s, **kw
    )


def fresh(n):
    return InstanceState(
        name=f"db-{n}",
        ordinal=n,
        reachable=True,
        origin=str(n + 1),
        read_only=True,
        executed=G(""),
        received=G(""),
    )


S3 = Settings(instances=3, failover_delay_seconds=5)
TLS3 = Settings(instances=3, failover_delay_seconds=5, replication_tls=True)
SEMI3 = Settings(instances=3, failover_delay_seconds=5, semisync=True)
RESEED3 = Settings(instances=3, failover_delay_seconds=5, reseed=True)

TABLE = [
    # (situation, instances, settings, recorded primary, desired, expected decision)
    (
        "fresh cluster bootstraps instance 0",
        [fresh(0), fresh(1), fresh(2)],
        S3,
        None,
        None,
        Bootstrap("db-0", ("db-1", "db-2")),
    ),
    (
        "fresh cluster honours spec.primary",
        [fresh(0), fresh(1), fresh(2)],
        S3,
        None,
        "db-2",
        Bootstrap("db-2", ("db-0", "db-1")),
    ),
    (
        "spec.primary outside the instances is not bootstrapped",
        [fresh(0), fresh(1)],
        Settings(instances=1),
        None,
        "db-1",
        Bootstrap("db-0", ()),
    ),
    ("bootstrap waits for every instance", [fresh(0), down(1, 1), fresh(2)], S3, None, None, WaitForDelay),
    (
        "no recorded primary: nobody may be writable",
        [primary(0), replica(1), replica(2)],
        S3,
        None,
        None,
        Fence(("db-0",)),
    ),
    # data but no recorded primary (created again over retained volumes): the most advanced is adopted
    (
        "retained data: the instance with every transaction becomes the primary",
        [primary(0, "0-1-7", read_only=True), replica(1, "0-1-10"), replica(2, "0-1-9")],
        S3,
        None,
        None,
        Bootstrap("db-1", ("db-0", "db-2")),
    ),
    (
        "retained data: among equals, spec.primary, else the lowest ordinal",
        [primary(0, read_only=True), replica(1), replica(2)],
        S3,
        None,
        "db-2",
        Bootstrap("db-2", ("db-0", "db-1")),
    ),
    (
        "retained data of one instance",
        [primary(0, read_only=True)],
        Settings(instances=1),
        None,
        None,
        Bootstrap("db-0", ()),
    ),
    (
        "retained data whose histories diverged needs a person",
        [primary(0, "0-1-10", read_only=True), replica(1, "0-1-8,0-3-15")],
        Settings(instances=2),
        None,
        None,
        Unrecoverable,
    ),
    (
        "retained data: a replica broken on divergence is not adopted as the primary",
        [primary(0, "0-1-10", read_only=True), replica(1, "0-1-10,0-2-3", sql_errno=1950)],
        Settings(instances=2),
        None,
        None,
        Bootstrap("db-0", ("db-1",)),
    ),
    ("all replicating: healthy", [primary(0), replica(1), replica(2)], S3, "db-0", None, Healthy("db-0")),
    (
        "lagging replica is healthy, not errant",
        [primary(0, "0-1-10"), replica(1, "0-1-7"), replica(2)],
        S3,
        "db-0",
        None,
        Healthy("db-0"),
    ),
    (
        "replica down: healthy but degraded",
        [primary(0), down(1), replica(2)],
        S3,
        "db-0",
        None,
        Healthy("db-0", ("db-1",)),
    ),
    (
        "new replica gets configured",
        [primary(0), replica(1), fresh(2)],
        S3,
        "db-0",
        None,
        ConfigureReplica("db-2", "db-0"),
    ),
    (
        "replica of the wrong source gets repointed",
        [primary(0), replica(1), replica(2, source="db-1")],
        S3,
        "db-0",
        None,
        ConfigureReplica("db-2", "db-0"),
    ),
    (
        "stopped replica restarted",
        [primary(0), replica(1, io_running=False), replica(2)],
        S3,
        "db-0",
        None,
        ConfigureReplica("db-1", "db-0"),
    ),
    (
        "IO thread still connecting to the right source: left alone (no churn)",
        [primary(0), replica(1, io_running=False, io_connecting=True), replica(2)],
        S3,
        "db-0",
        None,
        Healthy("db-0"),
    ),
    (
        "connecting with a fresh error: left alone until the error persists",
        [
            primary(0),
            replica(1, io_running=False, io_connecting=True, io_errno=2003, error_for=1.0),
            replica(2),
        ],
        S3,
        "db-0",
        None,
        Healthy("db-0"),
    ),
    (
        "replication error that persisted past the grace period: reconfigured",
        [
            primary(0),
            replica(1, io_running=False, io_connecting=True, io_errno=1045, error_for=11.0),
            replica(2),
        ],
        S3,
        "db-0",
        None,
        ConfigureReplica("db-1", "db-0"),
    ),
    (
        "connecting to the wrong source: repointed at once",
        [primary(0), replica(1, source="db-2", io_running=False, io_connecting=True), replica(2)],
        S3,
        "db-0",
        None,
        ConfigureReplica("db-1", "db-0"),
    ),
    (
        "two writable: the non-primary is fenced first",
        [primary(0), replica(1, read_only=False), replica(2)],
        S3,
        "db-0",
        None,
        Fence(("db-1",)),
    ),
    (
        "replica with a local write is held out",
        [primary(0), replica(1, "0-1-10,0-2-1"), replica(2)],
        S3,
        "db-0",
        None,
        Errant,
    ),
    (
        "replica that applied the old primary's tail is errant after failover",
        [down(0), replica(1, "0-1-10", source="db-2"), primary(2, "0-1-8,0-3-15")],
        Settings(instances=3),
        "db-2",
        None,
        Errant,
    ),
    (
        "diverged replication (1950) is errant",
        [primary(0), replica(1, sql_running=False, sql_errno=1950), replica(2)],
        S3,
        "db-0",
        None,
        Errant,
    ),
    (
        "primary down shorter than the delay: wait",
        [down(0, 2.0), replica(1), replica(2)],
        S3,
        "db-0",
        None,
        WaitForDelay,
    ),
    (
        "primary down longer than the delay: most advanced replica wins",
        [down(0, 6.0), replica(1, "0-1-8"), replica(2, "0-1-8", received="0-1-10")],
        S3,
        "db-0",
        None,
        Failover("db-0", "db-2", ("db-0", "db-1"), ("db-1",)),
    ),
    (
        "equal replicas: lowest ordinal",
        [down(0, 6.0), replica(1), replica(2)],
        S3,
        "db-0",
        None,
        Failover("db-0", "db-1", ("db-0", "db-2"), ("db-2",)),
    ),
    (
        "failover never picks a replica with a local write",
        [down(0, 6.0), replica(1, "0-1-10,0-2-1"), replica(2)],
        S3,
        "db-0",
        None,
        Failover("db-0", "db-2", ("db-0", "db-1"), ()),
    ),
    (
        "failover disabled: a person decides",
        [down(0, 60), replica(1), replica(2)],
        Settings(instances=3, failover_enabled=False),
        "db-0",
        None,
        Unrecoverable,
    ),
    # every one silent may come back by itself: held, not lost (phase Unavailable, not Failed)
    ("no replica answers", [down(0, 60), down(1, 60), down(2, 60)], S3, "db-0", None, FailoverHeld),
    (
        "interrupted failover resumes: promote the recorded primary",
        [down(0, 60), replica(1, io_running=False), replica(2, io_running=False)],
        S3,
        "db-1",
        None,
        Promote("db-1", ("db-0", "db-2")),
    ),
    (
        "primary back from a crash, read-only by config: made writable again",
        [primary(0, read_only=True), replica(1), replica(2)],
        S3,
        "db-0",
        None,
        Promote("db-0", ("db-1", "db-2")),
    ),
    (
        "primary restarted (crash, new Pod), a replica has all it has: fail over, it rejoins",
        [primary(0, read_only=True, restarted=True), replica(1), replica(2)],
        S3,
        "db-0",
        None,
        Failover("db-0", "db-1", ("db-0", "db-2"), ("db-0", "db-2"), cause="PrimaryRestarted"),
    ),
    (
        "restarted primary holding a commit no replica has: it is kept (nothing dropped)",
        [primary(0, "0-1-11", read_only=True, restarted=True), replica(1), replica(2)],
        S3,
        "db-0",
        None,
        Promote("db-0", ("db-1", "db-2")),
    ),
    (
        # MariaDB truncates at restart the tail a crashed semi-sync primary had sent but not
        # committed; its replicas, holding it, fail to reconnect with error 1236 ("the GTID is not
        # in the master's binlog"): they are ahead, not diverged, and one of them takes over
        "restarted primary truncated a tail its replicas hold (error 1236): fail over to a replica",
        [
            primary(0, "0-1-340", read_only=True, restarted=True),
            replica(1, "0-1-341", io_running=False, io_errno=1236, error_for=1.0),
            replica(2, "0-1-341", io_running=False, io_errno=1236, error_for=1.0),
        ],
        S3,
        "db-0",
        None,
        Failover("db-0", "db-1", ("db-0", "db-2"), ("db-0", "db-2"), cause="PrimaryRestarted"),
    ),
    (
        "... also when the restarted primary is seen read-only but not flagged restarted",
        [
            primary(0, "0-1-340", read_only=True),
            replica(1, "0-1-341", io_running=False, io_errno=1236, error_for=1.0),
            replica(2, "0-1-340", io_running=False, io_errno=1236, error_for=1.0),
        ],
        S3,
        "db-0",
        None,
        Failover("db-0", "db-1", ("db-0", "db-2"), ("db-0", "db-2"), cause="PrimaryNotWritable"),
    ),
    (
        "a replica with error 1236 that lacks what the primary has is diverged: held out",
        [
            primary(0, "0-1-340", read_only=True, restarted=True),
            replica(1, "0-1-339,0-2-5", io_running=False, io_errno=1236, error_for=1.0),
            replica(2),
        ],
        S3,
        "db-0",
        None,
        Promote("db-0", ("db-2",)),
    ),
    (
        "restarted primary with failover disabled: made writable again",
        [primary(0, read_only=True, restarted=True), replica(1), replica(2)],
        Settings(instances=3, failover_enabled=False),
        "db-0",
        None,
        Promote("db-0", ("db-1", "db-2")),
    ),
    (
        "spec.primary changed: switchover",
        [primary(0), replica(1), replica(2)],
        S3,
        "db-0",
        "db-2",
        Switchover("db-0", "db-2", ("db-0", "db-1")),
    ),
    (
        "switchover to an errant target waits: the target is held out meanwhile",
        [primary(0), replica(1), replica(2, "0-1-10,0-3-1")],
        S3,
        "db-0",
        "db-2",
        Errant(("db-2",), ("db-2 has transactions the primary db-0 lacks: 0-3-1",)),
    ),
    (
        "switchover to an unreachable target waits: a broken replica is repaired meanwhile",
        [primary(0), replica(1, source=None, io_running=False, sql_running=False), down(2)],
        S3,
        "db-0",
        "db-2",
        ConfigureReplica("db-1", "db-0"),
    ),
    (
        "switchover to an unreachable target waits: otherwise healthy, degraded",
        [primary(0), replica(1), down(2)],
        S3,
        "db-0",
        "db-2",
        Healthy("db-0", ("db-2",)),
    ),
    (
        "switchover to a target being re-seeded waits: the copy is watched",
        [primary(0), replica(1), replica(2, "", source=None, clone=CLONE_COPYING)],
        S3,
        "db-0",
        "db-2",
        Reseed("db-2", "db-1"),
    ),
    (
        "switchover to an instance beyond spec.instances: the scale down goes on",
        [primary(0), replica(1), replica(2), replica(3)],
        S3,
        "db-0",
        "db-3",
        Decommission(("db-3",)),
    ),
    (
        "switchover waiting for its target: semi-sync is still configured",
        [primary(0), replica(1), down(2)],
        SEMI3,
        "db-0",
        "db-2",
        ConfigureSemiSync(True, "db-0", ("db-1",)),
    ),
    (
        "scale down removing the primary: switchover first",
        [primary(2), replica(0, source="db-2"), replica(1, source="db-2")],
        Settings(instances=2),
        "db-2",
        None,
        Switchover("db-2", "db-0", ("db-1",), cause="PrimaryRemoved"),
    ),
    (
        "scale down: removed replicas leave",
        [primary(0), replica(1), replica(2), replica(3), replica(4)],
        S3,
        "db-0",
        None,
        Decommission(("db-3", "db-4")),
    ),
    (
        "new replica lacking purged binlogs needs a copy",
        [primary(0, purged=G("0-1-5")), replica(1), fresh(2)],
        S3,
        "db-0",
        None,
        NeedsSeed("db-2"),
    ),
    (
        "re-seeding possible: a new replica lacking purged binlogs is copied from the healthy replica",
        [primary(0, purged=G("0-1-5")), replica(1), fresh(2)],
        RESEED3,
        "db-0",
        None,
        Reseed("db-2", "db-1"),
    ),
    (
        "re-seeding possible: without a healthy replica the copy comes from the primary",
        [
            primary(0, purged=G("0-1-5")),
            replica(1, io_running=False, io_errno=2003, last_error="x"),
            fresh(2),
        ],
        RESEED3,
        "db-0",
        None,
        Reseed("db-2", "db-0"),
    ),
    (
        "a replica whose source purged what it needs is behind, not errant: re-seeded even with Hold",
        [
            primary(0, purged=G("0-1-5")),
            replica(1),
            replica(2, "0-1-3", io_running=False, io_errno=1236, last_error="purged"),
        ],
        RESEED3,
        "db-0",
        None,
        Reseed("db-2", "db-1"),
    ),
    (
        "errantPolicy Reseed: an errant replica is re-seeded, its errant GTIDs named for the record",
        [primary(0), replica(1), replica(2, "0-1-10,0-3-1")],
        Settings(instances=3, reseed=True, reseed_errant=True),
        "db-0",
        None,
        Reseed("db-2", "db-1", errant="0-3-1"),
    ),
    (
        "errantPolicy Hold: an errant replica is only held out",
        [primary(0), replica(1), replica(2, "0-1-10,0-3-1")],
        RESEED3,
        "db-0",
        None,
        Errant(("db-2",), ("db-2 has transactions the primary db-0 lacks: 0-3-1",)),
    ),
    (
        "a copy under way is watched (and the instance is not reconfigured meanwhile)",
        [primary(0), replica(1), replica(2, "0-1-10,0-3-1", source=None, clone=CLONE_COPYING)],
        Settings(instances=3, reseed=True, reseed_errant=True),
        "db-0",
        None,
        Reseed("db-2", "db-1"),
    ),
    (
        "a copied instance waits for its restart",
        [primary(0), replica(1), replica(2, "0-1-5", source=None, clone=CLONE_COPIED)],
        RESEED3,
        "db-0",
        None,
        Reseed("db-2", "db-1"),
    ),
    (
        "a failed copy is a seed still needed (its data is gone)",
        [
            primary(0, purged=G("0-1-5")),
            replica(1),
            dataclasses.replace(fresh(2), clone=CLONE_FAILED, clone_error="x"),
        ],
        RESEED3,
        "db-0",
        None,
        Reseed("db-2", "db-1"),
    ),
    (
        "one copy at a time: another replica lacking purged binlogs waits",
        [
            primary(0, purged=G("0-1-5")),
            replica(1),
            fresh(2),
            replica(3, "0-1-3", source=None, clone=CLONE_COPYING),
        ],
        Settings(instances=4, reseed=True),
        "db-0",
        None,
        Reseed("db-3", "db-1"),
    ),
    (
        "a replica being re-seeded is never promoted, even when it looks the most advanced",
        [down(0), replica(1, "0-1-9"), replica(2, "0-1-10", clone=CLONE_COPYING)],
        RESEED3,
        "db-0",
        None,
        Failover("db-0", "db-1", ("db-0", "db-2"), ()),
    ),
    (
        "semi-sync wanted but off",
        [primary(0), replica(1), replica(2)],
        Settings(instances=3, semisync=True),
        "db-0",
        None,
        ConfigureSemiSync(True, "db-0", ("db-1", "db-2")),
    ),
    (
        "semi-sync stays on while no replica could acknowledge: writes wait, none is acked by the primary alone",
        [primary(0, semisync_source=True), down(1), replica(2, "0-1-10,0-3-1", semisync_replica=True)],
        Settings(instances=3, semisync=True),
        "db-0",
        None,
        Errant(("db-2",), ("db-2 has transactions the primary db-0 lacks: 0-3-1",)),
    ),
    (
        "semi-sync stays on while every replica is unreachable",
        [primary(0, semisync_source=True), down(1), down(2)],
        Settings(instances=3, semisync=True),
        "db-0",
        None,
        Healthy("db-0", ("db-1", "db-2")),
    ),
    (
        "allowAsyncFallback: semi-sync off while no replica could acknowledge",
        [primary(0, semisync_source=True), down(1), down(2)],
        Settings(instances=3, semisync=True, async_fallback=True),
        "db-0",
        None,
        ConfigureSemiSync(False, "db-0", ()),
    ),
    (
        "scaled 3 -> 5 (MySQL): the primary's commits now wait for 2 acknowledgements, set at runtime",
        [
            primary(0, semisync_source=True, semisync_ack_count=1),
            *(replica(n, semisync_replica=True) for n in range(1, 5)),
        ],
        Settings(instances=5, semisync=True, semisync_acks=2),
        "db-0",
        None,
        ConfigureSemiSync(True, "db-0", ("db-1", "db-2", "db-3", "db-4")),
    ),
    (
        "the acknowledgements already as wanted (or not known: MariaDB waits for one): nothing to do",
        [
            primary(0, semisync_source=True, semisync_ack_count=2),
            *(replica(n, semisync_replica=True) for n in range(1, 5)),
        ],
        Settings(instances=5, semisync=True, semisync_acks=2),
        "db-0",
        None,
        Healthy("db-0", ()),
    ),
    (
        "semi-sync is not turned on before a first replica exists",
        [primary(0), down(1), down(2)],
        Settings(instances=3, semisync=True),
        "db-0",
        None,
        Healthy("db-0", ("db-1", "db-2")),
    ),
    (
        "scaled to one instance: semi-sync off",
        [primary(0, semisync_source=True)],
        Settings(instances=1, semisync=True),
        "db-0",
        None,
        ConfigureSemiSync(False, "db-0", ()),
    ),
    # replication over verified TLS (rule 10)
    (
        "replica configured before TLS: reconfigured in a healthy cluster, lowest ordinal first",
        [primary(0), replica(1), replica(2)],
        TLS3,
        "db-0",
        None,
        ConfigureReplica("db-1", "db-0"),
    ),
    (
        "one replica over TLS already: the other is next",
        [primary(0), replica(1, tls_verified=True), replica(2)],
        TLS3,
        "db-0",
        None,
        ConfigureReplica("db-2", "db-0"),
    ),
    (
        "every replica over verified TLS: healthy (never reconfigured again)",
        [primary(0), replica(1, tls_verified=True), replica(2, tls_verified=True)],
        TLS3,
        "db-0",
        None,
        Healthy("db-0"),
    ),
    (
        "TLS not required: replicas without it are left alone",
        [primary(0), replica(1), replica(2)],
        S3,
        "db-0",
        None,
        Healthy("db-0"),
    ),
    (
        "TLS waits while an instance is down (degraded)",
        [primary(0), down(1), replica(2)],
        TLS3,
        "db-0",
        None,
        Healthy("db-0", ("db-1",)),
    ),
    (
        "TLS waits until the replica reconfigured before is connected again (one at a time)",
        [primary(0), replica(1, tls_verified=True, io_running=False, io_connecting=True), replica(2)],
        TLS3,
        "db-0",
        None,
        Healthy("db-0"),
    ),
    (
        "TLS waits while a replica has a fresh error",
        [primary(0), replica(1, tls_verified=True, io_errno=2003, error_for=1.0), replica(2)],
        TLS3,
        "db-0",
        None,
        Healthy("db-0"),
    ),
    (
        "never during a failover",
        [down(0, 6.0), replica(1), replica(2)],
        TLS3,
        "db-0",
        None,
        Failover("db-0", "db-1", ("db-0", "db-2"), ("db-2",)),
    ),
    (
        "semi-sync is configured before TLS",
        [primary(0), replica(1), replica(2)],
        dataclasses.replace(TLS3, semisync=True),
        "db-0",
        None,
        ConfigureSemiSync(True, "db-0", ("db-1", "db-2")),
    ),
    (
        "a held-out replica holds TLS back too",
        [primary(0), replica(1, "0-1-10,0-2-1"), replica(2)],
        TLS3,
        "db-0",
        None,
        Errant,
    ),
    # semi-sync: with N replicas and A acknowledgements, N - A + 1 must answer before a promotion
    (
        "semi-sync, primary and one of 2 replicas lost together: held (the lost one may hold the acked tail)",
        [down(0, 6.0), down(1, 6.0), replica(2, "0-1-8")],
        SEMI3,
        "db-0",
        None,
        FailoverHeld("db-0", ("db-2",), 2),
    ),
    (
        "semi-sync, primary and one replica lost, forced by a person: the other is promoted, marked forced",
        [down(0, 6.0), down(1, 6.0), replica(2, "0-1-8")],
        dataclasses.replace(SEMI3, force_failover=True),
        "db-0",
        None,
        Failover("db-0", "db-2", ("db-0", "db-1"), (), forced=True),
    ),
    (
        "semi-sync, only the primary lost: not forced",
        [down(0, 6.0), replica(1), replica(2)],
        dataclasses.replace(SEMI3, force_failover=True),
        "db-0",
        None,
        Failover("db-0", "db-1", ("db-0", "db-2"), ("db-2",)),
    ),
    (
        "semi-sync with asynchronous fallback: no proof to wait for, the answering replica is promoted",
        [down(0, 6.0), down(1, 6.0), replica(2, "0-1-8")],
        dataclasses.replace(SEMI3, async_fallback=True),
        "db-0",
        None,
        Failover("db-0", "db-2", ("db-0", "db-1"), ()),
    ),
    (
        "asynchronous replication: the answering replica is promoted",
        [down(0, 6.0), down(1, 6.0), replica(2, "0-1-8")],
        S3,
        "db-0",
        None,
        Failover("db-0", "db-2", ("db-0", "db-1"), ()),
    ),
    (
        "5 instances waiting for 2 acknowledgements: primary and one replica lost, 3 of 4 answer: promoted",
        [down(0, 6.0), replica(1), down(2, 6.0), replica(3), replica(4)],
        Settings(instances=5, failover_delay_seconds=5, semisync=True, semisync_acks=2),
        "db-0",
        None,
        Failover("db-0", "db-1", ("db-0", "db-2", "db-3", "db-4"), ("db-3", "db-4")),
    ),
    (
        "5 instances waiting for 2 acknowledgements: primary and two replicas lost: held",
        [down(0, 6.0), replica(1), down(2, 6.0), down(3, 6.0), replica(4)],
        Settings(instances=5, failover_delay_seconds=5, semisync=True, semisync_acks=2),
        "db-0",
        None,
        FailoverHeld("db-0", ("db-1", "db-4"), 3),
    ),
    (
        "5 MariaDB instances (one acknowledgement): primary and one replica lost: held",
        [down(0, 6.0), replica(1), down(2, 6.0), replica(3), replica(4)],
        Settings(instances=5, failover_delay_seconds=5, semisync=True, semisync_acks=1),
        "db-0",
        None,
        FailoverHeld("db-0", ("db-1", "db-3", "db-4"), 4),
    ),
    (
        "semi-sync, 2 instances: the one replica answers: promoted",
        [down(0, 6.0), replica(1)],
        Settings(instances=2, failover_delay_seconds=5, semisync=True),
        "db-0",
        None,
        Failover("db-0", "db-1", ("db-0",), ()),
    ),
]


@pytest.mark.parametrize(
    "situation, instances, settings, recorded, desired, expected", TABLE, ids=[row[0] for row in TABLE]
)
def test_table(situation, instances, settings, recorded, desired, expected):
    d = decide(instances, settings, recorded, desired)
    if isinstance(expected, type):
        assert isinstance(d, expected), d
    else:
        got = {k: v for k, v in d.__dict__.items() if k != "reason"}
        want = {k: v for k, v in expected.__dict__.items() if k != "reason"}
        assert type(d) is type(expected) and got == want, d
    assert d.reason or isinstance(d, Healthy)  # every action can be explained in an Event


@pytest.mark.parametrize(
    "instances, desired, why",
    [
        ([primary(0), replica(1)], "db-1", ""),
        ([primary(0), replica(1)], "db-0", ""),  # the primary itself: nothing to do
        ([primary(0), down(1)], "db-1", "db-1 is unreachable"),
        ([primary(0), replica(1, clone=CLONE_COPYING)], "db-1", "db-1 is being re-seeded"),
        ([primary(0), replica(1, "0-1-10,0-2-4")], "db-1", "held out: db-1 has transactions"),
        ([primary(0), replica(1)], "db-7", "db-7 is not among the 3 instances"),
        ([primary(0), replica(1), replica(3)], "db-3", "db-3 is not among the 3 instances"),
        # a primary that does not serve is compared with nobody: the failover rules decide
        ([primary(0, read_only=True), replica(1, "0-1-10,0-2-4")], "db-1", ""),
    ],
)
def test_switchover_blocker_says_why_a_target_cannot_take_over_now(instances, desired, why):
    got = switchover_blocker(instances, S3, "db-0", desired)
    assert got.startswith(why) and bool(got) == bool(why), got


def test_a_restarted_primary_kept_for_its_extra_commits_says_which():
    d = decide([primary(0, "0-1-11", read_only=True, restarted=True), replica(1), replica(2)], S3, "db-0")
    assert isinstance(d, Promote) and "restarted" in d.reason and "0-1-11" in d.reason, d


def test_errant_reason_names_instance_and_gtids():
    why = errant_against_primary(replica(1, "0-1-10,0-2-1"), primary(0), S3)
    assert "db-1" in why and "0-2-1" in why


def test_writes_the_primary_made_after_it_was_observed_are_not_errant():
    # the replica was observed after it applied 0-1-12; the primary's observation said 0-1-10
    assert errant_against_primary(replica(1, "0-1-12"), primary(0, "0-1-10"), S3) is None


# ---- property tests -------------------------------------------------------------------------
seqs = st.integers(0, 4)


@st.composite
def clusters(draw):
    n = draw(st.integers(1, 5))
    wanted = draw(st.integers(1, n))
    insts = []
    for k in range(n):
        entries = [(0, o, draw(seqs)) for o in range(1, n + 2) if draw(st.booleans())]
        executed = MariaDBGtids.of(entries)
        extra = draw(seqs)
        received = MariaDBGtids.of([(0, 1, extra)])
        reachable = draw(st.sampled_from([True, True, False]))
        insts.append(
            InstanceState(
                name=f"db-{k}",
                ordinal=k,
                reachable=reachable,
                origin=str(k + 1),
                read_only=draw(st.sampled_from([True, True, True, True, False])),
                source=draw(st.sampled_from([None] + [f"db-{j}" for j in range(n) if j != k])),
                io_running=draw(st.booleans()),
                io_connecting=draw(st.booleans()),
                sql_running=draw(st.booleans()),
                io_errno=draw(st.sampled_from([0, 0, 0, 2003])),
                sql_errno=draw(st.sampled_from([0, 0, 0, 1950])),
                error_for=draw(st.floats(0, 20)),
                executed=executed if reachable else None,
                received=received if reachable else None,
                # what a silent instance had when it last answered (or never seen answering)
                last_executed=None if reachable else draw(st.sampled_from([None, executed])),
                unreachable_for=0.0 if reachable else draw(st.floats(0, 20)),
                down_evidence="" if reachable else draw(st.sampled_from(["", "", "its Pod is Failed"])),
                tls_verified=draw(st.booleans()),
                source_heard=reachable and draw(st.booleans()),
                clone=draw(st.sampled_from([None, None, None, CLONE_COPYING, CLONE_COPIED, CLONE_FAILED])),
            )
        )
    recorded = draw(st.sampled_from([None] + [i.name for i in insts]))
    desired = draw(st.sampled_from([None] + [i.name for i in insts]))
    cfg = Settings(
        instances=wanted,
        failover_enabled=draw(st.booleans()),
        failover_delay_seconds=draw(st.floats(0, 15)),
        partition_grace_seconds=draw(st.sampled_from([0.0, 5.0, 30.0])),
        semisync=draw(st.booleans()),
        replication_tls=draw(st.booleans()),
        reseed=draw(st.booleans()),
        reseed_errant=draw(st.booleans()),
        act_on_evidence=draw(st.booleans()),
    )
    return insts, cfg, recorded, desired


@st.composite
def serving_clusters(draw):
    """A serving primary db-0 and replicas of it (mostly connected and applying, some not): the
    situations where the last rules (semi-sync, held out, TLS) are reached."""
    n = draw(st.integers(1, 4))
    semisync = draw(st.booleans())
    insts = [primary(0, "0-1-10", semisync_source=draw(st.sampled_from([semisync, semisync, not semisync])))]
    for k in range(1, n):
        if draw(st.sampled_from([True] * 5 + [False])):
            insts.append(
                replica(
                    k,
                    gtids=draw(st.sampled_from(["0-1-10"] * 4 + ["0-1-7", "0-1-10,0-9-1"])),
                    source=draw(st.sampled_from(["db-0"] * 6 + [None, f"db-{(k + 1) % n}"])),
                    io_running=draw(st.sampled_from([True] * 4 + [False])),
                    io_connecting=draw(st.booleans()),
                    sql_running=draw(st.sampled_from([True] * 4 + [False])),
                    io_errno=draw(st.sampled_from([0] * 6 + [2003])),
                    error_for=draw(st.floats(0, 20)),
                    semisync_replica=draw(st.sampled_from([semisync, semisync, not semisync])),
                    tls_verified=draw(st.booleans()),
                )
            )
        else:
            insts.append(down(k, draw(st.floats(0, 20))))
    cfg = Settings(
        instances=draw(st.integers(max(1, n - 1), n)), semisync=semisync, replication_tls=draw(st.booleans())
    )
    return insts, cfg, "db-0", None


def serving_target(d):
    return {
        Failover: lambda d: d.to,
        Promote: lambda d: d.name,
        Switchover: lambda d: d.to,
        Bootstrap: lambda d: d.primary,
    }.get(type(d), lambda d: None)(d)


def holds_never_two_writable(c):
    insts, cfg, recorded, desired = c
    d = decide(insts, cfg, recorded, desired)
    assert len(planned_writable(d, insts)) <= 1, d


def holds_promoted_instance_has_everything_reachable_candidates_have(c):
    insts, cfg, recorded, desired = c
    d = decide(insts, cfg, recorded, desired)
    if isinstance(d, (Failover, Promote)):
        target = next(i for i in insts if i.name == serving_target(d))
        assert target.reachable
        for other in insts:
            if other.name in getattr(d, "replicas", ()) and other.reachable:
                assert target.known.contains(other.known), (d, other)


def _decided(c):
    """(settings, recorded primary, decision, instances by name, the instance it makes serve)."""
    insts, cfg, recorded, desired = c
    d = decide(insts, cfg, recorded, desired)
    return cfg, recorded, d, {i.name: i for i in insts}, serving_target(d)


def holds_an_instance_being_reseeded_never_serves_and_is_never_copied_from(c):
    cfg, recorded, d, by, target = _decided(c)
    if target is not None and target != recorded:
        assert not by[target].reseeding, d  # never promoted while its data is being replaced
    if isinstance(d, Reseed):
        # (a copy is only ever made onto a replica: a writable recorded primary that reports one
        # under way is a state no server reaches, and the only possible donor then)
        if not (recorded and by[recorded].reseeding and d.donor == recorded):
            assert d.donor != d.name and not by[d.donor].reseeding and by[d.donor].reachable, d
        assert d.name != recorded, d  # the primary is never re-seeded
        assert not d.errant or (cfg.reseed and cfg.reseed_errant), d  # Hold discards nothing
    if isinstance(d, ConfigureReplica):
        assert not by[d.name].reseeding, d


def holds_errant_instances_never_serve(c):
    cfg, _, d, by, target = _decided(c)
    if target is not None:
        assert by[target].sql_errno != 1950, d  # a diverged server is never promoted
    if isinstance(d, Switchover):
        assert errant_against_primary(by[d.to], by[d.from_], cfg) is None
    if isinstance(d, ConfigureReplica) and by[d.source].reachable:
        assert errant_against_primary(by[d.name], by[d.source], cfg) is None


def shown_down(insts, cfg, name) -> bool:
    """`name` does not answer, evidence shows its server is not running, and no replica's IO
    thread is connected to it: the one case a failover need not wait for."""
    by = {i.name: i for i in insts}
    return (
        cfg.act_on_evidence
        and bool(by[name].down_evidence)
        and not any(i.reachable and i.source == name and i.io_running for i in insts)
    )


def holds_blip_shorter_than_delay_never_fails_over(c):
    """... unless it is no blip: the server is shown not running and no replica is connected to it."""
    insts, cfg, recorded, desired = c
    d = decide(insts, cfg, recorded, desired)
    if isinstance(d, Failover):
        old = next(i for i in insts if i.name == d.from_)
        assert (
            old.reachable
            or old.unreachable_for >= cfg.failover_delay_seconds
            or shown_down(insts, cfg, old.name)
        )


def holds_a_primary_a_replica_is_connected_to_waits_the_delay(c):
    """Evidence of a stopped server never hurries the failover of a primary a replica's IO thread is
    still connected to (a refused connection may be a firewall between the operator and it)."""
    insts, cfg, recorded, desired = c
    d = decide(insts, cfg, recorded, desired)
    if isinstance(d, (Failover, FailoverHeld)):
        old = next((i for i in insts if i.name == recorded), None)
        if old is not None and not old.reachable and old.unreachable_for < cfg.failover_delay_seconds:
            assert shown_down(insts, cfg, old.name), d


def holds_replica_on_its_way_to_the_right_source_is_never_reconfigured(c):
    """Churn guard: connected or connecting to the primary, SQL thread running, and no error that
    persisted past the grace period -> never repointed; the one exception is the one-time move to
    verified TLS of a replica without it (see the test below)."""
    insts, cfg, recorded, desired = c
    d = decide(insts, cfg, recorded, desired)
    if isinstance(d, ConfigureReplica):
        i = next(i for i in insts if i.name == d.name)
        on_its_way = i.source == d.source and (i.io_running or i.io_connecting) and i.sql_running
        # a server that replicates from nothing yet ("not a replica") is configured, error or not
        fresh_error = (
            i.source == d.source
            and (i.io_errno or i.sql_errno)
            and i.error_for < cfg.replica_error_grace_seconds
        )
        tls_move = (
            cfg.replication_tls
            and not i.tls_verified
            and i.source == d.source
            and d.reason == f"{i.name}: replicates without verified TLS"
        )
        assert not on_its_way or (i.io_errno or i.sql_errno) or tls_move, d
        assert not fresh_error, d


def holds_replicas_move_to_verified_tls_only_in_an_otherwise_healthy_cluster_and_once(c):
    """Requiring TLS changes a decision only where it would be Healthy with every instance
    reachable and every replica connected and applying: then one replica of the primary without
    verified TLS is reconfigured; once it shows TLS it is never reconfigured for it again."""
    insts, cfg, recorded, desired = c
    on, off = dataclasses.replace(cfg, replication_tls=True), dataclasses.replace(cfg, replication_tls=False)
    d, plain = decide(insts, on, recorded, desired), decide(insts, off, recorded, desired)
    if d != plain:
        assert isinstance(plain, Healthy) and plain.degraded == (), (d, plain)
        assert isinstance(d, ConfigureReplica) and d.source == plain.primary, d
        i = next(i for i in insts if i.name == d.name)
        assert i.source == d.source and not i.tls_verified and i.io_running and i.sql_running, d
        assert d.reason == f"{i.name}: replicates without verified TLS"
        after = [dataclasses.replace(j, tls_verified=True) if j.name == i.name else j for j in insts]
        again = decide(after, on, recorded, desired)
        assert not (isinstance(again, ConfigureReplica) and again.name == i.name), again
    everyone = [dataclasses.replace(j, tls_verified=True) for j in insts]
    assert decide(everyone, on, recorded, desired) == decide(everyone, off, recorded, desired)


def test_next_pass_comes_when_the_failover_delay_ends():
    from mysql_operator.topology import next_pass_in

    assert next_pass_in(WaitForDelay(0.4, reason="primary db-0 unreachable for 2.6s"), 1.0) == 0.4
    assert next_pass_in(WaitForDelay(7.0, reason="primary db-0 unreachable for 3.0s"), 1.0) == 1.0
    assert next_pass_in(WaitForDelay(0.0, reason="bootstrap waits for every instance"), 1.0) == 1.0
    assert next_pass_in(Healthy("db-0"), 1.0) == 1.0


@pytest.mark.parametrize(
    "instances, acks, replicas, fallback, needed",
    [
        (3, None, 2, False, 2),  # default acks 1: both replicas
        (5, None, 4, False, 3),  # default acks 2
        (5, 1, 4, False, 4),  # MariaDB waits for one
        (5, 4, 4, False, 1),  # every replica acknowledges: any one
        (2, None, 1, False, 1),
        (3, None, 2, True, 1),  # asynchronous fallback: nothing to prove
        (3, 5, 2, False, 1),  # never more acknowledgements than replicas
    ],
)
def test_failover_quorum(instances, acks, replicas, fallback, needed):
    cfg = Settings(instances=instances, semisync=True, semisync_acks=acks, async_fallback=fallback)
    assert failover_quorum(cfg, replicas) == needed


def holds_an_unforced_semisync_failover_has_the_replicas_that_prove_no_acked_commit_is_lost(c):
    insts, cfg, recorded, desired = c
    d = decide(insts, cfg, recorded, desired)
    lost = isinstance(d, Failover) and not next(i for i in insts if i.name == d.from_).reachable
    if lost and cfg.semisync and not d.forced:  # (a reachable old primary's data is seen, rule 4)
        replicas = [i for i in insts if i.name != d.from_]
        assert sum(i.reachable for i in replicas) >= failover_quorum(cfg, len(replicas)), d
    if isinstance(d, FailoverHeld):
        # too few answer for semi-sync's promise, or no instance that may be promoted answers
        assert (cfg.semisync and not cfg.force_failover) or not d.answering, d


def holds_an_unforced_semisync_failover_keeps_what_any_other_instance_may_have_acknowledged(c):
    """Held-out and silent instances included: the quorum counts them, so what they hold (but for
    what they wrote that nobody else has) is on the one promoted."""
    insts, cfg, recorded, desired = c
    d = decide(insts, cfg, recorded, desired)
    if not (isinstance(d, Failover) and cfg.semisync and not cfg.async_fallback and not d.forced):
        return
    by = {i.name: i for i in insts}
    if by[d.from_].reachable:
        return  # (rule 4: the old primary's data is seen and compared)
    peers = [i for i in insts if not i.reseeding]
    for q in peers:
        need = may_be_acknowledged(q, peers)
        if q.name not in (d.from_, d.to) and need is not None:
            assert by[d.to].known.contains(need), (d, q)


def holds_a_primary_its_replicas_still_hear_is_failed_over_only_after_the_grace(c):
    insts, cfg, recorded, desired = c
    d = decide(insts, cfg, recorded, desired)
    by = {i.name: i for i in insts}
    if isinstance(d, (Failover, FailoverHeld)) and not cfg.force_failover and not by[recorded].reachable:
        hearing = any(i.reachable and i.source == recorded and i.source_heard for i in insts)
        if hearing and not shown_down(insts, cfg, recorded):
            assert by[recorded].unreachable_for >= cfg.partition_grace_seconds, d


def holds_a_desired_primary_that_cannot_take_over_changes_nothing(c):
    """A switchover waiting for its target (unreachable, re-seeding, held out, not an instance)
    never stops the repairs: with a serving primary that stays, the decision is the one made
    without the request."""
    insts, cfg, recorded, desired = c
    by = {i.name: i for i in insts}
    p = by.get(recorded or "")
    if p is None or desired is None or not p.reachable or p.read_only or p.is_replica:
        return
    if p.ordinal >= cfg.instances or not switchover_blocker(insts, cfg, recorded, desired):
        return
    assert decide(insts, cfg, recorded, desired) == decide(insts, cfg, recorded, None)


# Every property above on the same drawn clusters: drawing them is what costs (about 10 ms
# each), so each property sees 600 clusters (as many as when each drew its own) for the price of
# one property's draws.
PROPERTIES = (
    holds_never_two_writable,
    holds_promoted_instance_has_everything_reachable_candidates_have,
    holds_an_instance_being_reseeded_never_serves_and_is_never_copied_from,
    holds_errant_instances_never_serve,
    holds_blip_shorter_than_delay_never_fails_over,
    holds_a_primary_a_replica_is_connected_to_waits_the_delay,
    holds_replica_on_its_way_to_the_right_source_is_never_reconfigured,
    holds_replicas_move_to_verified_tls_only_in_an_otherwise_healthy_cluster_and_once,
    holds_an_unforced_semisync_failover_has_the_replicas_that_prove_no_acked_commit_is_lost,
    holds_an_unforced_semisync_failover_keeps_what_any_other_instance_may_have_acknowledged,
    holds_a_primary_its_replicas_still_hear_is_failed_over_only_after_the_grace,
    holds_a_desired_primary_that_cannot_take_over_changes_nothing,
)


@hsettings(max_examples=300, deadline=None)
@given(serving_clusters(), st.integers(0, 5))
def test_a_switchover_waiting_for_its_target_never_stops_the_repairs(c, k):
    insts, cfg, recorded, _ = c
    holds_a_desired_primary_that_cannot_take_over_changes_nothing((insts, cfg, recorded, f"db-{k}"))


@hsettings(max_examples=600, deadline=None)
@given(st.one_of(clusters(), serving_clusters()))
def test_every_decision_property_holds_on_the_same_drawn_clusters(c):
    for holds in PROPERTIES:
        holds(c)


SEMI2 = Settings(instances=2, failover_delay_seconds=5, semisync=True)


@pytest.mark.parametrize(
    "rebuilt, why",
    [
        # initialised again on a new volume: its own few GTIDs (errant already), none of the cluster's
        (replica(1, "0-2-3", source=None, io_running=False, sql_running=False), "no other instance has"),
        (replica(1, "", source=None, io_running=False, sql_running=False), "holds no transaction"),
        # replicating again from the start, not yet past what the primary had purged
        (replica(1, "0-1-20", received="0-1-20"), "already purged"),
    ],
)
def test_a_replica_whose_data_is_newer_than_the_primarys_is_never_promoted(rebuilt, why):
    """The only replica lost its volume and came back empty while the primary stopped answering
    (it had commits waiting for that replica's acknowledgement): promoting it would discard every
    transaction of the cluster. The primary's last answer is what the replica is compared with."""
    p = down(
        0, last_executed=G("0-1-100"), last_purged=G("0-1-50") if why != "holds no transaction" else G("")
    )
    d = decide([p, rebuilt], SEMI2, "db-0")
    assert isinstance(d, Unrecoverable) and why in d.reason and "db-1" in d.reason, d


def test_a_replica_with_everything_the_primary_had_purged_is_still_promoted():
    p = down(0, last_executed=G("0-1-100"), last_purged=G("0-1-50"))
    d = decide([p, replica(1, "0-1-99")], SEMI2, "db-0")
    assert isinstance(d, Failover) and d.to == "db-1", d


@pytest.mark.parametrize("cluster_settings", [SEMI2, Settings(instances=2, failover_delay_seconds=5)])
def test_a_former_primary_takes_over_again_when_the_primary_it_handed_over_to_fails(cluster_settings):
    """db-0 was the primary (its own GTIDs, 0-1-*), handed over to db-1 and replicates from it;
    db-1 stops answering. db-0 is the only candidate: what it wrote itself as the primary is not
    errant, db-1 had it when it last answered. A second failover of a 2-instance cluster."""
    p = down(1, last_executed=G("0-1-317,0-2-400"), last_purged=G(""))
    former = replica(0, "0-1-317,0-2-398", received="0-1-317,0-2-400", source="db-1")
    d = decide([former, p], cluster_settings, "db-1")
    assert isinstance(d, Failover) and d.to == "db-0", d


def test_what_a_replica_wrote_past_the_primarys_last_answer_still_holds_it_out():
    """The same, but db-0 also wrote a transaction of its own that db-1 never had: errant."""
    p = down(1, last_executed=G("0-1-317,0-2-400"), last_purged=G(""))
    former = replica(0, "0-1-318,0-2-400", source="db-1")
    d = decide([former, p], SEMI2, "db-1")
    assert isinstance(d, Unrecoverable) and "db-0 wrote transactions no other instance has" in d.reason, d


def test_an_instance_never_seen_answering_proves_nothing_for_a_former_primary():
    """The operator never saw db-1 answer (it started after db-1 stopped): nothing shows that
    db-0's own transactions reached anyone, and it is held out as before."""
    d = decide([replica(0, "0-1-317,0-2-400", source="db-1"), down(1)], SEMI2, "db-1")
    assert isinstance(d, Unrecoverable) and "no other instance has" in d.reason, d


SEMI3 = Settings(instances=3, failover_delay_seconds=5, semisync=True)
M = MySQLGtidSet.parse
U0, U1, U2 = ("00000000-0000-0000-0000-00000000000" + str(k) for k in (1, 2, 3))


@pytest.mark.parametrize(
    "parse, base, acked, unacked, own1",
    [
        # MariaDB: domain-server_id-seq; db-0 is server 1, db-1 server 2
        (G, "0-1-100", "0-1-110", "0-1-111", "0-2-1"),
        # MySQL: server_uuid:interval
        (M, f"{U0}:1-100", f"{U0}:1-110", f"{U0}:1-111", f"{U1}:1"),
    ],
    ids=["mariadb", "mysql"],
)
def test_a_second_failover_never_promotes_a_replica_lacking_what_a_held_out_former_primary_acknowledged(
    parse, base, acked, unacked, own1
):
    """The CI failure of issue 45. db-0 hung as the primary; db-1 (every acknowledged commit,
    up to `acked`) replaced it; db-2 lagged (up to `base`) and was never repointed. db-0
    resumed holding one commit nobody received (`unacked`): held out as errant. Then db-1 stops
    answering. db-0 and db-2 answer: enough for the quorum, but db-2, the only candidate, lacks
    what db-0 and db-1 hold and may have been acknowledged: nothing is promoted."""
    origins = {"db-0": "1", "db-1": "2", "db-2": "3"} if parse is G else {"db-0": U0, "db-1": U1, "db-2": U2}
    former = replica(0, source=None, io_running=False, sql_running=False, origin=origins["db-0"])
    former = dataclasses.replace(former, executed=parse(unacked), received=parse(""))
    lost = dataclasses.replace(down(1, last_executed=parse(acked + "," + own1)), origin=origins["db-1"])
    lagging = replica(2, source="db-0", io_running=False, origin=origins["db-2"])
    lagging = dataclasses.replace(lagging, executed=parse(base), received=parse(base))
    d = decide([former, lost, lagging], SEMI3, "db-1")
    assert isinstance(d, FailoverHeld), d
    assert "db-2, the most advanced instance that may be promoted, lacks" in d.reason, d.reason
    assert "db-0 holds" in d.reason, d.reason
    # what db-0 wrote that nobody has is not what holds it: db-2 with everything else is promoted
    caught_up = dataclasses.replace(lagging, executed=parse(acked), received=parse(acked))
    d = decide([former, lost, caught_up], SEMI3, "db-1")
    assert isinstance(d, Failover) and d.to == "db-2" and not d.forced, d
    # a person may still force it, and the Failover says what it may lose
    forced = dataclasses.replace(SEMI3, force_failover=True)
    d = decide([former, lost, lagging], forced, "db-1")
    assert isinstance(d, Failover) and d.to == "db-2" and d.forced and "db-0 hold" in d.reason, d


def test_a_silent_replica_with_more_than_the_candidates_holds_a_semisync_failover():
    """db-3 last answered holding 0-1-12; the others that answer (enough for the quorum of a
    5-instance cluster) have up to 0-1-10: what only db-3 received may have been acknowledged."""
    insts = [
        down(0, last_executed=G("0-1-12")),
        replica(1, "0-1-10"),
        replica(2, "0-1-10"),
        down(3, last_executed=G("0-1-12")),
        replica(4, "0-1-9"),
    ]
    d = decide(insts, Settings(instances=5, failover_delay_seconds=5, semisync=True), "db-0")
    assert isinstance(d, FailoverHeld) and "db-3 holds (0-1-12)" in d.reason, d
    # asynchronous replication promises nothing of the kind: the most advanced is promoted
    d = decide(insts, Settings(instances=5, failover_delay_seconds=5), "db-0")
    assert isinstance(d, Failover) and d.to == "db-1", d


def test_an_instance_on_new_data_does_not_count_toward_the_quorum():
    """db-2 lost its volume (it holds nothing, the primary had 0-1-100): it answers, but it
    cannot hold what it acknowledged, so only db-1 counts: one of the two needed."""
    insts = [down(0, last_executed=G("0-1-100"), last_purged=G("")), replica(1, "0-1-100"), replica(2, "")]
    d = decide(insts, SEMI3, "db-0")
    assert isinstance(d, FailoverHeld) and d.answering == ("db-1",), d


def test_a_primary_only_the_operator_lost_is_failed_over_only_after_the_partition_grace():
    """db-0 does not answer the operator, but db-1 still receives from it (heartbeats or
    transactions since the last pass): the operator is the one cut off. The failover waits up to
    the grace (a stalled primary looks the same to its replicas), then goes ahead."""
    cfg = Settings(instances=3, failover_delay_seconds=3, semisync=True, partition_grace_seconds=30)
    hearing = replica(1, source_heard=True)
    d = decide([down(0, for_s=10.0), hearing, replica(2)], cfg, "db-0")
    assert isinstance(d, WaitForDelay) and d.remaining_seconds == 20.0, d
    assert "partition between the operator and the primary" in d.reason and "db-1" in d.reason, d
    d = decide([down(0, for_s=31.0), hearing, replica(2)], cfg, "db-0")
    assert isinstance(d, Failover), d
    # nobody hears it (killed, hung): no wait beyond the delay; a person's force skips the wait
    assert isinstance(decide([down(0, for_s=10.0), replica(1), replica(2)], cfg, "db-0"), Failover)
    forced = dataclasses.replace(cfg, force_failover=True)
    assert isinstance(decide([down(0, for_s=10.0), hearing, replica(2)], forced, "db-0"), Failover)
    # a replica hearing another source says nothing of the primary; grace 0 never waits
    other = replica(1, source="db-2", source_heard=True)
    assert isinstance(decide([down(0, for_s=10.0), other, replica(2)], cfg, "db-0"), Failover)
    no_grace = dataclasses.replace(cfg, partition_grace_seconds=0)
    assert isinstance(decide([down(0, for_s=10.0), hearing, replica(2)], no_grace, "db-0"), Failover)


def test_a_primary_shown_not_running_is_failed_over_without_the_delay():
    """Killed (the connection refused), its Pod deleted, its container ended: no delay, once no
    replica's IO thread is connected to it any longer; a timeout alone waits the delay, and so does
    evidence while a replica is still connected (a firewall refusing only the operator)."""
    cfg = Settings(instances=3, failover_delay_seconds=3, semisync=True)
    gone = down(0, for_s=0.2, down_evidence="its server refused the connection")
    lost = dict(io_running=False, io_connecting=True, source_heard=True)  # heard it before the kill
    d = decide([gone, replica(1, **lost), replica(2, **lost)], cfg, "db-0")
    assert isinstance(d, Failover) and d.to == "db-1", d
    assert "not waiting the 3s failover delay: its server refused the connection" in d.reason, d
    silent = down(0, for_s=0.2)
    assert isinstance(decide([silent, replica(1, **lost), replica(2, **lost)], cfg, "db-0"), WaitForDelay)
    connected = decide([gone, replica(1), replica(2, **lost)], cfg, "db-0")
    assert isinstance(connected, WaitForDelay) and connected.remaining_seconds == pytest.approx(2.8), (
        connected
    )
    off = dataclasses.replace(cfg, act_on_evidence=False)
    assert isinstance(decide([gone, replica(1, **lost), replica(2, **lost)], off, "db-0"), WaitForDelay)
    # the safety checks stay: a quorum is still needed
    held = decide([gone, replica(1, **lost), down(2, for_s=0.2)], cfg, "db-0")
    assert isinstance(held, FailoverHeld), held


def test_a_primary_silent_in_one_observation_only_is_asked_again_before_a_failover():
    """One round past its deadline on a busy machine (both servers timed out in a 3 s pass, the
    failover delay 2 s: CI's restored cluster held its failover, and with a replica answering it
    would have failed over) is not an outage: the next pass comes at once, and fails over only if
    the primary is silent there too. Evidence that its server does not run needs no second look."""
    cfg = Settings(instances=3, failover_delay_seconds=2, semisync=True)
    lost = dict(io_running=False, io_connecting=True)
    once = down(0, for_s=3.0, missed_once=True)
    d = decide([once, replica(1, **lost), replica(2, **lost)], cfg, "db-0")
    assert isinstance(d, WaitForDelay) and d.remaining_seconds == pytest.approx(0.05), d
    assert "did not answer one observation (3.0s): asked again before a failover" in d.reason
    from mysql_operator.topology import next_pass_in

    assert next_pass_in(d, 1.0) == pytest.approx(0.05)
    twice = down(0, for_s=5.0)
    assert isinstance(decide([twice, replica(1, **lost), replica(2, **lost)], cfg, "db-0"), Failover)
    refused = down(0, for_s=0.2, missed_once=True, down_evidence="its server refused the connection")
    assert isinstance(decide([refused, replica(1, **lost), replica(2, **lost)], cfg, "db-0"), Failover)
