"""What a backup works with: its request (`BackupRequest`, with the `Candidate`s it may copy), the
instance it copies (`Source`, as read before the copy) and its error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mysql_operator.api import S3
from mysql_operator.backup import physical, upload
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.crypto import Key
from mysql_operator.manifests.common import SEED_PORT


class BackupError(Exception):
    pass


@dataclass(frozen=True)
class Candidate:
    name: str  # instance name as shown in status (e.g. pod name)
    endpoint: Endpoint


@dataclass(frozen=True)
class BackupRequest:
    cluster: str
    namespace: str
    backup: str
    s3: S3
    candidates: tuple[Candidate, ...]
    compression: str = "zstd"
    part_size: int = upload.DEFAULT_PART_SIZE
    max_lag_seconds: int = 300
    tls_ca: str | None = None  # the cluster's CA certificate file: TLS verifying it and the host name
    # a folder shared with the Job's `client-tools` sidecar, which runs the dump tool of the
    # cluster's server image (backup/sidecar.py); None: run the dump tool of this image
    tools_dir: str | None = None
    # client-side encryption of the dump and the manifest's sensitive fields (backup/crypto.py)
    key: Key | None = None
    method: str = physical.METHOD_LOGICAL  # or METHOD_PHYSICAL (MySQL: with tools_dir)
    seed_port: int = SEED_PORT  # physical, MariaDB: where the Pods' seed-donor sidecar listens
    scratch_dir: str | None = None  # physical: the disk folder the copy is made in (else tools_dir)
    # MySQL physical: record the copy's table digests (a dump of it, before the tar: 1.46 times the
    # backup's time measured at 1.2 GiB); the operator asks for them when the cluster has drills
    copy_digests: bool = False


@dataclass(frozen=True)
class Source:
    """The instance a backup copies, and what was read of it before the copy."""

    candidate: Candidate
    version: Any  # db.flavor.ServerVersion
    full_version: str  # VERSION() without its suffix
    databases: list[str]
    plugins: list[str]  # the donor's plugin libraries a CLONE recipient needs (MySQL, physical)
    events: list[tuple[str, str, str]] | None  # the primary's scheduled events
    physical_copy: bool
    donated: bool  # a MariaDB physical copy, streamed by the donor's sidecar

    @property
    def name(self) -> str:
        return self.candidate.name
