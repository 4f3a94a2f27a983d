"""What a restore works with: the server it loads into (`Target`), the backup it reads (`Source`), a
physical copy's donor (`Donor`), its result and its error; a connection to a target."""

from __future__ import annotations

from dataclasses import dataclass, field

from mysql_operator.api import S3
from mysql_operator.backup import pitr
from mysql_operator.backup.binlog_archive import Segment
from mysql_operator.backup.crypto import Key
from mysql_operator.backup.manifest import Manifest
from mysql_operator.backup.pipeline import verified_instance
from mysql_operator.db.instance import Instance
from mysql_operator.manifests.common import TLS_CA


class RestoreError(Exception):
    pass


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    user: str
    password: str
    tls_ca: str | None = None  # the cluster's CA certificate file: TLS verifying it and the host name
    # a folder shared with the Job's client-tools sidecar, which runs the client of the cluster's
    # server image (backup/sidecar.py); None: run the client of this image
    tools_dir: str | None = None
    # the application account (spec.database.user, host %): every stored object of a dump gets
    # it as its definer, whoever defined it in the source (docs/design.md); None: as dumped
    definer: str | None = None
    # a dump loaded by this many client sessions at once, its pieces spooled in `spool` (a disk
    # folder of this process's; backup/restore_pieces.py); 1 or no spool: one session
    load_workers: int = 1
    spool: str | None = None

    def __repr__(self) -> str:
        return f"Target({self.host}:{self.port}, user={self.user!r})"


@dataclass(frozen=True)
class Source:
    """A backup in S3: `path` is its folder (relative to s3.prefix), or its manifest or data key."""

    s3: S3
    path: str
    key: Key | None = None  # the key of an encrypted backup (backup/crypto.py)
    # point-in-time recovery: after the backup, the archived binary logs are replayed up to here
    stop: pitr.Stop | None = None


@dataclass(frozen=True)
class Donor:
    """Where a new cluster's instances reach the restore Job's server of a physical backup (they
    clone it): the Job Pod's name and the port it listens on; `tls_dir`, the certificate it
    serves (issued by the cluster's CA for that name: the instances verify it), as the sidecar
    sees it."""

    host: str
    port: int
    scratch: str | None = None  # where the copy is unpacked (a disk folder shared with the sidecar)
    tls_dir: str | None = None
    instance_ca: str = TLS_CA  # the CA file the instances verify it with, as they see it


@dataclass(frozen=True)
class TableCheck:
    """A restored server's tables compared with those its backup recorded (backup/table_check.py):
    how many tables and rows the backup has, and each difference found (none: they are equal)."""

    tables: int
    rows: int
    differences: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.differences


@dataclass(frozen=True)
class RestoreResult:
    manifest: Manifest
    gtid_position: str | None
    bytes_loaded: int
    replayed: tuple[Segment, ...] = ()  # the archived binary logs replayed after the backup
    # the loaded tables checked against the backup's (asked for, and the backup recorded them)
    table_check: TableCheck | None = None
    # seconds per phase, in order: verify (download, decrypt, hash), load (download, decrypt,
    # decompress, load, as one stream), settle (definers, GTID position), checkTables, replay
    phases: dict[str, float] = field(default_factory=dict)
    checks_passed: tuple[str, ...] = ()  # the user's checks (backup/user_checks.py) that ran and passed


def instance_of(target: Target, slow_timeout: float = 60, **kw) -> Instance:
    """A session of `target` as the restore's account, over TLS verified with its CA when set;
    `kw`: more of Instance's settings (read_timeout, ...)."""
    return verified_instance(
        target.host, target.port, target.user, target.password, target.tls_ca, slow_timeout=slow_timeout, **kw
    )
