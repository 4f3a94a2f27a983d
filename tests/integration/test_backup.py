"""Backups and restores against a real S3 server (MinIO) and real MariaDB servers on loopback."""

from __future__ import annotations

import threading

import pymysql
import pytest

from mysql_operator.backup import storage
from mysql_operator.backup.manifest import Manifest
from mysql_operator.backup.restore import restore_into
from mysql_operator.backup.restore_types import RestoreError, Source, Target
from mysql_operator.backup.backup_types import BackupError
from mysql_operator.backup.run import run_backup
from mysql_operator.db.gtid import MariaDBGtids
from tests.support.backups import PART, checksums, creds, objects, request_for, s3cfg, sql, writable
from tests.support.mariadb import ADMIN_USER
from tests.support.ports import free_port


@pytest.fixture
def bucket(s3server, request):
    name = "bk-" + request.node.name.lower().replace("_", "-")[:40].strip("-")
    s3server.create_bucket(name)
    return name


def load_data(server, big_mb=12):
    """Two databases; `big` spans several 5 MiB parts even compressed (random payload)."""
    sql(
        server,
        "CREATE DATABASE app CHARACTER SET utf8mb4",
        "CREATE DATABASE shop",
        "CREATE TABLE app.small (id INT PRIMARY KEY, name VARCHAR(32), note TEXT) ENGINE=InnoDB",
        "INSERT INTO app.small VALUES (1, 'ünïcode ✓', NULL), (2, 'quote''s', 'a\\nb'), (3, '', 'x')",
        "CREATE TABLE app.big (id INT AUTO_INCREMENT PRIMARY KEY, payload BLOB) ENGINE=InnoDB",
        "CREATE TABLE shop.orders (id INT PRIMARY KEY, total DECIMAL(10,2), at DATETIME) ENGINE=InnoDB",
        "INSERT INTO shop.orders SELECT seq, seq * 1.25, '2025-01-01' + INTERVAL seq MINUTE FROM mysql.seq_1_to_5000",
        "CREATE VIEW shop.expensive AS SELECT * FROM shop.orders WHERE total > 100",
        "CREATE PROCEDURE shop.count_orders() SELECT COUNT(*) FROM shop.orders",
        "CREATE TRIGGER shop.no_negative BEFORE INSERT ON shop.orders FOR EACH ROW "
        "SET NEW.total = GREATEST(NEW.total, 0)",
    )
    rows = big_mb * 1024 // 8  # 8 KiB random rows
    sql(server, f"INSERT INTO app.big (payload) SELECT RANDOM_BYTES(1024) FROM mysql.seq_1_to_{rows}")
    # RANDOM_BYTES gives 1 KiB; widen to 8 KiB of incompressible bytes per row
    sql(
        server,
        "UPDATE app.big SET payload = CONCAT(payload, RANDOM_BYTES(1024), RANDOM_BYTES(1024), "
        "RANDOM_BYTES(1024), RANDOM_BYTES(1024), RANDOM_BYTES(1024), RANDOM_BYTES(1024), RANDOM_BYTES(1024))",
    )


def uploads_in_progress(server, bucket) -> int:
    return len(server.client().list_multipart_uploads(Bucket=bucket).get("Uploads", []))


# ------------------------------------------------------------------------------------ round trip


def test_round_trip_equal_by_checksum_table_including_a_table_larger_than_a_part(factory, s3server, bucket):
    source, target = factory.create(2, prefix="rt")
    writable(source)
    load_data(source)
    s3 = s3cfg(s3server, bucket)
    parts_seen = []

    m = run_backup(
        request_for(source, s3), creds(s3server), factory.admin_password, on_part=parts_seen.append
    )

    assert objects(s3server, bucket) == ["backups/c1/b1/backup.sql.zst", "backups/c1/b1/manifest.json"]
    stored = Manifest.from_json(
        s3server.client().get_object(Bucket=bucket, Key="backups/c1/b1/manifest.json")["Body"].read()
    )
    assert stored == m
    assert m.compressed_size > 2 * PART, "the data object must span several parts"
    assert len(parts_seen) >= 2
    head = s3server.client().head_object(Bucket=bucket, Key=m.data_key)
    assert head["ContentLength"] == m.compressed_size
    assert "-" in head["ETag"], "uploaded with multipart"
    assert m.uncompressed_size > m.compressed_size > 0
    assert m.flavor == "mariadb" and m.server_version.startswith(("10.", "11."))
    assert m.source_instance == source.name and m.databases == ("app", "shop")
    executed = source.query("SELECT @@gtid_binlog_pos")[0][0]
    assert m.gtid_position == executed

    writable(target)
    result = restore_into(
        Target(target.host, target.port, ADMIN_USER, factory.admin_password),
        Source(s3, "c1/b1"),
        creds(s3server),
    )

    assert checksums(target) == checksums(source)
    assert result.gtid_position == m.gtid_position
    assert target.query("SELECT @@gtid_slave_pos")[0][0] == m.gtid_position
    assert target.query("SELECT @@gtid_binlog_state")[0][0] == m.gtid_position
    # routines, triggers and views came along
    assert sql(target, "CALL shop.count_orders()") == ((5000,),)
    assert (
        sql(target, "SELECT COUNT(*) FROM shop.expensive")[0][0]
        == sql(source, "SELECT COUNT(*) FROM shop.expensive")[0][0]
    )
    sql(target, "INSERT INTO shop.orders VALUES (999999, -5, NOW())")
    assert sql(target, "SELECT total FROM shop.orders WHERE id=999999")[0][0] == 0
    # the restored server continues the backup's history: a new write follows the position
    state = MariaDBGtids.parse(target.query("SELECT @@gtid_binlog_state")[0][0])
    assert state.contains(MariaDBGtids.parse(m.gtid_position))
    ((domain, _, seq),) = MariaDBGtids.parse(m.gtid_position).entries
    assert target.query("SELECT @@gtid_binlog_pos")[0][0] == f"{domain}-{target.server_id}-{seq + 1}"


def test_backup_during_continuous_writes_is_consistent_at_its_gtid_position(factory, s3server, bucket):
    """Each write is one transaction inserting one row and bumping a counter; the dump must hold
    exactly the rows of the transactions up to its GTID position, and counter == row count."""
    source, target = factory.create(2, prefix="cw")
    writable(source)
    sql(
        source,
        "CREATE DATABASE app",
        "CREATE TABLE app.events (id INT AUTO_INCREMENT PRIMARY KEY, pad VARBINARY(2000)) ENGINE=InnoDB",
        "CREATE TABLE app.counter (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB",
        "INSERT INTO app.counter VALUES (1, 0)",
        "INSERT INTO app.events (pad) SELECT RANDOM_BYTES(1024) FROM mysql.seq_1_to_8000",
    )
    sql(source, "UPDATE app.counter SET n = (SELECT COUNT(*) FROM app.events)")
    base_seq = MariaDBGtids.parse(source.query("SELECT @@gtid_binlog_pos")[0][0])
    stop = threading.Event()
    written = [0]
    errors: list[BaseException] = []

    def writer():
        conn = source.connect(timeout=30)
        try:
            with conn.cursor() as cur:
                while not stop.is_set():
                    cur.execute("BEGIN")
                    cur.execute("INSERT INTO app.events (pad) VALUES (RANDOM_BYTES(512))")
                    cur.execute("UPDATE app.counter SET n = n + 1 WHERE id = 1")
                    cur.execute("COMMIT")
                    written[0] += 1
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        finally:
            conn.close()

    t = threading.Thread(target=writer)
    t.start()
    try:
        from tests.support.wait import wait_for

        wait_for(lambda: written[0] >= 50, 30, "the writer to commit 50 transactions")
        s3 = s3cfg(s3server, bucket)
        m = run_backup(request_for(source, s3), creds(s3server), factory.admin_password)
        wait_for(lambda: written[0] >= 100, 30, "the writer to keep committing after the dump")
    finally:
        stop.set()
        t.join(30)
    assert not errors, errors
    writable(target)
    restore_into(
        Target(target.host, target.port, ADMIN_USER, factory.admin_password),
        Source(s3, "c1/b1"),
        creds(s3server),
    )
    rows = sql(target, "SELECT COUNT(*) FROM app.events")[0][0]
    counter = sql(target, "SELECT n FROM app.counter")[0][0]
    assert rows == counter, "the dump is not one consistent snapshot"
    # GTID position: every transaction after the base one is exactly one writer transaction
    seq_at_backup = MariaDBGtids.parse(m.gtid_position)
    ((domain_server, seq),) = [(k, v) for k, v in seq_at_backup._map().items()]
    base = base_seq._map()[domain_server]
    assert rows == 8000 + (seq - base), f"rows {rows} vs GTID {m.gtid_position} (base {base})"
    total = sql(source, "SELECT COUNT(*) FROM app.events")[0][0]
    assert total > rows, "writes went on after the snapshot"


# ------------------------------------------------------------------------------------ failures


@pytest.fixture(scope="module")
def small_source(factory):
    (server,) = factory.create(1, prefix="src")
    writable(server)
    sql(
        server,
        "CREATE DATABASE app",
        "CREATE TABLE app.t (id INT PRIMARY KEY) ENGINE=InnoDB",
        "INSERT INTO app.t SELECT seq FROM mysql.seq_1_to_100",
    )
    return server


def test_wrong_credentials_clear_error_and_nothing_written(factory, s3server, bucket, small_source):
    bad = storage.Credentials(s3server.access_key, "wrong-secret-value-123")
    with pytest.raises(storage.StorageError, match="refused the credentials") as e:
        run_backup(request_for(small_source, s3cfg(s3server, bucket)), bad, factory.admin_password)
    assert "wrong-secret-value-123" not in str(e.value) and factory.admin_password not in str(e.value)
    assert objects(s3server, bucket) == []


def test_missing_bucket_clear_error(factory, s3server, small_source):
    with pytest.raises(storage.StorageError, match="bucket 'no-such-bucket' does not exist"):
        run_backup(
            request_for(small_source, s3cfg(s3server, "no-such-bucket")),
            creds(s3server),
            factory.admin_password,
        )


def test_unreachable_endpoint_clear_error(factory, s3server, small_source):
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    s3 = s3cfg(s3server, "whatever", endpoint=closed)
    client = storage.make_client(s3, creds(s3server), connect_timeout=1, attempts=1)
    with pytest.raises(storage.StorageError, match=f"cannot reach the S3 endpoint {closed}"):
        run_backup(request_for(small_source, s3), creds(s3server), factory.admin_password, client=client)


def test_dump_failing_mid_stream_leaves_no_object_that_looks_complete(factory, s3server, bucket):
    (server,) = factory.create(1, prefix="crash")
    writable(server)
    load_data(server, big_mb=20)
    s3 = s3cfg(s3server, bucket)

    def crash(part: int) -> None:
        if part == 1:
            server.kill9()  # the server dies while the dump is streaming

    with pytest.raises(BackupError, match=r"mariadb-dump failed on crash-0 \(exit status"):
        run_backup(request_for(server, s3), creds(s3server), factory.admin_password, on_part=crash)
    assert objects(s3server, bucket) == []
    assert uploads_in_progress(s3server, bucket) == 0, "the multipart upload was not aborted"
    with pytest.raises(RestoreError, match="manifest.json is missing"):
        restore_into(Target("127.0.0.1", 1, ADMIN_USER, "x"), Source(s3, "c1/b1"), creds(s3server))


@pytest.fixture(scope="module")
def stored_backup(factory, s3server, small_source):
    bucket = s3server.create_bucket("bk-stored")
    s3 = s3cfg(s3server, bucket)
    m = run_backup(request_for(small_source, s3, name="good"), creds(s3server), factory.admin_password)
    return s3, m


def _copy_backup(s3server, s3, m, name, mutate):
    """Copy the good backup to folder `name` with its data object changed by `mutate`."""
    c = s3server.client()
    data = c.get_object(Bucket=s3.bucket, Key=m.data_key)["Body"].read()
    manifest = c.get_object(Bucket=s3.bucket, Key=m.data_key.rsplit("/", 1)[0] + "/manifest.json")[
        "Body"
    ].read()
    c.put_object(Bucket=s3.bucket, Key=f"backups/c1/{name}/backup.sql.zst", Body=mutate(data))
    c.put_object(
        Bucket=s3.bucket,
        Key=f"backups/c1/{name}/manifest.json",
        Body=manifest.replace(m.data_key.encode(), f"backups/c1/{name}/backup.sql.zst".encode()),
    )


def _flip(data: bytes) -> bytes:
    b = bytearray(data)
    b[len(b) // 2] ^= 0xFF
    return bytes(b)


@pytest.mark.parametrize(
    "name, mutate, message",
    [
        ("corrupted", _flip, "is corrupted; refusing to restore"),
        ("truncated", lambda d: d[: len(d) // 2], "is truncated or replaced; refusing to restore"),
    ],
)
def test_damaged_object_is_refused_before_anything_is_loaded(
    factory, s3server, stored_backup, name, mutate, message
):
    s3, m = stored_backup
    _copy_backup(s3server, s3, m, name, mutate)
    (target,) = factory.create(1, prefix=f"dmg-{name}")
    writable(target)
    before = target.query("SHOW DATABASES")
    with pytest.raises(RestoreError, match=message):
        restore_into(
            Target(target.host, target.port, ADMIN_USER, factory.admin_password),
            Source(s3, f"c1/{name}"),
            creds(s3server),
        )
    assert target.query("SHOW DATABASES") == before, "something was loaded from a damaged backup"
    assert target.query("SELECT @@gtid_binlog_pos")[0][0] == ""


def test_restore_from_a_backup_that_does_not_exist(factory, s3server, stored_backup):
    s3, _ = stored_backup
    with pytest.raises(RestoreError, match=r"no complete backup at s3://bk-stored/backups/c1/nope .*missing"):
        restore_into(Target("127.0.0.1", 1, ADMIN_USER, "x"), Source(s3, "c1/nope"), creds(s3server))


def test_restore_never_overwrites_a_server_that_has_data(factory, s3server, stored_backup, small_source):
    s3, _ = stored_backup
    with pytest.raises(RestoreError, match=r"already has databases \(app\)"):
        restore_into(
            Target(small_source.host, small_source.port, ADMIN_USER, factory.admin_password),
            Source(s3, "c1/good"),
            creds(s3server),
        )
    assert small_source.query("SELECT COUNT(*) FROM app.t")[0][0] == 100


def test_good_backup_restores_after_the_failures(factory, s3server, stored_backup, small_source):
    s3, m = stored_backup
    (target,) = factory.create(1, prefix="good")
    writable(target)
    restore_into(
        Target(target.host, target.port, ADMIN_USER, factory.admin_password),
        Source(s3, f"s3://{s3.bucket}/backups/c1/good"),
        creds(s3server),
    )
    assert checksums(target) == checksums(small_source)


def test_wrong_database_password_is_not_leaked(factory, s3server, bucket, small_source):
    with pytest.raises(BackupError) as e:
        run_backup(request_for(small_source, s3cfg(s3server, bucket)), creds(s3server), "not-the-pw-4711")
    assert "not-the-pw-4711" not in str(e.value)
    assert objects(s3server, bucket) == []
    _ = pymysql
