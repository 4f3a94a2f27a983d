"""The manifest written next to a backup's data. It is written LAST: its presence marks a backup
complete; a folder without one is an aborted or running backup and is never restored from."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields

from mysql_operator.backup.table_digest import tables_from_json, tables_json

FORMAT = 1
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
OPTIONAL = (
    "databases",
    "format",
    "gtid_position",
    "encryption",
    "key_id",
    "sealed",
    "method",
    "events",
    "tables",
    "tables_note",
)


class ManifestError(ValueError):
    pass


@dataclass(frozen=True)
class Manifest:
    cluster: str
    namespace: str
    backup: str
    flavor: str  # mysql | mariadb
    server_version: str  # e.g. 10.11.6
    gtid_position: str | None
    source_instance: str
    started_at: str  # RFC 3339 UTC
    completed_at: str
    data_key: str  # object key of the compressed dump (logical) or tar of the data directory (physical)
    compression: str  # zstd | gzip
    compressed_size: int
    uncompressed_size: int
    sha256: str  # of the object as stored (compressed)
    databases: tuple[str, ...] = ()  # empty when encrypted: then inside `sealed`
    format: int = FORMAT
    # client-side encryption (backup/crypto.py): the algorithm, the id of the key (never the key),
    # and the sensitive fields (the database names) as a sealed JSON object, base64
    encryption: str | None = None
    key_id: str | None = None
    sealed: str | None = None
    # logical: an SQL dump, loaded by a client; physical: a tar of a MySQL data directory copied by
    # CLONE (backup/physical.py), started on as is. Manifests written before physical backups: logical
    method: str = "logical"
    # (schema, name, status) of each scheduled event on the PRIMARY when the backup started (the
    # source may be a replica, where every event is replica-side disabled): what a restore gives
    # the new primary. None: not known (an older backup, or no primary answered); empty when
    # encrypted: then inside `sealed`
    events: tuple[tuple[str, str, str], ...] | None = None
    # each table of a logical backup as its dump held it, {"db.table": {"rows": n, "digest": hex}}
    # (backup/table_digest.py: what a restore drill compares a restored server with). None: not
    # recorded (a physical backup, an older one, or the digests failed: `tables_note` says why);
    # empty when encrypted: then inside `sealed`
    tables: dict[str, dict[str, int | str]] | None = None
    tables_note: str | None = None

    def to_json(self) -> bytes:
        d = asdict(self)
        d["databases"] = list(self.databases)
        if self.events is None:
            del d["events"]  # as older manifests: readable by an older operator
        else:
            d["events"] = [list(e) for e in self.events]
        for optional in ("tables", "tables_note"):
            if d[optional] is None:
                del d[optional]
        return (json.dumps(d, indent=2, sort_keys=True) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes, where: str = "manifest") -> "Manifest":
        try:
            d = json.loads(data)
        except ValueError as e:
            raise ManifestError(f"{where} is not valid JSON ({e}): the backup is damaged") from None
        if not isinstance(d, dict):
            raise ManifestError(f"{where} is not a JSON object: the backup is damaged")
        if d.get("format", FORMAT) > FORMAT:
            raise ManifestError(f"{where} has format {d['format']}: upgrade the operator to restore it")
        known = {f.name for f in fields(cls)}
        missing = sorted(n for n in known - set(d) if n not in OPTIONAL)
        if missing:
            raise ManifestError(f"{where} lacks {', '.join(missing)}: the backup is damaged")
        d = {k: v for k, v in d.items() if k in known}
        d["databases"] = tuple(d.get("databases") or ())
        d["events"] = events_field(d.get("events"), where)
        d["tables"] = tables_field(d.get("tables"), where)
        m = cls(**d)
        if not _SHA256.match(str(m.sha256)):
            raise ManifestError(f"{where}: sha256 {m.sha256!r} is not a hex SHA-256 digest")
        if not isinstance(m.compressed_size, int) or m.compressed_size <= 0:
            raise ManifestError(f"{where}: compressed_size must be a positive integer")
        return m


def events_field(value: object, where: str) -> tuple[tuple[str, str, str], ...] | None:
    """A manifest's `events` ([[schema, name, status], ...]) as tuples; ManifestError otherwise."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(e, list) and len(e) == 3 and all(isinstance(x, str) for x in e) for e in value
    ):
        raise ManifestError(
            f"{where}: events must be a list of [schema, name, status]: the backup is damaged"
        )
    return tuple((e[0], e[1], e[2]) for e in value)


def tables_field(value: object, where: str) -> dict[str, dict[str, int | str]] | None:
    """A manifest's `tables` as table_digest wrote them; ManifestError otherwise."""
    if value is None:
        return None
    try:
        return tables_json(tables_from_json(value))
    except ValueError as e:
        raise ManifestError(f"{where}: tables: {e}: the backup is damaged") from None
