"""Continuous binary log archiving (backup/binlog_archive.py) from a real server of each flavor to
a real S3 server (MinIO): under continuous writes every committed transaction reaches the bucket,
in a chain of segments without gap, the file being written is closed after max_delay, a replica
archives nothing, and a restarted archiver goes on from the index without uploading twice.

Then `mysql-operator backup archive-binlogs` (what the binlog-archiver Deployment runs) as a real
process, with the account the operator gives it (db/accounts.binlog_grants): every committed
transaction reaches the bucket, the account reads no data, SIGTERM ends it cleanly, and its output
never holds a secret. MySQL's mysqlbinlog is not on the host: it runs in the client-tools sidecar
(as in the Pod), and the spool lies in the folder both share."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pymysql
import pytest

from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import crypto, storage
from mysql_operator.backup.binlog_archive import MAGIC, ArchiveError, Archiver, Segment, Store
from mysql_operator.db import accounts
from mysql_operator.db.instance import Instance
from mysql_operator.manifests import BINLOG_USER
from tests.support.backups import creds, s3cfg
from tests.support.binlogs import binlog_dir
from tests.support.mariadb import OPERATOR_USER
from tests.support.mysql import client_tools_sidecar
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


def executed(inst: Instance):
    d = inst.dialect
    sql = "SELECT @@gtid_executed" if d.version.flavor.value == "mysql" else "SELECT @@gtid_binlog_pos"
    return d.parse_gtids(str(inst.scalar(sql) or ""))


def rows_into(server, database: str, stop: threading.Event, written: list[int]):
    """A thread body: rows into <database>.t, one transaction each, until `stop`; written[0] counts."""

    def writer() -> None:
        conn = server.connect(database=database)
        try:
            with conn.cursor() as cur:
                while not stop.is_set():
                    cur.execute("INSERT INTO t (v) VALUES (%s)", (f"row-{written[0]}",))
                    conn.commit()
                    written[0] += 1
                    time.sleep(0.01)
        finally:
            conn.close()

    return writer


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
    writer = rows_into(server, "arch", stop, written)

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
    assert any(s.behind_since is not None for s in steps), "under writes a transaction waited"
    assert steps[-1].behind_since is None, "all archived: nothing waits"
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


def test_a_folder_holding_another_clusters_history_is_refused_and_left_whole(writable_server, s3server, s3):
    """A cluster re-created (or restored) under the name of one whose archive is in the bucket:
    its archiver neither writes there nor prunes; the earlier cluster's archiver goes on."""
    server = writable_server
    inst = Instance(server.host, server.port, OPERATOR_USER, server.admin_password, name=server.name)
    client = storage.make_client(s3, storage.Credentials(s3server.access_key, s3server.secret_key))
    server.query("CREATE DATABASE IF NOT EXISTS own")
    server.query("CREATE TABLE IF NOT EXISTS own.t (id INT PRIMARY KEY)")
    server.query("INSERT INTO own.t VALUES (1)")
    inst.execute("FLUSH BINARY LOGS")
    first = Archiver(inst, binlog_dir(server, inst), Store(client, s3, "c1", owner="uid-a"))
    assert first.step(time.monotonic()).uploaded, "the first cluster archives"
    keys = sorted(storage.list_keys(client, s3, "bk/c1/binlogs/"))
    assert "bk/c1/binlogs/owner" in keys

    server.query("INSERT INTO own.t VALUES (2)")
    inst.execute("FLUSH BINARY LOGS")
    other = Archiver(inst, binlog_dir(server, inst), Store(client, s3, "c1", owner="uid-b"))
    with pytest.raises(ArchiveError) as e:
        other.step(time.monotonic())
    assert "uid-a" in str(e.value) and "spec.backup.storage.s3.prefix" in str(e.value)
    assert other.archived is None  # binlog_stream.follow prunes only with a loaded archive
    assert sorted(storage.list_keys(client, s3, "bk/c1/binlogs/")) == keys

    again = Archiver(inst, first.binlog_dir, Store(client, s3, "c1", owner="uid-a"))
    assert again.step(time.monotonic()).uploaded, "its own cluster goes on archiving there"
    assert again.archived.contains(executed(inst))


def archiver_server(inst: Instance) -> str:
    mysql = inst.dialect.version.flavor.value == "mysql"
    return str(inst.scalar("SELECT @@server_uuid" if mysql else "SELECT @@server_id"))


PASSWORD = "binlog-Pw-" + os.urandom(6).hex()
HEALTH_PORT = 18437  # loopback only in effect: nothing routes to it from outside the machine


def health() -> int | None:
    """The archiver's /healthz status code, None while it does not answer."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{HEALTH_PORT}/healthz", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def archive_metrics() -> dict[str, float]:
    """The archiver's /metrics: mysql_binlog_archive_<name> -> value."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{HEALTH_PORT}/metrics", timeout=2) as r:
        text = r.read().decode()
    prefix = "mysql_binlog_archive_"
    return {
        s.name.removeprefix(prefix): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith(prefix)
    }


def test_the_archiver_command_archives_every_commit_with_its_own_narrow_account(
    writable_server, s3server, tmp_path
):
    server = writable_server
    flavor = server.flavor.value
    admin = Instance(server.host, server.port, OPERATOR_USER, server.admin_password, name=server.name)
    admin.ensure_user(BINLOG_USER, "%", PASSWORD, accounts.binlog_grants(admin.dialect.version))
    server.query("CREATE DATABASE IF NOT EXISTS cmd")
    server.query("CREATE TABLE IF NOT EXISTS cmd.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64))")
    with pytest.raises(pymysql.err.OperationalError) as denied:  # streams the logs, reads no table
        conn = pymysql.connect(host=server.host, port=server.port, user=BINLOG_USER, password=PASSWORD)
        try:
            conn.cursor().execute("SELECT * FROM cmd.t")
        finally:
            conn.close()
    assert denied.value.args[0] == 1142, denied.value  # SELECT command denied

    bucket = s3server.create_bucket(f"bk-cmd-{flavor}")
    s3 = s3cfg(s3server, bucket)
    shared = tmp_path / "shared"
    spool = shared / "spool"
    spool.mkdir(parents=True)
    shared.chmod(0o777)
    # in the Pod the spool is a volume's mount point: emptied, never removed
    subprocess.run(["mount", "--bind", str(spool), str(spool)], check=True)
    (spool / "left-from-before").write_bytes(b"x")
    argv = [
        sys.executable,
        "-m",
        "mysql_operator.cli",
        "backup",
        "archive-binlogs",
        "--cluster",
        "c1",
        "--bucket",
        bucket,
        "--prefix",
        s3.prefix or "",
        "--endpoint",
        s3server.endpoint,
        "--force-path-style",
        "--user",
        BINLOG_USER,
        "--source",
        f"{server.name}={server.host}:{server.port}",
        "--max-delay",
        "1",
        "--spool",
        str(spool),
        "--health-port",
        str(HEALTH_PORT),
    ]
    env = {
        **os.environ,
        "MYSQL_OPERATOR_DB_PASSWORD": PASSWORD,
        "AWS_ACCESS_KEY_ID": s3server.access_key,
        "AWS_SECRET_ACCESS_KEY": s3server.secret_key,
    }
    stop, written = threading.Event(), [0]
    writer = rows_into(server, "cmd", stop, written)

    sidecar = None
    if flavor == "mysql":
        sidecar = client_tools_sidecar(shared)
        sidecar.__enter__()
        argv += ["--client-tools-dir", str(shared)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t = threading.Thread(target=writer)
    t.start()
    store = Store(storage.make_client(s3, creds(s3server)), s3, "c1")
    d = admin.dialect
    try:
        delays = []

        def two_files_archived() -> bool:
            if health() is not None:
                delays.append(archive_metrics()["delay_seconds"])
            return len(store.segments()) >= 2 or proc.poll() is not None

        try:
            wait_for(two_files_archived, 60, "two files archived")
        finally:
            stop.set()
            t.join()
        assert proc.poll() is None, proc.stderr.read().decode()
        target = executed(admin)

        def archived_all():
            held = d.parse_gtids("")
            for seg in store.segments():
                held = held.union(d.parse_gtids(seg.gtids_after))
            return held.contains(target)

        wait_for(archived_all, 60, "every transaction committed reaches the bucket")
        assert health() == 200, "ready while it archives"
        # under writes a transaction waits for its file to be closed (--max-delay 1) and uploaded,
        # a bounded time; with everything archived nothing waits
        assert 0 < max(delays) <= 3 * 1 + 5, delays
        wait_for(lambda: archive_metrics()["delay_seconds"] == 0, 30, "the delay 0 once all is archived")
        m = archive_metrics()
        assert m["max_delay_seconds"] == 1 and m["streaming"] == 1, m
        print(f"\narchive delay under writes: max {max(delays):.1f} s over {len(delays)} scrapes")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        finally:
            if sidecar is not None:
                sidecar.__exit__(None, None, None)
            subprocess.run(["umount", "-l", str(spool)], check=False)
    assert proc.returncode == 0, err.decode()
    assert not (spool / "left-from-before").exists(), "the spool is emptied before a stream starts"
    chain_is_whole(store.segments(), d)
    lines = [json.loads(line)["message"] for line in out.decode().splitlines()]
    # the tool said its version before the first stream, and it fits the server's series
    assert any(line.endswith(f"reads the binary logs of {admin.dialect.version}") for line in lines), lines
    assert any(line.startswith(f"streaming the binary logs of {server.name}") for line in lines), lines
    assert any(line.startswith("archived ") for line in lines), lines
    for secret in (PASSWORD, s3server.secret_key):
        assert secret not in out.decode() and secret not in err.decode()
    print(f"\n{flavor}: {written[0]} transactions, {len(store.segments())} files archived")
