"""s3.serverSideEncryption, the pure half: what each S3 operation is sent, which Job gets which
argument and which Secret, and the request the S3 client really builds (captured before it is
sent). The servers' side is tests/integration/test_backup_sse.py (real MinIO)."""

from __future__ import annotations

import argparse
import base64
import hashlib

import pytest

from mysql_operator.api import SSE_C, SSE_KMS, SSE_S3, Encryption, ServerSideEncryption, parse, parse_backup
from mysql_operator.backup import storage
from mysql_operator.cli_backup import register
from mysql_operator.job_commands import s3_credentials, s3_from
from mysql_operator.manifests.archiver import binlog_archiver
from mysql_operator.manifests.backup_jobs import backup_job, delete_data_job, evidence_job
from mysql_operator.manifests.restore_jobs import restore_job
from tests.support.specs import body

KEY = bytes(range(32))
SSE_C_SPEC = ServerSideEncryption(SSE_C, customer_key=Encryption("sse-key", "sse-c-key"))


def _cluster(sse: dict, endpoint: str = "https://s3.example:9000") -> dict:
    s3 = {"bucket": "backups", "endpoint": endpoint, "credentialsSecret": {"name": "s3-creds"}}
    storage = {"s3": {**s3, "serverSideEncryption": sse}}
    return body(
        {"instances": 2, "backup": {"storage": storage, "binlogs": {"enabled": True}}},
        "shop",
        "prod",
        uid="u1",
    )


@pytest.mark.parametrize(
    "sse, operation, params",
    [
        (None, "PutObject", {}),
        (ServerSideEncryption(SSE_S3), "PutObject", {"ServerSideEncryption": "AES256"}),
        (ServerSideEncryption(SSE_S3), "CreateMultipartUpload", {"ServerSideEncryption": "AES256"}),
        (ServerSideEncryption(SSE_S3), "UploadPart", {}),
        (ServerSideEncryption(SSE_S3), "GetObject", {}),
        (ServerSideEncryption(SSE_KMS), "PutObject", {"ServerSideEncryption": "aws:kms"}),
        (
            ServerSideEncryption(SSE_KMS, kms_key_id="alias/backups"),
            "CreateMultipartUpload",
            {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "alias/backups"},
        ),
        (ServerSideEncryption(SSE_KMS, kms_key_id="alias/backups"), "HeadObject", {}),
        *[
            (SSE_C_SPEC, op, {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": KEY})
            for op in ("PutObject", "CreateMultipartUpload", "UploadPart", "GetObject", "HeadObject")
        ],
        (SSE_C_SPEC, "ListObjectsV2", {}),
        (SSE_C_SPEC, "DeleteObjects", {}),
    ],
)
def test_each_operation_gets_what_its_encryption_needs(sse, operation, params):
    assert storage.sse_params(sse, KEY, operation) == params


JOBS = {
    "backup": lambda c: backup_job(
        c,
        parse_backup(
            {"metadata": {"name": "b1", "namespace": "prod"}, "spec": {"clusterRef": {"name": "shop"}}}
        ),
        c.spec.backup.s3,
        "img",
    ),
    "restore": lambda c: restore_job(c, c.spec.backup.s3, "shop/b1", "img"),
    "delete": lambda c: delete_data_job(c, "b1", c.spec.backup.s3, "shop/b1", "img"),
    "evidence": lambda c: evidence_job(c, "rec", c.spec.backup.s3, "img"),
    "archiver": lambda c: binlog_archiver(c, "img"),
}


def _main(obj: dict) -> dict:
    (ctr,) = obj["spec"]["template"]["spec"]["containers"]
    return ctr


def _env(ctr: dict) -> dict:
    return {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in ctr["env"]}


@pytest.mark.parametrize("kind", JOBS)
def test_every_job_gets_the_sse_c_key_from_its_secret_and_only_its_name_in_arguments(kind):
    ctr = _main(JOBS[kind](parse(_cluster({"type": "SSE-C", "keySecret": {"name": "sse-key"}}))))
    args = ctr["args"]
    assert args[args.index("--sse") + 1] == "SSE-C"
    assert args[args.index("--sse-c-key-from") + 1] == (
        "Secret 'sse-key' key 'sse-c-key' (s3.serverSideEncryption.keySecret)"
    )
    assert _env(ctr)["MYSQL_OPERATOR_SSE_C_KEY"] == {"name": "sse-key", "key": "sse-c-key"}
    assert _env(ctr)["AWS_SECRET_ACCESS_KEY"] == {"name": "s3-creds", "key": "AWS_SECRET_ACCESS_KEY"}
    assert "--sse-kms-key-id" not in args


@pytest.mark.parametrize("kind", JOBS)
def test_sse_kms_is_arguments_only_and_no_encryption_adds_nothing(kind):
    kms = _main(JOBS[kind](parse(_cluster({"type": "SSE-KMS", "kmsKeyId": "alias/backups"}))))
    assert kms["args"][kms["args"].index("--sse") + 1] == "SSE-KMS"
    assert kms["args"][kms["args"].index("--sse-kms-key-id") + 1] == "alias/backups"
    assert "MYSQL_OPERATOR_SSE_C_KEY" not in _env(kms)
    body = _cluster({})
    del body["spec"]["backup"]["storage"]["s3"]["serverSideEncryption"]
    plain = _main(JOBS[kind](parse(body)))
    assert not any(a.startswith("--sse") for a in plain["args"])
    assert "MYSQL_OPERATOR_SSE_C_KEY" not in _env(plain)


def _job_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(argv)


def test_the_job_rebuilds_the_setting_and_reads_the_key_from_its_environment():
    c = parse(_cluster({"type": "SSE-C", "keySecret": {"name": "sse-key"}}))
    args = _job_args(_main(JOBS["delete"](c))["args"])
    assert s3_from(args).sse == ServerSideEncryption(SSE_C)
    env = {
        "AWS_ACCESS_KEY_ID": "ak",
        "AWS_SECRET_ACCESS_KEY": "sk",
        "MYSQL_OPERATOR_SSE_C_KEY": base64.b64encode(KEY).decode() + "\n",
    }
    creds = s3_credentials(args, env)
    assert creds.sse_customer_key == KEY and KEY.hex() not in repr(creds)
    with pytest.raises(Exception, match="Secret 'sse-key' key 'sse-c-key'"):
        s3_credentials(args, {**env, "MYSQL_OPERATOR_SSE_C_KEY": "short"})


class _Sent(Exception):
    pass


def _headers_sent(s3, creds, call) -> dict:
    """The headers of the one request `call` makes with make_client's client, stopped before it
    leaves the process."""
    client = storage.make_client(s3, creds, attempts=1)
    seen: dict = {}

    def capture(request, **_):
        seen.update(request.headers)
        raise _Sent

    client.meta.events.register("before-send.s3.*", capture)
    with pytest.raises(_Sent):
        call(client)
    return {k.lower(): (v.decode() if isinstance(v, bytes) else v) for k, v in seen.items()}


def test_the_client_sends_the_headers_s3_defines():
    base = dict(bucket="backups", endpoint="https://s3.example", credentials_secret=None)
    kms = storage.S3(**base, sse=ServerSideEncryption(SSE_KMS, kms_key_id="alias/backups"))
    sent = _headers_sent(
        kms, storage.Credentials("ak", "sk"), lambda c: c.put_object(Bucket="backups", Key="k", Body=b"x")
    )
    assert sent["x-amz-server-side-encryption"] == "aws:kms"
    assert sent["x-amz-server-side-encryption-aws-kms-key-id"] == "alias/backups"

    ssec = storage.S3(**base, sse=ServerSideEncryption(SSE_C))
    for call in (
        lambda c: c.upload_part(Bucket="backups", Key="k", UploadId="u", PartNumber=1, Body=b"x"),
        lambda c: c.get_object(Bucket="backups", Key="k"),
    ):
        sent = _headers_sent(ssec, storage.Credentials("ak", "sk", KEY), call)
        assert sent["x-amz-server-side-encryption-customer-algorithm"] == "AES256"
        assert sent["x-amz-server-side-encryption-customer-key"] == base64.b64encode(KEY).decode()
        assert (
            sent["x-amz-server-side-encryption-customer-key-md5"]
            == base64.b64encode(hashlib.md5(KEY).digest()).decode()
        )
    sent = _headers_sent(
        ssec, storage.Credentials("ak", "sk", KEY), lambda c: c.list_objects_v2(Bucket="backups")
    )
    assert not any("server-side-encryption" in h for h in sent)


def test_sse_c_without_a_key_makes_no_client():
    s3 = storage.S3(bucket="backups", credentials_secret=None, sse=ServerSideEncryption(SSE_C))
    with pytest.raises(storage.StorageError, match="SSE-C"):
        storage.make_client(s3, storage.Credentials("ak", "sk"))


@pytest.mark.parametrize(
    "code, status, message, said",
    [
        ("InvalidAccessKeyId", 403, "no such key id", "refused the credentials"),  # not the SSE-C key
        (
            "AccessDenied",
            403,
            "Access Denied.",
            "written with another key (s3.serverSideEncryption.keySecret)",
        ),
        ("403", 403, "Forbidden", "written with another key"),  # a HEAD: no body, no code
        (
            "InvalidRequest",
            400,
            "The encryption parameters are not applicable to this object.",
            "not stored as",
        ),
        ("kms:KeyNotFound", 404, "key with given key ID does not exist", None),  # only with SSE-KMS
        ("NoSuchKey", 404, "", "no object at"),
    ],
)
def test_s3_refusals_name_the_encryption_setting_only_when_it_explains_them(code, status, message, said):
    import botocore.exceptions

    error = botocore.exceptions.ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "GetObject",
    )
    s3 = storage.S3(bucket="backups", credentials_secret=None, sse=SSE_C_SPEC)
    text = str(storage.explain(error, s3, "p/c/b/manifest.json"))
    if said is None:
        assert "kmsKeyId" not in text
    else:
        assert said in text, text
    kms = storage.S3(bucket="backups", credentials_secret=None, sse=ServerSideEncryption(SSE_KMS, "alias/b"))
    if code.startswith("kms:"):
        assert "s3.serverSideEncryption.kmsKeyId (alias/b)" in str(storage.explain(error, kms, "k"))
    plain = storage.S3(bucket="backups", credentials_secret=None)
    assert "serverSideEncryption" not in str(storage.explain(error, plain, "k"))
