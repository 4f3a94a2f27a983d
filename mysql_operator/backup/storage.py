"""S3-compatible storage with boto3: streaming multipart upload at constant memory, verified reads.

boto3 is imported by the functions that call S3, never at import: the operator process imports
this module (key names, messages) and must not load an S3 client at all - every S3 call runs in
a Job or the binary-log archiver (docs/security.md; tests/unit/test_operator_process.py).

Every failure leaves as `StorageError` whose message names the bucket/endpoint and the fix, and
never contains a secret (boto3 errors do not quote keys; we never format them in).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from mysql_operator.api import S3, SSE_C, SSE_KMS, ServerSideEncryption

MANIFEST_NAME = "manifest.json"


class StorageError(Exception):
    pass


class NotFound(StorageError):
    pass


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str
    sse_customer_key: bytes | None = None  # the 256-bit key of s3.serverSideEncryption type SSE-C

    def __repr__(self) -> str:  # never print the secrets
        return f"Credentials(access_key_id={self.access_key_id!r}, secret_access_key='***')"


# the S3 operations that write an object's bytes, and those that must carry an SSE-C key
SSE_WRITES = frozenset({"PutObject", "CreateMultipartUpload"})
SSE_C_CALLS = SSE_WRITES | {"UploadPart", "GetObject", "HeadObject"}


def sse_params(sse: ServerSideEncryption | None, customer_key: bytes | None, operation: str) -> dict:
    """Pure: the parameters s3.serverSideEncryption adds to one S3 operation (none to listings
    and deletions). SSE-C's key goes with every read and write of an object's bytes."""
    if sse is None:
        return {}
    if sse.type == SSE_C:
        if operation not in SSE_C_CALLS:
            return {}
        assert customer_key is not None, "SSE-C without its key"
        return {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": customer_key}
    if operation not in SSE_WRITES:
        return {}
    if sse.type == SSE_KMS:
        return {
            "ServerSideEncryption": "aws:kms",
            **({"SSEKMSKeyId": sse.kms_key_id} if sse.kms_key_id else {}),
        }
    return {"ServerSideEncryption": "AES256"}


def join_key(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


def backup_folder(s3: S3, cluster: str, backup: str) -> str:
    """`<prefix>/<cluster>/<backup>`: the data object and manifest.json live here."""
    return join_key(s3.prefix, cluster, backup)


def describe(s3: S3, key: str = "") -> str:
    where = f" at {s3.endpoint}" if s3.endpoint else ""
    return f"s3://{s3.bucket}/{key}{where}"


_MODELS: dict = {}  # botocore's parsed service models and rules, shared by this process's Sessions


def new_session():
    """A boto3 Session of its own (a Session is not thread-safe) whose loader shares the models
    this process parsed already: parsing them for each client took 0.17 s of CPU, 0.04 s shared
    (boto3 1.44; a third of a test process's CPU where tests make many clients). The loader's
    cache is botocore's private `_cache`; tests/unit/test_storage_session.py checks it is used."""
    import boto3

    session = boto3.session.Session()
    session._loader._cache = _MODELS
    return session


def make_client(
    s3: S3, creds: Credentials, connect_timeout: float = 5, read_timeout: float = 60, attempts: int = 3
):
    from botocore.config import Config

    config = Config(
        region_name=s3.region or "us-east-1",
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        retries={"max_attempts": attempts, "mode": "standard"},
        s3={"addressing_style": "path" if s3.force_path_style else "auto"},
        signature_version="s3v4",
        # checksums on every part would hash twice; we hash the object ourselves
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    client = new_session().client(
        "s3",
        endpoint_url=s3.endpoint or None,
        aws_access_key_id=creds.access_key_id,
        aws_secret_access_key=creds.secret_access_key,
        config=config,
    )
    if s3.sse is not None:
        if s3.sse.type == SSE_C and creds.sse_customer_key is None:
            raise StorageError("serverSideEncryption type SSE-C: the Job was given no key")

        def add_sse(params: dict, model, **_) -> None:  # before botocore encodes the SSE-C key
            params.update(sse_params(s3.sse, creds.sse_customer_key, model.name))

        for operation in SSE_C_CALLS:
            client.meta.events.register(f"provide-client-params.s3.{operation}", add_sse)
    return client


def explain(e: BaseException, s3: S3, key: str = "") -> StorageError:
    """A clear StorageError for a boto3/botocore failure."""
    import botocore.exceptions

    where = describe(s3, key)
    if isinstance(e, StorageError):
        return e
    if isinstance(e, botocore.exceptions.ClientError):
        err = e.response.get("Error", {})
        code = str(err.get("Code", ""))
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken"):
            return StorageError(
                f"S3 refused the credentials for {where} ({code}): check the access "
                "key id and secret access key in the credentials Secret"
            )
        sse = _explain_sse(s3, where, code, status, str(err.get("Message", "")))
        if sse is not None:
            return sse
        if code in ("AccessDenied", "403") or status == 403:
            return StorageError(
                f"S3 denied access to {where} ({code or status}): grant the "
                "credentials s3:GetObject/PutObject/DeleteObject/ListBucket on the bucket"
            )
        if code == "NoSuchBucket":
            return NotFound(
                f"bucket {s3.bucket!r} does not exist at {s3.endpoint or 'AWS S3'}: create it "
                "or fix storage.s3.bucket"
            )
        if code in ("NoSuchKey", "404", "NotFound") or status == 404:
            return NotFound(f"no object at {where}")
        if code in ("PreconditionFailed", "412") or status == 412:
            return StorageError(f"{where} changed while it was being read: try again")
        return StorageError(
            f"S3 request on {where} failed: {code or status}: {err.get('Message', '')}".rstrip(": ")
        )
    if isinstance(
        e,
        (
            botocore.exceptions.EndpointConnectionError,
            botocore.exceptions.ConnectTimeoutError,
            botocore.exceptions.ConnectionClosedError,
        ),
    ):
        return StorageError(
            f"cannot reach the S3 endpoint {s3.endpoint or 'of AWS'} for {where}: "
            "check storage.s3.endpoint and the network path"
        )
    if isinstance(e, botocore.exceptions.ReadTimeoutError):
        return StorageError(f"the S3 endpoint stopped answering while working on {where}")
    if isinstance(e, botocore.exceptions.NoCredentialsError):
        return StorageError("no S3 credentials: set the access key id and secret access key")
    if isinstance(e, botocore.exceptions.BotoCoreError):
        return StorageError(f"S3 request on {where} failed: {e}")
    return StorageError(f"S3 request on {where} failed: {type(e).__name__}: {e}")


def _explain_sse(s3: S3, where: str, code: str, status: int | None, message: str) -> StorageError | None:
    """A refusal that s3.serverSideEncryption explains, said so; None for any other."""
    sse = s3.sse
    if sse is None:
        return None
    said = f"{code}: {message}".rstrip(": ")
    if "kms" in code.lower() and sse.type != SSE_C:
        return StorageError(
            f"S3 could not encrypt or decrypt {where} with its KMS key ({said}): check "
            f"s3.serverSideEncryption.kmsKeyId ({sse.kms_key_id or 'the bucket default'}) and that "
            "the credentials may use that key"
        )
    if sse.type == SSE_C and (status == 403 or code == "AccessDenied"):
        return StorageError(
            f"S3 refused {where} with the SSE-C key given ({said}): the object was written with "
            "another key (s3.serverSideEncryption.keySecret), or the credentials lack access to it"
        )
    if code == "InvalidRequest" and "encryption" in message.lower():
        return StorageError(
            f"{where} is not stored as s3.serverSideEncryption (type {sse.type}) says ({said}): "
            "use the settings it was written with"
        )
    return None


def check_bucket(client, s3: S3) -> None:
    """Fail early (before dumping anything) when the bucket or credentials are wrong. A listing,
    not HEAD: HEAD answers carry no error code to tell bad credentials from missing permissions."""
    try:
        client.list_objects_v2(Bucket=s3.bucket, MaxKeys=1)
    except Exception as e:  # noqa: BLE001 - translated
        err = explain(e, s3)
        if isinstance(err, NotFound):
            err = NotFound(
                f"bucket {s3.bucket!r} does not exist at {s3.endpoint or 'AWS S3'}: create it "
                "or fix storage.s3.bucket"
            )
        raise err from None


def put_bytes(client, s3: S3, key: str, data: bytes, content_type: str = "application/json") -> None:
    try:
        client.put_object(Bucket=s3.bucket, Key=key, Body=data, ContentType=content_type)
    except Exception as e:  # noqa: BLE001
        raise explain(e, s3, key) from None


def get_bytes(client, s3: S3, key: str, limit: int = 1024 * 1024) -> bytes:
    try:
        body = client.get_object(Bucket=s3.bucket, Key=key)["Body"]
        data = body.read(limit + 1)
    except Exception as e:  # noqa: BLE001
        raise explain(e, s3, key) from None
    if len(data) > limit:
        raise StorageError(f"{describe(s3, key)} is larger than {limit} bytes: not a manifest")
    return data


def head(client, s3: S3, key: str) -> dict:
    try:
        return client.head_object(Bucket=s3.bucket, Key=key)
    except Exception as e:  # noqa: BLE001
        raise explain(e, s3, key) from None


def iter_object(
    client, s3: S3, key: str, etag: str | None = None, chunk: int = 1024 * 1024
) -> Iterator[bytes]:
    """The object's bytes in chunks; with `etag`, refuse if the object was replaced meanwhile."""
    try:
        kwargs = {"IfMatch": etag} if etag else {}
        body = client.get_object(Bucket=s3.bucket, Key=key, **kwargs)["Body"]
        yield from body.iter_chunks(chunk)
    except Exception as e:  # noqa: BLE001
        if isinstance(e, GeneratorExit):
            raise
        raise explain(e, s3, key) from None


def list_keys(client, s3: S3, prefix: str) -> list[str]:
    try:
        out = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix=prefix):
            out.extend(o["Key"] for o in page.get("Contents", []))
        return out
    except Exception as e:  # noqa: BLE001
        raise explain(e, s3, prefix) from None


def delete_folder(client, s3: S3, folder: str) -> int:
    """Delete every object under `folder/` (manifest first, so a half-deleted backup never looks
    complete). Returns how many were deleted."""
    keys = list_keys(client, s3, folder.rstrip("/") + "/")
    keys.sort(key=lambda k: (not k.endswith("/" + MANIFEST_NAME), k))
    try:
        for k in keys:
            client.delete_object(Bucket=s3.bucket, Key=k)
    except Exception as e:  # noqa: BLE001
        raise explain(e, s3, folder) from None
    return len(keys)
