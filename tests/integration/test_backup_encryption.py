"""Encrypted backups against a real S3 server (MinIO) and real MariaDB servers on loopback:
nothing readable lands in the bucket, the right key restores, anything else is refused before the
target is touched."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os

import pytest

from mysql_operator import cli
from mysql_operator.backup import crypto
from mysql_operator.backup.crypto import Key
from mysql_operator.backup.manifest import Manifest
from mysql_operator.backup.restore import restore_into
from mysql_operator.backup.restore_types import RestoreError, Source, Target
from mysql_operator.backup.run import run_backup
from tests.support.backups import checksums, creds, objects, request_for, s3cfg, sql, writable
from tests.support.mariadb import ADMIN_USER

KEY = Key(os.urandom(32))
MARKER = "card-4111-1111-1111-1111"  # a value that must never be readable in the bucket


@pytest.fixture(scope="module")
def encrypted(factory, s3server):
    """A source with 3 MiB of rows (several encryption records) and its encrypted backup."""
    (source,) = factory.create(1, prefix="enc")
    writable(source)
    sql(
        source,
        "CREATE DATABASE tenant_private",
        "CREATE TABLE tenant_private.cards (id INT PRIMARY KEY, number VARCHAR(64), pad BLOB) ENGINE=InnoDB",
        f"INSERT INTO tenant_private.cards SELECT seq, '{MARKER}', RANDOM_BYTES(1024) "
        "FROM mysql.seq_1_to_3000",
    )
    bucket = s3server.create_bucket("bk-encrypted")
    s3 = s3cfg(s3server, bucket)
    m = run_backup(
        dataclasses.replace(request_for(source, s3, name="secret"), key=KEY),
        creds(s3server),
        factory.admin_password,
    )
    return source, s3, m


def _get(s3server, bucket: str, key: str) -> bytes:
    return s3server.client().get_object(Bucket=bucket, Key=key)["Body"].read()


def test_nothing_readable_lands_in_the_bucket(s3server, encrypted):
    _, s3, m = encrypted
    assert objects(s3server, s3.bucket) == [
        "backups/c1/secret/backup.sql.zst.enc",
        "backups/c1/secret/manifest.json",
    ]
    data = _get(s3server, s3.bucket, m.data_key)
    manifest = _get(s3server, s3.bucket, "backups/c1/secret/manifest.json")
    assert data.startswith(crypto.MAGIC) and not data.startswith(b"\x28\xb5\x2f\xfd")  # no zstd frame
    assert len(data) > 2 * crypto.RECORD, "the dump must span several encryption records"
    for blob in (data, manifest):
        assert b"tenant_private" not in blob and MARKER.encode() not in blob and KEY.secret not in blob
    stored = json.loads(manifest)
    assert stored["encryption"] == crypto.ALGORITHM and stored["key_id"] == KEY.id
    assert stored["databases"] == [] and stored["sha256"] == hashlib.sha256(data).hexdigest()
    # the database names, the primary's events' statuses and the tables the dump held (issue 49)
    # are in the manifest, sealed with the key
    sealed = json.loads(crypto.unseal(KEY, base64.b64decode(stored["sealed"])))
    assert {k: sealed[k] for k in ("databases", "events")} == {"databases": ["tenant_private"], "events": []}
    assert {name: t["rows"] for name, t in sealed["tables"].items()} == {"tenant_private.cards": 3000}
    assert "events" not in stored and "tables" not in stored


def test_the_right_key_restores_every_row(factory, s3server, encrypted):
    source, s3, m = encrypted
    (target,) = factory.create(1, prefix="enc-ok")
    writable(target)
    result = restore_into(
        Target(target.host, target.port, ADMIN_USER, factory.admin_password),
        Source(s3, "c1/secret", KEY),
        creds(s3server),
    )
    assert checksums(target) == checksums(source)
    assert result.gtid_position == m.gtid_position
    assert sql(target, f"SELECT COUNT(*) FROM tenant_private.cards WHERE number = '{MARKER}'") == ((3000,),)


def _tamper(s3server, s3, m, name, mutate) -> None:
    """What someone with write access to the bucket can do: change the object AND its manifest's
    size and checksum, so that only the encryption can tell."""
    data = mutate(_get(s3server, s3.bucket, m.data_key))
    key = f"backups/c1/{name}/backup.sql.zst.enc"
    forged = dataclasses.replace(
        m, data_key=key, compressed_size=len(data), sha256=hashlib.sha256(data).hexdigest()
    )
    s3server.client().put_object(Bucket=s3.bucket, Key=key, Body=data)
    s3server.client().put_object(
        Bucket=s3.bucket, Key=f"backups/c1/{name}/manifest.json", Body=forged.to_json()
    )


def _flip_in_second_record(data: bytes) -> bytes:
    b = bytearray(data)
    b[crypto.HEADER_SIZE + crypto.RECORD + 100] ^= 0x01
    return bytes(b)


@pytest.mark.parametrize(
    "case, key, mutate, message",
    [
        ("no-key", None, None, "is encrypted .*set spec.restore.encryption.keySecret"),
        ("other-key", Key(bytes(32)), None, f"encrypted with the key whose id is {KEY.id}; the key given"),
        ("altered", KEY, _flip_in_second_record, "fails authentication at byte"),
        ("cut", KEY, lambda d: d[: crypto.HEADER_SIZE + 2 * crypto.RECORD], "fails authentication"),
    ],
)
def test_a_missing_or_other_key_or_a_forged_object_is_refused_before_the_target_is_touched(
    factory, s3server, encrypted, case, key, mutate, message
):
    _, s3, m = encrypted
    path = "c1/secret"
    if mutate is not None:
        _tamper(s3server, s3, m, case, mutate)
        path = f"c1/{case}"
    (target,) = factory.create(1, prefix=f"enc-{case}")
    writable(target)
    before = target.query("SHOW DATABASES")
    with pytest.raises(RestoreError, match=message) as e:
        restore_into(
            Target(target.host, target.port, ADMIN_USER, factory.admin_password),
            Source(s3, path, key),
            creds(s3server),
        )
    assert KEY.secret.hex() not in str(e.value) and base64.b64encode(KEY.secret).decode() not in str(e.value)
    assert target.query("SHOW DATABASES") == before, "something was loaded"
    assert target.query("SELECT @@gtid_binlog_pos")[0][0] == ""


def test_the_job_command_encrypts_a_re_seed_record_and_refuses_a_bad_key(s3server, tmp_path, monkeypatch):
    bucket = s3server.create_bucket("bk-evidence")
    record = tmp_path / "record"
    record.mkdir()
    (record / "transactions.sql").write_text(f"INSERT INTO t VALUES ('{MARKER}');\n")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3server.secret_key)
    argv = [
        "backup", "keep-evidence", "--bucket", bucket, "--endpoint", s3server.endpoint,
        "--force-path-style", "--source", str(record), "--name", "rec1",
        "--encryption-key-from", "Secret 'k' key 'encryption-key' (spec.backup.encryption.keySecret)",
        "--termination-log", str(tmp_path / "result"),
    ]  # fmt: skip
    monkeypatch.setenv("MYSQL_OPERATOR_ENCRYPTION_KEY", base64.b64encode(KEY.secret).decode() + "\n")
    assert cli.main(argv) == 0, (tmp_path / "result").read_text()
    assert objects(s3server, bucket) == ["evidence/rec1/transactions.sql.enc"]
    blob = _get(s3server, bucket, "evidence/rec1/transactions.sql.enc")
    assert MARKER.encode() not in blob
    assert MARKER in crypto.unseal(KEY, blob).decode()

    monkeypatch.setenv("MYSQL_OPERATOR_ENCRYPTION_KEY", "not-a-key")
    assert cli.main([*argv[:-6], "--name", "rec2", *argv[-4:]]) != 0
    result = json.loads((tmp_path / "result").read_text())
    assert result["ok"] is False and "Secret 'k' key 'encryption-key'" in result["message"]
    assert "openssl rand -base64 32" in result["message"] and "not-a-key" not in result["message"]
    assert objects(s3server, bucket) == ["evidence/rec1/transactions.sql.enc"]


def test_a_manifest_from_before_encryption_still_reads():
    old = {
        "cluster": "c", "namespace": "n", "backup": "b", "flavor": "mariadb", "server_version": "10.11.6",
        "gtid_position": "0-1-1", "source_instance": "c-0", "started_at": "t0", "completed_at": "t1",
        "data_key": "p/c/b/backup.sql.zst", "compression": "zstd", "compressed_size": 1,
        "uncompressed_size": 2, "sha256": "0" * 64, "databases": ["app"], "format": 1,
    }  # fmt: skip
    m = Manifest.from_json(json.dumps(old).encode())
    assert m.encryption is None and m.databases == ("app",)
