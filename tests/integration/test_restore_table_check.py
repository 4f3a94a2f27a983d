"""Issue 49, the check a restore drill makes, against real MariaDB servers, their own dump tool and a
real S3 server: a logical backup records each table's rows as its dump held them (row count and
an order-independent digest, read from the dump as it streams); a restore asked to check compares
the loaded tables with them, and names each table that differs when the backup's dump was
altered (rows of a table lost, a value changed) - though its checksum matches its manifest."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess

import pytest

from mysql_operator.backup.crypto import Key
from mysql_operator.backup.manifest import Manifest
from mysql_operator.backup.restore import restore_into
from mysql_operator.backup.restore_types import RestoreError, Source, Target
from mysql_operator.backup.run import run_backup
from mysql_operator.backup.table_check import recorded_tables
from tests.support.backups import creds, request_for, s3cfg, sql, without_inserts, writable
from tests.support.mariadb import ADMIN_USER

# what the source holds, table by table (named as the digests name them): the rows each must have
TABLES = {"app.small": 4, "app.no_key": 3, "app.empty": 0, "shop.orders": 3000, "shop.odd`name": 2}


def quoted(table: str) -> str:
    return ".".join(f"`{part.replace('`', '``')}`" for part in table.split(".", 1))


@pytest.fixture(scope="module")
def source(factory):
    (server,) = factory.create(1, prefix="tc")
    writable(server)
    sql(
        server,
        "CREATE DATABASE app CHARACTER SET utf8mb4",
        "CREATE DATABASE shop CHARACTER SET utf8mb4",
        "CREATE TABLE app.small (id INT PRIMARY KEY, name VARCHAR(32), note TEXT, b BLOB)",
        # quotes, a row separator inside a string, a newline, NULL, binary
        "INSERT INTO app.small VALUES (1, 'ünïcode ✓', NULL, NULL), (2, 'quote''s', 'a\\nb', 0x00FF), "
        "(3, '),(', '(x)', ''), (4, '\\\\', ';', 0x27)",
        "CREATE TABLE app.no_key (v INT) ENGINE=InnoDB",  # no primary key: rows in insertion order
        "INSERT INTO app.no_key VALUES (3), (1), (2)",
        "CREATE TABLE app.empty (id INT)",
        "CREATE TABLE shop.orders (id INT PRIMARY KEY, total DECIMAL(10,2), at DATETIME, f DOUBLE)",
        "INSERT INTO shop.orders SELECT seq, seq * 1.25, '2025-01-01' + INTERVAL seq MINUTE, seq / 7 "
        "FROM mysql.seq_1_to_3000",
        f"CREATE TABLE {quoted('shop.odd`name')} (v VARCHAR(8))",
        f"INSERT INTO {quoted('shop.odd`name')} VALUES ('a'), ('b')",
        "CREATE VIEW shop.expensive AS SELECT * FROM shop.orders WHERE total > 100",
    )
    return server


def _restore(factory, s3server, s3, folder: str, prefix: str, key: Key | None = None):
    (target,) = factory.create(1, prefix=prefix)
    writable(target)
    return restore_into(
        Target(target.host, target.port, ADMIN_USER, factory.admin_password),
        Source(s3, folder, key=key),
        creds(s3server),
        check_tables=True,
    )


def _altered(s3server, s3, m: Manifest, folder: str, edit) -> str:
    """Store the backup `m` again as `folder`, its dump changed by `edit`, its manifest's checksum
    and sizes matching the changed object (its recorded tables as they were)."""
    c = s3server.client()
    data = c.get_object(Bucket=s3.bucket, Key=m.data_key)["Body"].read()
    dump = subprocess.run(["zstd", "-dc"], input=data, capture_output=True, check=True).stdout
    changed = edit(dump)
    assert changed != dump, "the edit changed nothing"
    packed = subprocess.run(["zstd", "-q", "-c"], input=changed, capture_output=True, check=True).stdout
    key = f"backups/{folder}/backup.sql.zst"
    c.put_object(Bucket=s3.bucket, Key=key, Body=packed)
    moved = dataclasses.replace(
        m,
        data_key=key,
        compressed_size=len(packed),
        uncompressed_size=len(changed),
        sha256=hashlib.sha256(packed).hexdigest(),
    )
    c.put_object(Bucket=s3.bucket, Key=f"backups/{folder}/manifest.json", Body=moved.to_json())
    return folder


@pytest.fixture(scope="module")
def backup(factory, s3server, source):
    s3 = s3cfg(s3server, s3server.create_bucket("tc-backups"))
    return s3, run_backup(request_for(source, s3), creds(s3server), factory.admin_password)


def test_a_backup_records_every_table_with_its_rows_and_a_restore_finds_them_equal(
    factory, s3server, source, backup
):
    s3, m = backup
    assert m.tables_note is None
    assert {name: t["rows"] for name, t in (m.tables or {}).items()} == TABLES
    counted = {n: source.query(f"SELECT COUNT(*) FROM {quoted(n)}")[0][0] for n in TABLES}
    assert counted == TABLES  # what the server holds, as the digests counted it

    result = _restore(factory, s3server, s3, "c1/b1", "tc-ok")

    assert result.table_check is not None and result.table_check.passed
    assert (result.table_check.tables, result.table_check.rows) == (len(TABLES), sum(TABLES.values()))
    # where it spent its time, phase by phase
    assert list(result.phases) == ["verify", "load", "settle", "checkTables"]
    assert all(s >= 0 for s in result.phases.values())


@pytest.mark.parametrize(
    "name, edit, message",
    [
        (
            "rows-lost",
            lambda d: without_inserts(d, b"orders"),
            "shop.orders: 0 rows restored, the backup has 3000",
        ),
        (
            "value-changed",
            lambda d: d.replace(b"(2,'quote\\'s',", b"(2,'quote\\'z',", 1),
            "app.small: 4 rows as in the backup, but other values",
        ),
        (
            "table-gone",
            lambda d: d.replace(b"`no_key`", b"`no_key_renamed`"),
            "app.no_key: missing (the backup has 3 rows)",
        ),
    ],
)
def test_a_dump_altered_after_the_backup_fails_the_check_naming_the_table(
    factory, s3server, backup, name, edit, message
):
    s3, m = backup
    folder = _altered(s3server, s3, m, f"c1/{name}", edit)
    with pytest.raises(RestoreError, match="the restored tables differ from those the backup recorded") as e:
        _restore(factory, s3server, s3, folder, f"tc-{name}")
    assert message in str(e.value)


def test_an_encrypted_backup_keeps_its_tables_sealed_and_is_checked_with_its_key(
    factory, s3server, source, backup
):
    s3, _ = backup
    key = Key(os.urandom(32))
    req = dataclasses.replace(request_for(source, s3, name="sealed"), key=key)
    m = run_backup(req, creds(s3server), factory.admin_password)

    assert m.tables is None and m.sealed  # the table names are the tenant's: sealed like its databases
    assert set(recorded_tables(m, key) or {}) == set(TABLES)

    result = _restore(factory, s3server, s3, "c1/sealed", "tc-sealed", key=key)

    assert result.table_check is not None and result.table_check.passed
