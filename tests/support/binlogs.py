"""Binary logs for tests: where a server writes them, a stream's launcher, the rows archived ones insert."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from mysql_operator.db.instance import Instance


def binlog_dir(server, inst: Instance) -> Path:
    base = Path(str(inst.scalar("SELECT @@log_bin_basename")))
    root = getattr(server, "rootfs", Path("/"))  # MySQL runs in its image's root
    return (root / base.relative_to("/")).parent if root != Path("/") else base.parent


INSERTED = re.compile(r"^### INSERT INTO `app`\.`t`\n### SET\n###   @1=(\d+)", re.M)


def stream_launch(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def archived_ids(client, s3, chain) -> set[int]:
    """The row ids inserted by the archived binary logs, decoded by mariadb-binlog."""
    ids: set[int] = set()
    for seg in chain:
        data = client.get_object(Bucket=s3.bucket, Key=seg.key)["Body"].read()
        out = subprocess.run(["mariadb-binlog", "-v", "-"], input=data, capture_output=True, check=True)
        ids |= {int(n) for n in INSERTED.findall(out.stdout.decode(errors="replace"))}
    return ids
