"""Where backups go and how they are encrypted, as spec fields: the S3 location (bucket, prefix,
endpoint, region, credentials), server-side encryption, the key of client-side encryption."""

from __future__ import annotations

import re
from typing import Any


from .types import (
    SSE_C,
    SSE_KMS,
    SSE_S3,
    Encryption,
    S3,
    SSE_C_KEY,
    SecretKeys,
    ServerSideEncryption,
    SpecError,
    DNS_SUBDOMAIN_RE,
)
from .fields import (
    read_bool,
    read_object,
    read_str,
)


def read_s3(value: Any, path: str, with_path: bool = False) -> S3:
    allowed = {
        "bucket",
        "prefix",
        "endpoint",
        "region",
        "forcePathStyle",
        "credentialsSecret",
        "serverSideEncryption",
    }
    d = read_object(value, path, allowed | ({"path"} if with_path else set()))
    cs = read_object(
        d.get("credentialsSecret"),
        f"{path}.credentialsSecret",
        {"name", "accessKeyIdKey", "secretAccessKeyKey"},
    )
    cpath = f"{path}.credentialsSecret"
    s3 = S3(
        bucket=read_str(
            d,
            "bucket",
            path,
            required=True,
            max_len=63,
            pattern=re.compile(r"^[a-z0-9][a-z0-9.-]*[a-z0-9]$"),
            hint="S3 bucket names use lowercase letters, digits, '.' and '-'",
        ),
        prefix=read_str(d, "prefix", path, "", max_len=512),
        endpoint=read_str(
            d,
            "endpoint",
            path,
            max_len=512,
            pattern=re.compile(r"^https?://[^/ ]+(/.*)?$"),
            hint="use a URL such as http://minio.example:9000",
        ),
        region=read_str(d, "region", path, max_len=64),
        force_path_style=read_bool(d, "forcePathStyle", path, False),
        credentials_secret=SecretKeys(
            name=read_str(cs, "name", cpath, required=True),
            access_key_id_key=read_str(cs, "accessKeyIdKey", cpath, "AWS_ACCESS_KEY_ID"),
            secret_access_key_key=read_str(cs, "secretAccessKeyKey", cpath, "AWS_SECRET_ACCESS_KEY"),
        ),
        path=read_str(d, "path", path, required=True, max_len=1024) if with_path else None,
        sse=read_sse(d.get("serverSideEncryption"), f"{path}.serverSideEncryption"),
    )
    if s3.sse and s3.sse.type == SSE_C and s3.endpoint and not s3.endpoint.startswith("https://"):
        raise SpecError(
            f"{path}.endpoint",
            "serverSideEncryption type SSE-C sends the key with every request: the endpoint must be https://",
        )
    return s3


def read_sse(value: Any, path: str) -> ServerSideEncryption | None:
    if value is None:
        return None
    d = read_object(value, path, {"type", "kmsKeyId", "keySecret"})
    kind = read_str(d, "type", path, required=True)
    if kind not in (SSE_S3, SSE_KMS, SSE_C):
        raise SpecError(f"{path}.type", f"must be {SSE_S3}, {SSE_KMS} or {SSE_C}, not {kind!r}")
    if d.get("kmsKeyId") is not None and kind != SSE_KMS:
        raise SpecError(f"{path}.kmsKeyId", f"is only for type {SSE_KMS}: remove it")
    if (d.get("keySecret") is None) == (kind == SSE_C):
        raise SpecError(
            f"{path}.keySecret",
            "is required with type SSE-C: the Secret holding the key (32 random bytes, base64)"
            if kind == SSE_C
            else "is only for type SSE-C: remove it",
        )
    return ServerSideEncryption(
        type=kind,
        kms_key_id=read_str(d, "kmsKeyId", path, max_len=2048),
        customer_key=read_key_secret(d, path, SSE_C_KEY) if kind == SSE_C else None,
    )


def read_encryption(value: Any, path: str) -> Encryption | None:
    if value is None:
        return None
    return read_key_secret(read_object(value, path, {"keySecret"}), path, "encryption-key")


def read_key_secret(d: dict, path: str, default_key: str) -> Encryption:
    """`<path>.keySecret`: the Secret and key of a 256-bit key."""
    kpath = f"{path}.keySecret"
    if d.get("keySecret") is None:
        raise SpecError(kpath, "is required: the Secret holding the key (32 random bytes, base64)")
    ks = read_object(d["keySecret"], kpath, {"name", "key"})
    return Encryption(
        secret=read_str(ks, "name", kpath, required=True, pattern=DNS_SUBDOMAIN_RE, hint="a Secret name"),
        key=read_str(
            ks,
            "key",
            kpath,
            default_key,
            max_len=253,
            pattern=re.compile(r"^[-._a-zA-Z0-9]+$"),
            hint="a Secret key uses letters, digits, '-', '_' and '.'",
        ),
    )
