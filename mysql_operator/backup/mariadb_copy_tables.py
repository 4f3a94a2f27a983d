"""The table digests of a MariaDB physical copy (a backup of a cluster with drills): the copy is
unpacked as it streams to the bucket, then prepared, and a throwaway server started on it is dumped
for its tables, as a MySQL physical copy is (backup/physical.py `cloned`'s `inspect`).

    with unpacking(tools_dir, scratch) as u:      # u.stdin: every byte of the donor's xbstream
        ...                                        # (DumpStream.pump_copy's tee); then, once whole:
        u.inspect(lambda socket, databases: ...)   # prepared, served on a socket, shut down

Every step runs in the Job's client-tools sidecar (the servers' tool image: mbstream,
mariadb-backup and mariadbd of the servers' series), on the Job's scratch volume; nothing here
holds the operator's API credentials, and the copy is removed afterwards whatever happened.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from mysql_operator.backup import commands
from mysql_operator.backup.copy_server import Paths, PhysicalError
from mysql_operator.backup.physical import run_tool, throwaway_server
from mysql_operator.backup.pipeline import TailBuffer, drain
from mysql_operator.backup.sidecar import SidecarError, SidecarProcess

PREPARE_SECONDS = 6 * 3600  # as long as a restore's copy may take


def extract_command(p: Paths) -> list[str]:
    """Pure: the xbstream read on stdin, unpacked into the copy's folder."""
    return ["mbstream", "-x", "-C", str(p.data)]


def prepare_command(p: Paths) -> list[str]:
    """Pure: the unpacked copy made consistent (its redo log applied), as a restore does."""
    return ["mariadb-backup", "--no-defaults", "--prepare", f"--target-dir={p.data}"]


def server_command(p: Paths) -> list[str]:
    """Pure: a throwaway server on the prepared copy: no TCP port, a socket in the scratch folder,
    no account checks (so its root without a password), no binary log, no replication started, no
    event fired. The sidecar runs as the Job's non-root user in a Pod, where mariadbd ignores
    --user with a warning; run as root (the tests' sidecar on a host), it keeps root's uid, which
    made the copy's files (a server dropped to another user could not write them)."""
    return [
        "mariadbd",
        "--no-defaults",
        "--user=root",
        f"--datadir={p.data}",
        "--skip-grant-tables",
        "--skip-networking",
        f"--socket={p.socket}",
        f"--pid-file={p.base / 'clone.pid'}",
        f"--log-error={p.log}",
        f"--tmpdir={p.base}",
        "--skip-log-bin",
        "--skip-slave-start",
        "--event-scheduler=DISABLED",
        "--innodb-buffer-pool-size=32M",
    ]


@dataclass
class Unpacking:
    """The copy as it is unpacked: `stdin` takes the stream (None once the unpacker could not be
    started: `failed` says why)."""

    p: Paths
    tools_dir: str
    proc: SidecarProcess | None = None
    failed: str = ""
    _err: TailBuffer = field(default_factory=TailBuffer)
    _readers: list = field(default_factory=list)

    @property
    def stdin(self):
        return self.proc.stdin if self.proc is not None else None

    def inspect(self, inspect: Callable[[str, list[str]], None], start_timeout: float = 120.0) -> None:
        """Once the stream ended (its writer closed `stdin`): the copy unpacked whole, prepared, a
        server started on it, `inspect(socket, databases)` called while it runs (databases: the
        copy's user databases), then shut down. PhysicalError names the step that failed."""
        if self.proc is None:
            raise PhysicalError(self.failed)
        rc = self.proc.wait(PREPARE_SECONDS)
        for t in self._readers:
            t.join(5)
        if rc != 0:
            raise PhysicalError(f"mbstream -x failed (exit status {rc}): {self._err.text() or 'no message'}")
        run_tool(prepare_command(self.p), self.tools_dir, None, PREPARE_SECONDS)
        with throwaway_server(self.p, server_command(self.p), self.tools_dir, start_timeout) as conn:
            with conn.cursor() as cur:
                cur.execute("SHOW DATABASES")
                databases = commands.user_databases([str(r[0]) for r in cur.fetchall()])
            inspect(str(self.p.socket), databases)


@contextlib.contextmanager
def unpacking(tools_dir: str, scratch: str | None) -> Iterator[Unpacking]:
    """An Unpacking into `scratch` (else `tools_dir`), its files removed afterwards."""
    p = Paths(Path(scratch or tools_dir))
    p.remove()  # a failed attempt's, in a retried Pod
    u = Unpacking(p, tools_dir)
    try:
        p.data.mkdir(parents=True)
        try:
            u.proc = SidecarProcess(extract_command(p), tools_dir, stdin=True)
            u._readers = [drain(u.proc.stdout, u._err), drain(u.proc.stderr, u._err)]
        except (SidecarError, OSError) as e:
            u.failed = f"the copy could not be unpacked for its table digests: {e}"
        yield u
    finally:
        if u.proc is not None:
            if u.proc.poll() is None:
                u.proc.kill()
                with contextlib.suppress(Exception):
                    u.proc.wait(30)
        p.remove()
