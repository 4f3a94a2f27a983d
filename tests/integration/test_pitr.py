"""Point-in-time recovery on real MariaDB servers and a real S3 server (MinIO): rows written
continuously, a base backup, more rows, a destructive statement, more rows; every binary log
archived (backup/binlog_archive.py); restored to a time T and to a GTID, the target holds exactly
the rows committed up to that point, nothing after."""

from __future__ import annotations

import threading
import time

import pytest

from mysql_operator.backup import pitr, storage
from mysql_operator.backup.binlog_archive import Archiver, Store
from mysql_operator.backup.commands import Endpoint, client_command
from mysql_operator.backup.pipeline import option_file
from mysql_operator.backup.restore import Source, Target, restore_into
from mysql_operator.backup.run import run_backup
from mysql_operator.db.instance import Instance
from tests.integration.test_backup import creds, request_for, s3cfg, sql, writable
from tests.support.mariadb import ADMIN_USER, OPERATOR_USER
from tests.support.wait import wait_for


@pytest.fixture(scope="module")
def history(factory, s3server):
    """(source, s3, manifest, segments, rows): rows = [(id, gtid, unix second)] as committed,
    and the time the table was emptied by a DELETE."""
    (source,) = factory.create(1, prefix="pitr")
    writable(source)
    sql(
        source,
        "CREATE DATABASE app",
        "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(32), at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
    )
    bucket = s3server.create_bucket("bk-pitr")
    s3 = s3cfg(s3server, bucket)
    inst = Instance(source.host, source.port, OPERATOR_USER, factory.admin_password, name=source.name)
    client = storage.make_client(s3, creds(s3server))
    store = Store(client, s3, "c1")
    archiver = Archiver(inst, source.datadir, store, max_delay=1.0)
    rows: list[tuple[int, str, int]] = []
    stop = threading.Event()

    def writer() -> None:
        conn = source.connect(database="app")
        try:
            with conn.cursor() as cur:
                n = 0
                while not stop.is_set():
                    n += 1
                    cur.execute("INSERT INTO t (id, v) VALUES (%s, %s)", (n, f"row-{n}"))
                    cur.execute(
                        "SELECT UNIX_TIMESTAMP(at) FROM t WHERE id = %s", (n,)
                    )  # before the DELETE can
                    (at,) = cur.fetchone()
                    conn.commit()
                    cur.execute("SELECT @@last_gtid")
                    rows.append((n, cur.fetchone()[0], int(at)))
                    time.sleep(0.02)
        finally:
            conn.close()

    def archive_for(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            archiver.step(time.monotonic())
            time.sleep(0.2)

    t = threading.Thread(target=writer)
    t.start()
    try:
        archive_for(1.5)
        m = run_backup(request_for(source, s3, name="base"), creds(s3server), factory.admin_password)
        archive_for(3)
        deleted_at = int(time.time())
        while int(time.time()) == deleted_at:  # the DELETE in a second of its own... after
            time.sleep(0.05)
        sql(source, "DELETE FROM app.t")  # the destructive statement
        archive_for(2)
    finally:
        stop.set()
        t.join()
    everything = inst.dialect.parse_gtids(str(inst.scalar("SELECT @@gtid_binlog_pos")))
    wait_for(
        lambda: archiver.step(time.monotonic()) and archiver.archived.contains(everything),
        30,
        "every transaction archived",
    )
    return source, s3, m, store.segments(), rows, deleted_at


def restore_to(factory, s3server, history, stop: pitr.Stop, prefix: str):
    source, s3, m, segments, _, _ = history
    (target,) = factory.create(1, prefix=prefix)
    writable(target)
    restore_into(
        Target(target.host, target.port, ADMIN_USER, factory.admin_password),
        Source(s3, "c1/base"),
        creds(s3server),
    )
    inst = Instance(target.host, target.port, ADMIN_USER, factory.admin_password)
    completed = int(time.mktime(time.strptime(m.completed_at[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone)
    chain = pitr.plan(segments, m.gtid_position or "", completed, stop, inst.dialect.parse_gtids)
    client = storage.make_client(s3, creds(s3server))
    applied = m.gtid_position or ""
    with option_file(ADMIN_USER, factory.admin_password) as opts:
        cli = client_command(
            inst.dialect.version, Endpoint(target.host, target.port, ADMIN_USER), opts, binlogged=True
        )
        for seg in chain:
            pitr.replay_segment(
                storage.iter_object(client, s3, seg.key),
                pitr.tool_argv("mariadb", applied, stop),
                cli,
            )
            applied = str(inst.dialect.parse_gtids(applied).union(inst.dialect.parse_gtids(seg.gtids_after)))
    return target, chain


def ids(server) -> list[int]:
    return [r[0] for r in sql(server, "SELECT id FROM app.t ORDER BY id")]


def test_restore_to_a_time_has_exactly_the_rows_committed_up_to_it(factory, s3server, history):
    _, _, m, segments, rows, deleted_at = history
    assert len(segments) >= 3 and len(rows) > 100
    base_rows = {r[0] for r in rows if r[2] <= deleted_at - 3}
    t = max(r[2] for r in rows if r[2] < deleted_at - 1)  # a second well after the base backup
    target, chain = restore_to(factory, s3server, history, pitr.Stop(at=t), "pitr-t")
    expected = [r[0] for r in rows if r[2] <= t]
    assert ids(target) == expected, "exactly the rows committed up to T"
    assert set(expected) > base_rows and len(expected) < len(rows)
    assert chain, "rows after the base backup came from the archive"
    print(
        f"\nrestored to {pitr.Stop(at=t).describe()}: {len(expected)} of {len(rows)} rows, {len(chain)} segments"
    )


def test_restore_to_a_gtid_has_exactly_the_rows_up_to_it(factory, s3server, history):
    _, _, _, _, rows, deleted_at = history
    k = max(i for i, r in enumerate(rows) if r[2] < deleted_at) - 5  # before the DELETE
    n, gtid, _ = rows[k]
    target, _ = restore_to(factory, s3server, history, pitr.Stop(gtid=gtid), "pitr-g")
    assert ids(target) == [r[0] for r in rows[: k + 1]]
    assert sql(target, "SELECT @@gtid_binlog_pos")[0][0] == gtid


def test_restore_to_the_newest_is_the_source_as_it_is(factory, s3server, history):
    source, _, _, _, rows, _ = history
    target, _ = restore_to(factory, s3server, history, pitr.Stop(), "pitr-n")
    now = ids(source)
    assert ids(target) == now and now[0] > 1 and now[-1] == rows[-1][0]  # the DELETE, then more rows
    assert sql(target, "SELECT @@gtid_binlog_pos") == sql(source, "SELECT @@gtid_binlog_pos")


def test_a_time_after_the_archive_or_before_the_base_is_refused(history):
    _, _, m, segments, _, _ = history
    newest = max(s.last_event_at for s in segments)
    from mysql_operator.db.gtid import MariaDBGtids

    with pytest.raises(pitr.PitrError, match="holds transactions up to .* is later"):
        pitr.plan(segments, m.gtid_position, newest - 30, pitr.Stop(at=newest + 60), MariaDBGtids.parse)
    with pytest.raises(pitr.PitrError, match="before the base backup completed"):
        pitr.plan(segments, m.gtid_position, newest, pitr.Stop(at=newest - 60), MariaDBGtids.parse)
