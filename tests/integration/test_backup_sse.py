"""S3 server-side encryption (s3.serverSideEncryption) against a real MinIO and real MariaDB servers
on loopback: every object a backup writes is stored encrypted the way the spec asks (MinIO's own
answer, not ours), a restore reads it back, and SSE-C objects cannot be read without their key.

MinIO serves SSE-S3 and SSE-KMS with a static KMS key (MINIO_KMS_SECRET_KEY) and SSE-C only over
https, so the SSE-C server here has its own CA, which the Jobs' S3 client is given as
AWS_CA_BUNDLE (how a user points boto3 at a private CA)."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import os

import botocore.exceptions
import pytest

from mysql_operator import cli, tls
from mysql_operator.api import SSE_C, SSE_KMS, SSE_S3, Encryption, ServerSideEncryption
from mysql_operator.backup import storage
from mysql_operator.backup import upload
from mysql_operator.backup.restore import restore_into
from mysql_operator.backup.restore_types import Source, Target
from mysql_operator.backup.run import run_backup
from tests.support import s3 as s3support
from tests.support.backups import checksums, objects, request_for, s3cfg, sql, writable
from tests.support.mariadb import ADMIN_USER

KMS_KEY = "backups-key"
SSE_C_KEY = os.urandom(32)
OTHER_KEY = os.urandom(32)
SSE_C_SPEC = ServerSideEncryption(SSE_C, customer_key=Encryption("sse-key", "sse-c-key"))


def _server(root, **kw) -> s3support.S3Server:
    reason = s3support.missing()
    if reason:
        pytest.skip(reason)
    return s3support.S3Server(root=root, **kw).start()


@pytest.fixture(scope="module")
def kms_server(tmp_path_factory):
    server = _server(tmp_path_factory.mktemp("s3-kms"), kms_key=KMS_KEY)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def https_server(tmp_path_factory):
    certs = tmp_path_factory.mktemp("s3-certs")
    now = dt.datetime.now(dt.timezone.utc)
    ca = tls.new_ca("s3-test", now)
    cert = tls.server_certificate(ca, ["localhost"], now)
    (certs / "CAs").mkdir()
    (certs / "CAs" / "ca.crt").write_text(ca.cert_pem)
    (certs / "public.crt").write_text(cert.cert_pem)
    (certs / "private.key").write_text(cert.key_pem)
    server = _server(tmp_path_factory.mktemp("s3-https"), kms_key=KMS_KEY, certs_dir=certs)
    yield server
    server.stop()


@pytest.fixture
def trust(monkeypatch, https_server):
    """The https server's CA, as a user hands it to the S3 client (boto3 reads AWS_CA_BUNDLE)."""
    monkeypatch.setenv("AWS_CA_BUNDLE", https_server.ca_file)


@pytest.fixture(scope="module")
def source(factory):
    """7 MiB of incompressible rows: the dump spans two multipart parts."""
    (s,) = factory.create(1, prefix="sse")
    writable(s)
    sql(
        s,
        "CREATE DATABASE shop",
        "CREATE TABLE shop.orders (id INT PRIMARY KEY, pad BLOB) ENGINE=InnoDB",
        "INSERT INTO shop.orders SELECT seq, RANDOM_BYTES(1024) FROM mysql.seq_1_to_7000",
    )
    return s


def _creds(server, customer_key: bytes | None = None) -> storage.Credentials:
    return storage.Credentials(server.access_key, server.secret_key, customer_key)


def _restored(factory, server, s3, path, customer_key=None):
    (target,) = factory.create(1, prefix="sse-to")
    writable(target)
    restore_into(
        Target(target.host, target.port, ADMIN_USER, factory.admin_password),
        Source(s3, path),
        _creds(server, customer_key),
    )
    return target


@pytest.mark.parametrize(
    "sse, stored",
    [
        (ServerSideEncryption(SSE_S3), ("AES256", None)),
        (ServerSideEncryption(SSE_KMS), ("aws:kms", KMS_KEY)),  # the bucket's default key
        (ServerSideEncryption(SSE_KMS, kms_key_id=KMS_KEY), ("aws:kms", KMS_KEY)),
    ],
    ids=["sse-s3", "sse-kms-default-key", "sse-kms-named-key"],
)
def test_every_object_is_stored_encrypted_as_asked_and_restores(factory, kms_server, source, sse, stored):
    bucket = kms_server.create_bucket(f"bk-{sse.type.lower()}-{'named' if sse.kms_key_id else 'dflt'}")
    s3 = dataclasses.replace(s3cfg(kms_server, bucket), sse=sse)
    m = run_backup(request_for(source, s3, name="b1"), _creds(kms_server), factory.admin_password)
    keys = objects(kms_server, bucket)
    assert keys == ["backups/c1/b1/backup.sql.zst", "backups/c1/b1/manifest.json"]
    assert m.compressed_size > upload.MIN_PART_SIZE, "the dump must take the multipart path"
    for key in keys:
        head = kms_server.client().head_object(Bucket=bucket, Key=key)
        assert head.get("ServerSideEncryption") == stored[0], (key, head)
        if stored[1]:
            assert head.get("SSEKMSKeyId", "").endswith(stored[1]), (key, head)
    target = _restored(factory, kms_server, s3, "c1/b1")
    assert checksums(target) == checksums(source)


def test_a_kms_key_the_server_does_not_have_fails_the_backup_naming_the_setting(factory, kms_server, source):
    bucket = kms_server.create_bucket("bk-kms-missing")
    s3 = dataclasses.replace(
        s3cfg(kms_server, bucket), sse=ServerSideEncryption(SSE_KMS, kms_key_id="no-such-key")
    )
    with pytest.raises(storage.StorageError, match="serverSideEncryption.kmsKeyId") as e:
        run_backup(request_for(source, s3, name="b1"), _creds(kms_server), factory.admin_password)
    assert "no-such-key" in str(e.value)
    assert objects(kms_server, bucket) == []


def test_sse_c_objects_need_their_key_and_restore_with_it(factory, https_server, trust, source):
    bucket = https_server.create_bucket("bk-sse-c")
    s3 = dataclasses.replace(s3cfg(https_server, bucket), sse=SSE_C_SPEC)
    run_backup(request_for(source, s3, name="b1"), _creds(https_server, SSE_C_KEY), factory.admin_password)
    keys = objects(https_server, bucket)
    assert keys == ["backups/c1/b1/backup.sql.zst", "backups/c1/b1/manifest.json"]
    for key in keys:
        with pytest.raises(botocore.exceptions.ClientError):  # not readable without the key
            https_server.client().get_object(Bucket=bucket, Key=key)
        head = https_server.client().head_object(
            Bucket=bucket, Key=key, SSECustomerAlgorithm="AES256", SSECustomerKey=SSE_C_KEY
        )
        assert head["SSECustomerAlgorithm"] == "AES256"
    target = _restored(factory, https_server, s3, "c1/b1", SSE_C_KEY)
    assert checksums(target) == checksums(source)


def test_a_restore_with_another_sse_c_key_is_refused_before_the_target_is_touched(
    factory, https_server, trust, source
):
    bucket = https_server.create_bucket("bk-sse-c-other")
    s3 = dataclasses.replace(s3cfg(https_server, bucket), sse=SSE_C_SPEC)
    run_backup(request_for(source, s3, name="b1"), _creds(https_server, SSE_C_KEY), factory.admin_password)
    (target,) = factory.create(1, prefix="sse-other")
    writable(target)
    before = target.query("SHOW DATABASES")
    with pytest.raises(storage.StorageError, match="another key .s3.serverSideEncryption.keySecret") as e:
        restore_into(
            Target(target.host, target.port, ADMIN_USER, factory.admin_password),
            Source(s3, "c1/b1"),
            _creds(https_server, OTHER_KEY),
        )
    for key in (SSE_C_KEY, OTHER_KEY):
        assert key.hex() not in str(e.value) and base64.b64encode(key).decode() not in str(e.value)
    assert target.query("SHOW DATABASES") == before, "something was loaded"


def test_the_job_command_takes_the_sse_c_key_from_its_environment_only(
    https_server, trust, tmp_path, monkeypatch
):
    bucket = https_server.create_bucket("bk-sse-c-job")
    record = tmp_path / "record"
    record.mkdir()
    (record / "transactions.sql").write_text("INSERT INTO t VALUES (1);\n")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", https_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", https_server.secret_key)
    where = "Secret 'sse-key' key 'sse-c-key' (s3.serverSideEncryption.keySecret)"
    result = tmp_path / "result"
    argv = [
        "backup", "keep-evidence", "--bucket", bucket, "--endpoint", https_server.endpoint,
        "--force-path-style", "--sse", "SSE-C", "--sse-c-key-from", where,
        "--source", str(record), "--termination-log", str(result), "--name",
    ]  # fmt: skip
    assert cli.main([*argv, "rec0"]) != 0  # no key in the environment
    assert "MYSQL_OPERATOR_SSE_C_KEY" in json.loads(result.read_text())["message"]

    monkeypatch.setenv("MYSQL_OPERATOR_SSE_C_KEY", "not-a-key")
    assert cli.main([*argv, "rec1"]) != 0
    message = json.loads(result.read_text())["message"]
    assert where in message and "not-a-key" not in message

    monkeypatch.setenv("MYSQL_OPERATOR_SSE_C_KEY", base64.b64encode(SSE_C_KEY).decode())
    assert cli.main([*argv, "rec2"]) == 0, result.read_text()
    assert objects(https_server, bucket) == ["evidence/rec2/transactions.sql"]
    body = (
        https_server.client()
        .get_object(
            Bucket=bucket,
            Key="evidence/rec2/transactions.sql",
            SSECustomerAlgorithm="AES256",
            SSECustomerKey=SSE_C_KEY,
        )["Body"]
        .read()
    )
    assert body == b"INSERT INTO t VALUES (1);\n"
