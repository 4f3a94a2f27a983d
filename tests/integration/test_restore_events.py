"""A restore keeps each scheduled event's status as it was in the source cluster (issue 45), on real
MariaDB 10.11 and MySQL 9.7 servers, to and from a real S3 server (MinIO).

The backup is taken as the operator takes it: from the healthy replica, where the server holds
every event it replicated replica-side disabled (MariaDB SLAVESIDE_DISABLED, MySQL
REPLICA_SIDE_DISABLED), an ENABLED one and a DISABLEd one alike - measured here - and the dump
tools write each event with that status (`DISABLE ON SLAVE` / `DISABLE ON REPLICA`); loaded as
it is, the new primary would run none. The manifest keeps the statuses the primary had; the
restore gives them to the new cluster's primary and leaves the others replica-side disabled.
Measured before the change: on MariaDB with `event_scheduler = ON` (what spec.config.myCnf sets
for events to run), a dump of an ENABLED event made the restore fail with 1956 (the event wrote
to the binary log between RESET MASTER and SET GLOBAL gtid_slave_pos)."""

from __future__ import annotations

import pytest

from mysql_operator.backup import user_checks
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.restore_types import Source, Target
from mysql_operator.backup.restore_job import restore_all
from mysql_operator.backup.backup_types import BackupRequest, Candidate
from mysql_operator.backup.run import run_backup
from mysql_operator.db.accounts import restore_grants, restore_revokes
from mysql_operator.db.flavor import Flavor
from tests.support.backups import creds, s3cfg
from tests.support.flavor_servers import HOST, run, servers, servers_and_tools, writable
from tests.support.mariadb import ADMIN_USER, BACKUP_USER
from tests.support.wait import wait_for

APP = "'app'@'%'"
TICK = "tick"


@pytest.fixture(scope="module", params=["mariadb", "mysql"])
def env(request, tmp_path_factory):
    yield from servers_and_tools(request.param, tmp_path_factory)


def events_of(server) -> dict[str, tuple[str, str]]:
    rows = run(server, "SELECT EVENT_NAME, STATUS, DEFINER FROM information_schema.EVENTS")
    return {name: (status, definer) for name, status, definer in rows}


def replicate(flavor: str, replica, source, password: str) -> None:
    if flavor == "mariadb":
        change = (
            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={source.port}, "
            f"MASTER_USER='{ADMIN_USER}', MASTER_PASSWORD='{password}', MASTER_USE_GTID=slave_pos"
        )
        run(replica, change, "START SLAVE")
    else:
        change = (
            f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT={source.port}, "
            f"SOURCE_USER='{ADMIN_USER}', SOURCE_PASSWORD='{password}', SOURCE_AUTO_POSITION=1, SOURCE_SSL=1"
        )
        run(replica, change, "START REPLICA")


def new_instance(flavor: str, server, password: str) -> None:
    """As a new cluster's instance is before a restore: fenced, its scheduler on (spec.config),
    the application's account and its empty database, and the restore account, made at init
    outside the binary log."""
    fence = "SET GLOBAL super_read_only = ON" if flavor == "mysql" else "SET GLOBAL read_only = ON"
    grants = [g.grant_sql().replace("%s@%s", "'restorer'@'%'") for g in restore_grants(Flavor(flavor))]
    revokes = [f"REVOKE {g.clause()} FROM 'restorer'@'%'" for g in restore_revokes(Flavor(flavor))]
    run(
        server,
        *writable(flavor),
        "SET SESSION sql_log_bin = 0",
        "SET GLOBAL event_scheduler = ON",
        "CREATE DATABASE app",
        f"CREATE USER {APP} IDENTIFIED BY 'app-pw-1'",
        f"GRANT ALL ON app.* TO {APP}",
        f"CREATE USER 'restorer'@'%' IDENTIFIED BY '{password}'",
        *grants,
        *revokes,
        fence,
    )


def gtids(flavor: str, server) -> str:
    sql = "SELECT @@GLOBAL.gtid_executed" if flavor == "mysql" else "SELECT @@GLOBAL.gtid_binlog_pos"
    return str(run(server, sql)[0][0]).replace("\n", "")


def test_a_restore_gives_the_new_primary_the_events_statuses_of_the_source(env, s3server):
    flavor, f, shared, _ = env
    password = f.admin_password
    off = "SLAVESIDE_DISABLED" if flavor == "mariadb" else "REPLICA_SIDE_DISABLED"
    primary, replica, t0, t1 = servers(env, 4, "ev")
    # the source cluster: the application's scheduled jobs on the primary, a replica of it
    run(
        primary,
        *writable(flavor),
        "SET GLOBAL event_scheduler = ON",
        "CREATE DATABASE app",
        "CREATE TABLE app.ticks (id INT AUTO_INCREMENT PRIMARY KEY, server_id INT, event VARCHAR(8))",
        f"CREATE USER {APP} IDENTIFIED BY 'app-pw-1'",
        f"GRANT ALL ON app.* TO {APP}",
    )
    replicate(flavor, replica, primary, password)
    for name, state in ((TICK, "ENABLE"), ("off", "DISABLE")):
        run(
            primary,
            f"CREATE DEFINER = {APP} EVENT app.{name} ON SCHEDULE EVERY 1 SECOND {state} "
            f"DO INSERT INTO app.ticks (server_id, event) VALUES (@@server_id, '{name}')",
        )
    # one the primary holds replica-side disabled (replicated from a former primary, never
    # enabled there: it did not run)
    run(
        primary,
        f"CREATE DEFINER = {APP} EVENT app.held ON SCHEDULE EVERY 1 SECOND "
        f"DISABLE ON {'SLAVE' if flavor == 'mariadb' else 'REPLICA'} DO SET @x = 1",
    )
    wait_for(lambda: len(events_of(replica)) == 3, 20, "the events replicated")
    # what the server makes of replicated events: ENABLED and DISABLED alike replica-side disabled
    assert {n: s for n, (s, _) in events_of(replica).items()} == {TICK: off, "off": off, "held": off}
    wait_for(lambda: gtids(flavor, replica) == gtids(flavor, primary), 20, "the replica caught up")

    s3 = s3cfg(s3server, s3server.create_bucket(f"events-{flavor}"))
    ca = str(shared / "ca.crt") if shared else None
    host = HOST if shared else "127.0.0.1"
    m = run_backup(
        BackupRequest(
            cluster="c1",
            namespace="ns",
            backup="b1",
            s3=s3,
            tls_ca=ca,
            tools_dir=str(shared) if shared else None,
            candidates=tuple(
                Candidate(s.name, Endpoint(host, s.port, BACKUP_USER)) for s in (primary, replica)
            ),
        ),
        creds(s3server),
        password,
    )
    assert m.source_instance == replica.name  # dumped where every event is replica-side disabled
    assert m.events == (("app", "held", off), ("app", "off", "DISABLED"), ("app", TICK, "ENABLED"))

    for t in (t0, t1):
        new_instance(flavor, t, password)
    targets = {
        name: Target(host, t.port, "restorer", password, tls_ca=ca, tools_dir=str(shared) if shared else None)
        for name, t in (("c2-0", t0), ("c2-1", t1))
    }
    # the user's checks run on the primary once it is restored (spec.restore.checksConfigMap)
    checks = user_checks.parse(
        {
            "events.sql": "SELECT COUNT(*) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = 'app'",
            "events.expected": "3",
        },
        "spec.restore.checksConfigMap 'c'",
    )
    result = restore_all(
        targets, Source(s3, "c1/b1"), creds(s3server), "app", drop_account=True, primary="c2-0", checks=checks
    )
    assert result["ok"], result["message"]
    assert result["checksPassed"] == ["events"] and "userChecks" in result["phases"], result

    # the new primary: as on the source's primary, never replica-side disabled; definers kept
    assert events_of(t0) == {
        TICK: ("ENABLED", "app@%"),
        "off": ("DISABLED", "app@%"),
        "held": ("DISABLED", "app@%"),
    }
    # the other: as replication would have made them
    assert events_of(t1) == {n: (off, "app@%") for n in (TICK, "off", "held")}
    # nothing ran while the instances were writable: each holds exactly the backup's transactions
    # and rows, the scheduler is on again, and they are read-only
    for t in (t0, t1):
        assert gtids(flavor, t) == m.gtid_position.replace("\n", ""), t.name
        assert run(t, "SELECT COUNT(*) FROM app.ticks WHERE server_id = @@server_id")[0][0] == 0
        assert run(t, "SELECT @@GLOBAL.event_scheduler, @@GLOBAL.read_only")[0] == ("ON", 1)
    # promoted (as the operator does), the new primary runs the ENABLED event, and only that one
    run(t0, *writable(flavor))
    wait_for(
        lambda: run(t0, "SELECT COUNT(*) FROM app.ticks WHERE server_id = @@server_id")[0][0] >= 2,
        20,
        f"rows written by {TICK} on the restored primary",
    )
    assert run(t0, "SELECT DISTINCT event FROM app.ticks WHERE server_id = @@server_id") == ((TICK,),)
