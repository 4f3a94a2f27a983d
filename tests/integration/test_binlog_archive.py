"""Continuous binary log archiving (backup/binlog_archive.py) from a real server of each flavor to
a real S3 server (MinIO): under continuous writes every committed transaction reaches the bucket,
in a chain of segments without gap, the file being written is closed after max_delay, a replica
archives nothing, and a restarted archiver goes on from the index without uploading twice."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import crypto, storage
from mysql_operator.backup.binlog_archive import MAGIC, Archiver, Segment, Store
from mysql_operator.db.instance import Instance
from tests.support.mariadb import OPERATOR_USER
from tests.support.wait import wait_for

MAX_DELAY = 1.5


@pytest.fixture
def s3(s3server, request):
    name = "arch-" + request.node.name.lower().replace("_", "-").replace("[", "-").strip("]-")[-40:].strip(
        "-"
    )
    s3server.create_bucket(name)
    return S3(
        bucket=name,
        credentials_secret=SecretKeys("unused"),
        prefix="bk",
        endpoint=s3server.endpoint,
        force_path_style=True,
    )


def binlog_dir(server, inst: Instance) -> Path:
    base = Path(str(inst.scalar("SELECT @@log_bin_basename")))
    root = getattr(server, "rootfs", Path("/"))  # MySQL runs in its image's root
    return (root / base.relative_to("/")).parent if root != Path("/") else base.parent


def executed(inst: Instance):
    d = inst.dialect
    sql = "SELECT @@gtid_executed" if d.version.flavor.value == "mysql" else "SELECT @@gtid_binlog_pos"
    return d.parse_gtids(str(inst.scalar(sql) or ""))


def chain_is_whole(segments: list[Segment], d) -> None:
    """Each segment starts where the one before it ended."""
    ordered = sorted(segments, key=lambda s: s.file)
    for a, b in zip(ordered, ordered[1:]):
        assert d.parse_gtids(a.gtids_after) == d.parse_gtids(b.gtids_before), (a.file, b.file)


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_every_committed_transaction_reaches_the_bucket_in_a_whole_chain(
    writable_server, s3server, s3, encrypted
):
    server = writable_server
    inst = Instance(server.host, server.port, OPERATOR_USER, server.admin_password, name=server.name)
    d = inst.dialect
    key = crypto.Key(os.urandom(32)) if encrypted else None
    client = storage.make_client(s3, storage.Credentials(s3server.access_key, s3server.secret_key))
    store = Store(client, s3, "c1", key)
    archiver = Archiver(inst, binlog_dir(server, inst), store, max_delay=MAX_DELAY)
    server.query("CREATE DATABASE IF NOT EXISTS arch")
    server.query("CREATE TABLE IF NOT EXISTS arch.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64))")

    stop, written = threading.Event(), [0]

    def writer() -> None:
        conn = server.connect(database="arch")
        try:
            with conn.cursor() as cur:
                while not stop.is_set():
                    cur.execute("INSERT INTO t (v) VALUES (%s)", (f"row-{written[0]}",))
                    conn.commit()
                    written[0] += 1
                    time.sleep(0.01)
        finally:
            conn.close()

    t = threading.Thread(target=writer)
    t.start()
    steps = []
    started = time.monotonic()
    try:
        while time.monotonic() - started < 4 * MAX_DELAY:
            steps.append(archiver.step(time.monotonic()))
            time.sleep(0.2)
    finally:
        stop.set()
        t.join()
    assert written[0] > 50, "the writer wrote"
    target = executed(inst)

    def archived_all():
        steps.append(archiver.step(time.monotonic()))
        return archiver.archived.contains(target)

    wait_for(archived_all, 30, "the archive holds every transaction committed")
    assert all(s.role == "primary" for s in steps)
    assert sum(s.rotated for s in steps) >= 2, "the file being written is closed every max_delay"

    segments = store.segments()
    assert segments and {s.server for s in segments} == {archiver_server(inst)}
    chain_is_whole(segments, d)
    for seg in segments:
        data = client.get_object(Bucket=s3.bucket, Key=seg.key)["Body"].read()
        assert len(data) == seg.size and hashlib.sha256(data).hexdigest() == seg.sha256
        if encrypted:
            assert data.startswith(crypto.MAGIC) and seg.key.endswith(".enc") and seg.key_id == key.id
            assert b"row-1" not in data
            data = crypto.unseal(key, data)
        assert data.startswith(MAGIC)
        assert 0 < seg.first_event_at <= seg.last_event_at <= time.time() + 1 and seg.events >= 3
    delays = [s.last_event_at - s.first_event_at for s in segments]
    print(f"\n{len(segments)} segments, {written[0]} transactions; seconds each file was open: {delays}")

    # a restarted archiver reads the index and uploads nothing twice
    again = Archiver(inst, archiver.binlog_dir, store, max_delay=MAX_DELAY)
    step = again.step(time.monotonic())
    assert step.uploaded == [] and again.archived.contains(target)

    # a replica archives nothing and never closes files
    inst.execute("SET GLOBAL read_only = 1")
    try:
        server.query("INSERT INTO arch.t (v) VALUES ('as super')")  # the test's admin account may
        inst.execute("FLUSH BINARY LOGS")
        step = again.step(time.monotonic())
        assert step.role == "replica" and step.uploaded == [] and not step.rotated
    finally:
        inst.execute("SET GLOBAL read_only = 0")
    step = again.step(time.monotonic())
    assert [s.file for s in step.uploaded], "the file closed while a replica is archived once primary"
    assert again.archived.contains(executed(inst))


def archiver_server(inst: Instance) -> str:
    mysql = inst.dialect.version.flavor.value == "mysql"
    return str(inst.scalar("SELECT @@server_uuid" if mysql else "SELECT @@server_id"))
