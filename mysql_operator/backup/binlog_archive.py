"""Continuous archiving of the primary's binary logs to the backup bucket (the base of
point-in-time recovery).

    archiver = Archiver(instance, binlog_dir, Store(client, s3, cluster, key), max_delay=10)
    step = archiver.step(now)       # one pass; call it about every second

A pass, on a writable server (the primary) only:
1. every closed binary log that holds a transaction the archive lacks is uploaded (encrypted with
   the backup key when there is one), then its index entry, written last: an object without one
   is an interrupted upload, never used;
2. the file being written is closed (`FLUSH BINARY LOGS`) once it has held a transaction for
   `max_delay` seconds: a committed transaction reaches the bucket within about max_delay plus
   one upload, whatever the write rate.

After a failover the new primary's files also hold what it replicated (log_replica_updates): a
file whose GTIDs are all archived already is skipped, so the archive goes on from the new primary
without a gap; the index entries (GTIDs before and after each file, first and last event times)
let a restore pick the files that lead to a point in time or a GTID.

Layout: <prefix>/<cluster>/binlogs/<server>/<file>-<hash of the GTIDs before it>[.enc] and the
same name .json beside it (<server>: MySQL's server_uuid, MariaDB's server_id).
Reading a closed file is safe: the server never writes to it again.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from mysql_operator.api import S3
from mysql_operator.api.spec import ARCHIVE_FOLDER
from mysql_operator.backup import storage
from mysql_operator.backup import upload
from mysql_operator.backup.crypto import ALGORITHM, Encryptor, Key

MAGIC = b"\xfebin"
HEADER = struct.Struct("<IBIII")  # timestamp, type, server_id, event_size, log_pos (then flags)
INDEX_SUFFIX = ".json"


class ArchiveError(Exception):
    pass


@dataclass(frozen=True)
class Scan:
    events: int
    first_at: int  # unix time of the first event (the file's header: when it was opened)
    last_at: int  # of the latest event


def scan(path: Path) -> Scan:
    """Walk a closed binary log's events by their headers (no event body is read). ArchiveError
    when it is not a binary log or its last event is cut short."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        if f.read(4) != MAGIC:
            raise ArchiveError(f"{path} is not a binary log (no magic number)")
        pos, events, first, last = 4, 0, 0, 0
        while pos < size:
            f.seek(pos)
            head = f.read(HEADER.size)
            if len(head) < HEADER.size:
                raise ArchiveError(f"{path}: event header cut short at byte {pos}")
            ts, _, _, length, _ = HEADER.unpack(head)
            if length < HEADER.size or pos + length > size:
                raise ArchiveError(f"{path}: event at byte {pos} claims {length} bytes")
            if ts:
                first = first or ts
                last = max(last, ts)
            events += 1
            pos += length
    return Scan(events, first, last)


def segment_name(file: str, gtids_before: str) -> str:
    """A server that was re-seeded starts its binary logs again from the first file name: the
    GTIDs written before a file tell two files of one name apart."""
    return f"{file}-{hashlib.sha256(gtids_before.encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class Segment:
    """One archived binary log: the index entry written after its object."""

    server: str  # MySQL: @@server_uuid; MariaDB: @@server_id
    name: str  # segment_name(file, gtids_before)
    file: str
    key: str  # the object's key
    size: int  # as stored
    sha256: str  # of the object as stored
    gtids_before: str
    gtids_after: str
    first_event_at: int
    last_event_at: int
    events: int
    encryption: str | None = None
    key_id: str | None = None

    def to_json(self) -> bytes:
        return (json.dumps(asdict(self), sort_keys=True) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes) -> "Segment":
        d = json.loads(data)
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})


OWNER_NAME = "owner"  # <folder>/owner: the uid of the cluster whose history the folder holds


@dataclass
class Store:
    """Where the segments go: the backup bucket's <prefix>/<cluster>/binlogs/, claimed by the
    cluster's uid (`owner`; "" claims nothing)."""

    client: Any
    s3: S3
    cluster: str
    key: Key | None = None
    owner: str = ""

    @property
    def folder(self) -> str:
        return storage.join_key(self.s3.prefix, self.cluster, ARCHIVE_FOLDER)

    def claim(self) -> None:
        """The folder holds one cluster's history: a cluster re-created (or restored) under the
        same name is another history - on MariaDB its GTIDs start again and would look archived
        already, on both its files would mix with the earlier ones. The first archiver writes its
        cluster's uid there; another cluster's is refused (ArchiveError, nothing written or
        deleted). A folder from before the claim is claimed as it is."""
        if not self.owner:
            return
        key = storage.join_key(self.folder, OWNER_NAME)
        try:
            theirs = json.loads(storage.get_bytes(self.client, self.s3, key, limit=4096)).get("uid")
        except storage.NotFound:
            body = {"cluster": self.cluster, "uid": self.owner}
            storage.put_bytes(self.client, self.s3, key, (json.dumps(body) + "\n").encode())
            return
        except ValueError:
            theirs = None
        if theirs != self.owner:
            raise ArchiveError(
                f"{storage.describe(self.s3, self.folder + '/')} holds the binary logs of another "
                f"cluster named {self.cluster} (uid {theirs}, this one is {self.owner}): an earlier "
                "cluster of that name, or the one this cluster was restored from. Nothing is "
                "archived here, so that history stays whole: set spec.backup.storage.s3.prefix to a new "
                "prefix for this cluster's backups and binary logs"
            )

    def segments(self) -> list[Segment]:
        out = []
        for k in storage.list_keys(self.client, self.s3, self.folder + "/"):
            if k.endswith(INDEX_SUFFIX):
                out.append(Segment.from_json(storage.get_bytes(self.client, self.s3, k)))
        return out

    def put(self, server: str, name: str, path: Path, before: str, after: str) -> Segment:
        found = scan(path)
        base = storage.join_key(self.folder, server, name)
        key = base + (".enc" if self.key else "")
        with open(path, "rb") as f:
            fd = f.fileno()

            def readinto(view: memoryview) -> int:
                return os.readv(fd, [view])

            source: Callable[[memoryview], int] = (
                Encryptor(readinto, self.key).readinto if self.key else readinto
            )
            uploaded = upload.upload_stream(self.client, self.s3, key, source, part_size=upload.MIN_PART_SIZE)
        segment = Segment(
            server=server,
            name=name,
            file=path.name,
            key=key,
            size=uploaded.size,
            sha256=uploaded.sha256,
            gtids_before=before,
            gtids_after=after,
            first_event_at=found.first_at,
            last_event_at=found.last_at,
            events=found.events,
            encryption=ALGORITHM if self.key else None,
            key_id=self.key.id if self.key else None,
        )
        storage.put_bytes(self.client, self.s3, base + INDEX_SUFFIX, segment.to_json())
        return segment


@dataclass(frozen=True)
class Base:
    """What archive retention needs of one complete backup of the cluster (its manifest)."""

    gtid_position: str
    completed_at: int  # unix seconds
    manifest: str = ""  # its key


def prunable(segments: list[Segment], bases: list[Base], parse: Callable[[str], Any]) -> list[Segment]:
    """Pure: the archived files no retained backup needs - those whose every transaction the
    oldest backup already holds, closed before it completed. Nothing without a backup (the
    archive may be all there is), nothing when a backup has no GTID position. A file outside
    every history (a failed primary's unreplicated tail) is kept."""
    oldest = oldest_base(bases)
    if oldest is None:
        return []
    held = parse(oldest.gtid_position)
    return [
        s for s in segments if held.contains(parse(s.gtids_after)) and s.last_event_at < oldest.completed_at
    ]


def oldest_base(bases: list[Base]) -> Base | None:
    """The oldest retained backup; None without one, or when one has no GTID position (then what
    it holds is not known: nothing may be left out)."""
    if not bases or any(not b.gtid_position for b in bases):
        return None
    return min(bases, key=lambda b: b.completed_at)


def backup_bases(client, s3: S3, cluster: str) -> list[Base]:
    """The complete backups of `cluster` in the bucket (<prefix>/<cluster>/<backup>/manifest.json):
    retention removes a backup's manifest first, so what is listed here is retained. A manifest
    that cannot be read counts as a backup whose position is unknown (oldest_base: then nothing
    is left out of the archive)."""
    from mysql_operator import clock
    from mysql_operator.backup.manifest import Manifest, ManifestError

    folder = storage.join_key(s3.prefix, cluster) + "/"
    out = []
    for key in storage.list_keys(client, s3, folder):
        rest = key[len(folder) :].split("/")
        if len(rest) == 2 and rest[1] == storage.MANIFEST_NAME:
            try:
                m = Manifest.from_json(storage.get_bytes(client, s3, key), storage.describe(s3, key))
                done = clock.parse(m.completed_at)
            except (ManifestError, ValueError):
                m, done = None, None
            if m is None or done is None:
                out.append(Base("", 0, key))
            else:
                out.append(Base(m.gtid_position or "", int(done.timestamp()), key))
    return out


def prune(store: "Store", parse: Callable[[str], Any]) -> list[Segment]:
    """Effect: delete the archived files no retained backup needs (index entry first: a file
    without one is never used). Returns them."""
    gone = prunable(store.segments(), backup_bases(store.client, store.s3, store.cluster), parse)
    for s in gone:
        for key in (storage.join_key(store.folder, s.server, s.name) + INDEX_SUFFIX, s.key):
            try:
                store.client.delete_object(Bucket=store.s3.bucket, Key=key)
            except Exception as e:  # noqa: BLE001
                raise storage.explain(e, store.s3, key) from None
    return gone


@dataclass
class Step:
    role: str  # primary | replica: only a primary archives
    uploaded: list[Segment] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # closed files whose GTIDs are all archived
    rotated: bool = False
    # when (the `now` of the pass that first saw it) the oldest transaction the server wrote and
    # the bucket lacks was seen: None when the archive holds all the server wrote
    behind_since: float | None = None


@dataclass
class Archiver:
    instance: Any  # db.instance.Instance: binary_logs(), execute(), scalar(), dialect
    binlog_dir: Path
    store: Store
    max_delay: float = 10.0
    archived: Any = None  # GtidSet: what the archive holds (read from its index at the first pass)
    done: set[tuple[str, str]] = field(default_factory=set)  # (server, segment name) archived or skipped
    pending: dict[str, float] = field(default_factory=dict)  # file not archived yet -> first seen so
    dirty_since: float | None = None  # when the file being written was first seen holding data
    active: tuple[str, int] | None = None  # (name, size) of the file being written when first seen
    # whether the copy of closed file `file` in binlog_dir is whole, given the server's next file:
    # always for the server's own files; a streamed copy once the stream began the next one
    complete: Callable[[str, str], bool] = lambda file, next_file: True

    def load(self) -> None:
        """What the archive holds, from its index (once), and what the oldest retained backup
        holds: files before it are needed by no restore (and `prune` deletes them)."""
        if self.archived is None:
            self.store.claim()
            d = self.instance.dialect
            self.archived = d.parse_gtids("")
            for s in self.store.segments():
                self.archived = self.archived.union(d.parse_gtids(s.gtids_after))
                self.done.add((s.server, s.name))
            oldest = oldest_base(backup_bases(self.store.client, self.store.s3, self.store.cluster))
            if oldest is not None:
                self.archived = self.archived.union(d.parse_gtids(oldest.gtid_position))

    def step(self, now: float) -> Step:
        inst, d = self.instance, self.instance.dialect
        self.load()
        if int(inst.scalar("SELECT @@read_only")):
            self.dirty_since = self.active = None
            return Step("replica")
        server = str(
            inst.scalar("SELECT @@server_uuid" if d.version.flavor.value == "mysql" else "SELECT @@server_id")
        )
        files = inst.binary_logs()
        step = Step("primary")
        for f, nxt in zip(files, files[1:]):
            name = segment_name(f.name, str(f.previous))
            if (server, name) in self.done:
                continue
            if self.archived.contains(nxt.previous):
                step.skipped.append(f.name)
            elif not self.complete(f.name, nxt.name):
                break  # not here yet: later files wait for it (the archive never has a hole)
            else:
                seg = self.store.put(
                    server, name, self.binlog_dir / f.name, str(f.previous), str(nxt.previous)
                )
                self.archived = self.archived.union(nxt.previous)
                step.uploaded.append(seg)
            self.done.add((server, name))
        if files:
            mysql = d.version.flavor.value == "mysql"
            written = d.parse_gtids(
                str(inst.scalar("SELECT @@gtid_executed" if mysql else "SELECT @@gtid_binlog_state"))
            )
            holds = not files[-1].previous.contains(written)
            step.rotated = self._rotate_if_due(files[-1], holds, now)
            waiting = [
                f.name for f in files[:-1] if (server, segment_name(f.name, str(f.previous))) not in self.done
            ]
            waiting += [files[-1].name] if holds else []
            self.pending = {name: self.pending.get(name, now) for name in waiting}
            step.behind_since = min(self.pending.values(), default=None)
        return step

    def _rotate_if_due(self, current, holds_transactions: bool, now: float) -> bool:
        """Close the file being written once it has held a transaction for max_delay seconds
        (counted from when this archiver first saw it holding one)."""
        if self.active is None or self.active[0] != current.name:
            self.active, self.dirty_since = (current.name, current.size), None
        if holds_transactions and self.dirty_since is None:
            self.dirty_since = now
        if self.dirty_since is not None and now - self.dirty_since >= self.max_delay:
            self.instance.execute("FLUSH BINARY LOGS")
            self.active = self.dirty_since = None
            return True
        return False
