"""Backups against a real S3 server for tests: its settings and keys, a request, SQL, checksums."""

from __future__ import annotations

import hashlib
import io
import subprocess
from collections.abc import Callable

from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import storage
from mysql_operator.backup import upload
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.crypto import Decryptor, Encryptor, Key
from mysql_operator.backup.manifest import Manifest
from mysql_operator.backup.backup_types import BackupRequest, Candidate
from tests.support.mariadb import BACKUP_USER

PART = upload.MIN_PART_SIZE  # 5 MiB: the S3 minimum, so a modest table spans several parts


def s3cfg(server, bucket, endpoint=None) -> S3:
    return S3(
        bucket=bucket,
        credentials_secret=SecretKeys("unused"),
        prefix="backups",
        endpoint=endpoint or server.endpoint,
        force_path_style=True,
    )


def creds(server) -> storage.Credentials:
    return storage.Credentials(server.access_key, server.secret_key)


def request_for(server, s3: S3, name="b1", part_size=PART, cluster="c1") -> BackupRequest:
    """Backups run as the backup account (its privileges only; the factory's password)."""
    return BackupRequest(
        cluster=cluster,
        namespace="ns",
        backup=name,
        s3=s3,
        part_size=part_size,
        candidates=(Candidate(server.name, Endpoint(server.host, server.port, BACKUP_USER)),),
    )


def sql(server, *statements, database=None):
    conn = server.connect(database=database, timeout=120)
    try:
        with conn.cursor() as cur:
            for s in statements:
                cur.execute(s)
            return cur.fetchall()
    finally:
        conn.close()


def writable(server):
    sql(server, "SET GLOBAL read_only=OFF")
    return server


def checksums(server) -> dict[str, int]:
    tables = sql(
        server,
        "SELECT CONCAT(table_schema, '.', table_name) FROM information_schema.tables "
        "WHERE table_type='BASE TABLE' AND table_schema NOT IN "
        "('mysql','information_schema','performance_schema','sys') ORDER BY 1",
    )
    names = [t[0] for t in tables]
    assert names, "no tables to compare"
    rows = sql(server, "CHECKSUM TABLE " + ", ".join(names) + " EXTENDED")
    return {name: int(value) for name, value in rows}


def objects(server, bucket) -> list[str]:
    r = server.client().list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in r.get("Contents", []))


def hostile_backup(
    s3server, bucket: str, folder: str, statements: str, flavor: str = "mariadb", version: str = "10.11.0"
) -> str:
    """Store a complete, checksum-valid backup of a `flavor` server whose dump is `statements`;
    returns its folder."""
    data = subprocess.run(
        ["zstd", "-q", "-c"], input=statements.encode(), capture_output=True, check=True
    ).stdout
    key = f"backups/{folder}/backup.sql.zst"
    m = Manifest(
        cluster="evil",
        namespace="tenant",
        backup=folder,
        flavor=flavor,
        server_version=version,
        gtid_position="0-1-1" if flavor == "mariadb" else None,
        source_instance="evil-0",
        started_at="2026-11-23T00:00:00Z",
        completed_at="2026-11-23T00:00:01Z",
        data_key=key,
        compression="zstd",
        compressed_size=len(data),
        uncompressed_size=len(statements),
        sha256=hashlib.sha256(data).hexdigest(),
        databases=("loot",),
    )
    c = s3server.client()
    c.put_object(Bucket=bucket, Key=key, Body=data)
    c.put_object(Bucket=bucket, Key=f"backups/{folder}/manifest.json", Body=m.to_json())
    return folder


def without_inserts(dump: bytes, table: bytes) -> bytes:
    """The dump without the INSERT statements of `table` (their rows may follow on lines of their
    own: MariaDB 11), as if its rows had been lost."""
    out, dropping = [], False
    for line in dump.split(b"\n"):
        if line.startswith(b"INSERT INTO `" + table + b"`"):
            dropping = True
        if not dropping:
            out.append(line)
        elif line.rstrip().endswith(b";"):
            dropping = False
    return b"\n".join(out)


def edited_dump(stored: bytes, key: Key | None, edit: Callable[[bytes], bytes]) -> tuple[bytes, int]:
    """A logical backup's data object as stored (zstd, then encrypted with `key` if given) with its
    dump changed by `edit`: (the object to store instead, the changed dump's size)."""
    if key is not None:
        d = Decryptor(key)
        stored = b"".join([*d.feed(stored), d.finish()])
    dump = subprocess.run(["zstd", "-dc"], input=stored, capture_output=True, check=True).stdout
    changed = edit(dump)
    assert changed != dump, "the edit changed nothing"
    packed = subprocess.run(["zstd", "-q", "-c"], input=changed, capture_output=True, check=True).stdout
    if key is not None:
        packed = io.BufferedReader(_Reader(Encryptor(io.BytesIO(packed).readinto, key))).read()
    return packed, len(changed)


class _Reader(io.RawIOBase):
    def __init__(self, source):
        self.source = source

    def readable(self) -> bool:
        return True

    def readinto(self, view) -> int:
        return self.source.readinto(view)
