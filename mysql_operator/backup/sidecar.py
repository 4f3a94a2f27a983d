"""The client tools of the servers' tool image, run by a backup/restore Job's sidecar.

The Job's main container (operator image) decides what to run; its `client-tools` sidecar (the
tool image of the servers' flavor and series, so `mysqldump`/`mariadb-dump`/`mysql`/`mariadb`
match the servers) runs it.
They share one emptyDir; each run gets its own sub-folder there:

    stdin, stdout, stderr  FIFOs: this process writes the tool's input and reads its output
    request                the tool's argv, NUL-separated (written last, atomically)
    status                 the tool's exit status, written by the sidecar when it ended

The option file with the password goes into the shared folder too (0600; both containers run as
one uid). `SidecarProcess` looks like the `subprocess.Popen` of a local tool (stdin, stdout,
stderr, poll, wait, kill), so the backup and restore pipelines are the same either way. The
sidecar's script: manifests.scripts.CLIENT_TOOLS_SH (it runs only the tools named in TOOLS).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

REQUEST, STDIN, STDOUT, STDERR, STATUS = "request", "stdin", "stdout", "stderr", "status"
# mysqld: the throwaway server a physical backup's CLONE copies into (backup/physical.py);
# mbstream, mariadb-backup, mariadbd: a MariaDB copy unpacked, prepared and served for its table
# digests (backup/mariadb_copy_tables.py)
TOOLS = (
    "mysqldump",
    "mariadb-dump",
    "mysql",
    "mariadb",
    "mysqlbinlog",
    "mariadb-binlog",
    "mysqld",
    "tar",
    "mbstream",
    "mariadb-backup",
    "mariadbd",
)


class SidecarError(RuntimeError):
    pass


class SidecarProcess:
    """One run of a client tool in the sidecar. `stdin`: False closes its input at once (a dump);
    True keeps `self.stdin` open for the caller to write (a load)."""

    def __init__(self, argv: list[str], folder: str, *, stdin: bool = False, connect_timeout: float = 120.0):
        if not argv or argv[0] not in TOOLS:
            raise SidecarError(f"the client-tools sidecar runs only {', '.join(TOOLS)}, not {argv[:1]}")
        if any("\0" in a for a in argv):
            raise SidecarError("an argument contains NUL")
        self.folder = Path(tempfile.mkdtemp(prefix="run-", dir=folder))
        self.returncode: int | None = None
        self.stdin = self.stdout = self.stderr = None
        for name in (STDIN, STDOUT, STDERR):
            os.mkfifo(self.folder / name, 0o600)
        tmp = self.folder / f"{REQUEST}.tmp"
        tmp.write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        tmp.rename(self.folder / REQUEST)
        # the sidecar opens stdin, stdout, stderr in this order: open ours in the same order
        try:
            self.stdin = self._open(STDIN, "wb", connect_timeout)
            if not stdin:
                self.stdin.close()
                self.stdin = None
            self.stdout = self._open(STDOUT, "rb", connect_timeout)
            self.stderr = self._open(STDERR, "rb", connect_timeout)
        except BaseException:
            self.kill()
            raise

    def _open(self, name: str, mode: str, timeout: float):
        """Open our end of a FIFO; it blocks until the sidecar opens the other end. Should the
        sidecar never do so, unblock the open by opening the other end ourselves, and fail."""
        path = self.folder / name
        box: list = []
        t = threading.Thread(target=lambda: box.append(open(path, mode, buffering=0)), daemon=True)
        t.start()
        t.join(timeout)
        if not box:
            fd = os.open(path, (os.O_RDONLY if "w" in mode else os.O_WRONLY) | os.O_NONBLOCK)
            t.join(5)
            os.close(fd)
            for f in box:
                f.close()
            raise SidecarError(
                f"the client-tools container did not start within {timeout:.0f}s: see the logs of "
                "the Job Pod's 'client-tools' container (it runs the servers' tool image)"
            )
        return box[0]

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                text = (self.folder / STATUS).read_text().strip()
            except FileNotFoundError:
                return None
            self.returncode = int(text) if text.lstrip("-").isdigit() else 255
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The tool's exit status, once the sidecar wrote it (it does so as the tool exits)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("the client-tools sidecar's run", timeout or 0)
            time.sleep(0.05)
        return self.returncode  # type: ignore[return-value]

    def kill(self) -> None:
        """Close our ends: the tool then sees end of input or a broken pipe, and ends."""
        for f in (self.stdin, self.stdout, self.stderr):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
