"""What a restore reads from the bucket, checked before a byte reaches a server: the manifest, the
data object verified (size, sha256, the key of an encrypted backup), the base chosen for a point in
time and the archived binary log segments that replay to it."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any, Callable, Iterator

from mysql_operator import clock
from mysql_operator.api import S3
from mysql_operator.backup import pitr, storage
from mysql_operator.backup.binlog_archive import Segment, Store, backup_bases
from mysql_operator.backup.crypto import ALGORITHM, CryptoError, Decryptor, Key, wrong_key
from mysql_operator.backup.manifest import Manifest, ManifestError
from mysql_operator.db.gtid import MySQLGtidSet, parser_for
from mysql_operator.backup.restore_types import RestoreError, Source


def manifest_key(source: Source) -> str:
    """Pure: the manifest's key for a spec.restore.s3.path or a status.location."""
    path = source.path
    if path.startswith("s3://"):  # a MySQLBackup's status.location: s3://bucket/key
        bucket, _, path = path[len("s3://") :].partition("/")
        if bucket != source.s3.bucket:
            raise RestoreError(f"backup location {source.path!r} is not in bucket {source.s3.bucket!r}")
        key = path.strip("/")
    else:
        key = storage.join_key(source.s3.prefix, path)
    last = key.rsplit("/", 1)[-1]
    if last == storage.MANIFEST_NAME:
        return key
    if last.startswith("backup.sql"):
        return key.rsplit("/", 1)[0] + "/" + storage.MANIFEST_NAME
    return f"{key}/{storage.MANIFEST_NAME}"


def read_manifest(client, source: Source, physical: bool = False) -> Manifest:
    """The backup's manifest; a physical backup's only when `physical` (restore_job.restore_all's path for
    it), else refused saying so."""
    key = manifest_key(source)
    try:
        data = storage.get_bytes(client, source.s3, key)
    except storage.NotFound:
        raise RestoreError(
            f"no complete backup at {storage.describe(source.s3, key.rsplit('/', 1)[0])}: "
            f"{storage.MANIFEST_NAME} is missing (wrong path, or the backup never "
            "finished)"
        ) from None
    try:
        m = Manifest.from_json(data, storage.describe(source.s3, key))
    except ManifestError as e:
        raise RestoreError(str(e)) from None
    if m.method != "logical" and not physical:
        raise RestoreError(
            f"{storage.describe(source.s3, key)}: a {m.method} backup (a MySQL data directory copied "
            "by CLONE, as tar) is restored by the restore Job's physical path, not into one server"
        )
    return m


def check_key(s3: S3, m: Manifest, key: Key | None) -> None:
    """Refuse, from the manifest alone, an encrypted backup without its key or with another one."""
    where = f"the backup {storage.describe(s3, m.data_key.rsplit('/', 1)[0])}"
    if m.encryption is None:
        return
    if m.encryption != ALGORITHM:
        raise RestoreError(f"{where} is encrypted with {m.encryption}: upgrade the operator to restore it")
    if key is None:
        raise RestoreError(
            f"{where} is encrypted (key id {m.key_id}): set spec.restore.encryption.keySecret to "
            "the Secret holding the key it was made with"
        )
    if key.id != m.key_id:
        raise RestoreError(wrong_key(where, str(m.key_id), key.id))


class Plain:
    """The stored object's bytes as they are (an unencrypted backup)."""

    def feed(self, chunk: bytes) -> list[bytes]:
        return [chunk]

    def finish(self) -> bytes:
        return b""


def plaintext_opener(s3: S3, m: Manifest, key: Key | None) -> Plain | Decryptor:
    if m.encryption is None:
        return Plain()
    assert key is not None  # check_key ran first
    return Decryptor(key, storage.describe(s3, m.data_key))


def verify(client, s3: S3, m: Manifest, key: Key | None = None) -> str:
    """Stream the data object and compare its size and sha256 with the manifest; an encrypted one
    is decrypted too (and the plaintext dropped), so a wrong key or an altered record is found
    before anything is loaded. Returns the ETag of the verified object. Raises RestoreError."""
    check_key(s3, m, key)
    info = storage.head(client, s3, m.data_key)
    etag = info.get("ETag")
    digest, size = hashlib.sha256(), 0
    opener = plaintext_opener(s3, m, key)
    try:
        for chunk in storage.iter_object(client, s3, m.data_key, etag):
            digest.update(chunk)
            size += len(chunk)
            opener.feed(chunk)
        check_object(s3, m, size, digest.hexdigest())
        opener.finish()
    except CryptoError as e:
        raise RestoreError(str(e)) from None
    return etag


def check_object(s3: S3, m: Manifest, size: int, sha: str) -> None:
    where = storage.describe(s3, m.data_key)
    if size != m.compressed_size:
        raise RestoreError(
            f"{where} has {size} bytes but the manifest says {m.compressed_size}: the "
            "object is truncated or replaced; refusing to restore from it"
        )
    if sha != m.sha256:
        raise RestoreError(
            f"{where} has sha256 {sha} but the manifest says {m.sha256}: the object is "
            "corrupted; refusing to restore from it"
        )


def pick_base(client, source: Source) -> Source:
    """A point-in-time restore from a cluster's folder (<prefix>/<cluster>, not one backup's):
    the newest complete backup there that the stop can start from. Any other path: as it is."""
    assert source.stop is not None
    try:
        storage.head(client, source.s3, manifest_key(source))
        return source  # one backup's folder, manifest or data
    except storage.NotFound:
        pass
    folder = source.path.strip("/")
    bases = backup_bases(client, source.s3, folder)
    base = pitr.choose_base(bases, source.stop, _gtids_of_bases(client, source, bases))
    if base is None:
        raise RestoreError(
            f"no complete backup in {storage.describe(source.s3, storage.join_key(source.s3.prefix, folder))} "
            f"that a restore to {source.stop.describe()} can start from (completed by then, with a GTID position)"
        )
    return replace(source, path=f"s3://{source.s3.bucket}/{base.manifest}")


def _gtids_of_bases(client, source: Source, bases) -> Callable[[str], Any]:
    """The GTID parser of the flavor the folder's backups are of (their manifests say)."""
    if not bases:
        return MySQLGtidSet.parse
    first = read_manifest(
        client, replace(source, path=f"s3://{source.s3.bucket}/{bases[0].manifest}"), physical=True
    )
    return parser_for(first.flavor)


def replay_plan(client, source: Source, m: Manifest) -> list[Segment]:
    """The archived binary logs (<prefix>/<cluster>/binlogs, written by the cluster's archiver)
    that lead from the backup `m` to source.stop, in order; RestoreError saying why the archive
    cannot reach it (a gap, not archived yet, before the backup, another key) - before anything
    is loaded."""
    assert source.stop is not None
    store = Store(client, source.s3, m.cluster, source.key)
    completed = clock.parse(m.completed_at)
    assert completed is not None
    try:
        chain = pitr.plan(
            store.segments(),
            m.gtid_position or "",
            int(completed.timestamp()),
            source.stop,
            parser_for(m.flavor),
        )
    except pitr.PitrError as e:
        raise RestoreError(f"point-in-time recovery to {source.stop.describe()}: {e}") from None
    for seg in chain:
        where = f"the archived binary log {storage.describe(source.s3, seg.key)}"
        if seg.encryption and source.key is None:
            raise RestoreError(
                f"{where} is encrypted (key id {seg.key_id}): set spec.restore.encryption.keySecret"
            )
        if seg.encryption and source.key is not None and seg.key_id != source.key.id:
            raise RestoreError(wrong_key(where, str(seg.key_id), source.key.id))
        stored = _stored_size(client, source, seg)
        if stored != seg.size:
            raise RestoreError(
                f"{where} ({seg.file} of server {seg.server}, starting at {seg.gtids_before or 'the beginning'}) "
                + (
                    "is missing from the bucket"
                    if stored is None
                    else f"has {stored} bytes, its index entry {seg.size}"
                )
                + f": the archive cannot reach {source.stop.describe()}; restore to a time before "
                f"{pitr.stamp(seg.first_event_at)}, or from a backup taken after it"
            )
    return chain


def _stored_size(client, source: Source, seg: Segment) -> int | None:
    """The size of a segment's object as stored; None when it is not there."""
    try:
        return int(storage.head(client, source.s3, seg.key).get("ContentLength", -1))
    except storage.NotFound:
        return None
    except storage.StorageError as e:
        raise RestoreError(str(e)) from None


def segment_bytes(client, source: Source, seg: Segment) -> Iterator[bytes]:
    """A segment's plaintext, checked against its index entry (size, sha256) and, encrypted,
    authenticated record by record."""
    where = storage.describe(source.s3, seg.key)
    opener: Plain | Decryptor = Decryptor(source.key, where) if seg.encryption and source.key else Plain()
    digest, size = hashlib.sha256(), 0
    try:
        for chunk in storage.iter_object(client, source.s3, seg.key):
            digest.update(chunk)
            size += len(chunk)
            yield from opener.feed(chunk)
        if (size, digest.hexdigest()) != (seg.size, seg.sha256):
            raise RestoreError(f"{where} does not match its index entry (size or sha256): it was altered")
        yield opener.finish()
    except CryptoError as e:
        raise RestoreError(str(e)) from None
