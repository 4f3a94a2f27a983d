"""Work folders in memory for the test servers (tests/support/mariadb.py, mysql.py).

A factory copies its pristine data directory (about 100 MiB) for every server it starts, and the
suite starts hundreds: on the disk's file system the tests process wrote 25 GiB in the first 20
minutes of a CI run, and the kernel then writes it back. On a tmpfs of its own the copy is a
memory copy and the servers' own writes never reach the disk. The servers run with durability relaxed to the page cache already (mariadb.py):
the tests kill processes, not the machine, so nothing they check changes.

    folder = memory_folder("mariadb-test-")     # a tmpfs mounted there (as root), else a plain folder
    release(folder)                             # unmounted and removed

The folder's name carries the pid of the process that made it: a later `memory_folder` in the same
parent unmounts and removes the folders of processes that are gone (a killed test session), so a
crash does not keep memory held until the machine restarts.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SIZE = "8g"  # a cap, not a reservation: a runaway test meets ENOSPC, not the OOM killer


def memory_folder(prefix: str, parent: Path | None = None) -> Path:
    """A new folder `<parent>/<prefix><pid>-<random>`, a tmpfs of its own when this process may
    mount (root); on the parent's file system otherwise (printed once, with the reason)."""
    parent = Path(parent or tempfile.gettempdir())
    parent.mkdir(parents=True, exist_ok=True)
    sweep(parent, prefix)
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))
    if os.geteuid() != 0:
        return path
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        print(f"{path} stays on disk: mount -t tmpfs failed: {r.stderr.strip()}", file=sys.stderr)
    return path


def release(path: Path) -> None:
    """Unmount `path` if it is a mount point (lazily: a killed server's files may still be open),
    then remove it."""
    if _mounted(path):
        subprocess.run(["umount", "--lazy", str(path)], check=False, capture_output=True)
    shutil.rmtree(path, ignore_errors=True)


def sweep(parent: Path, prefix: str) -> list[Path]:
    """Release the folders `<prefix><pid>-*` of `parent` whose process is gone; the ones released."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)-")
    gone = []
    for path in parent.glob(f"{prefix}*"):
        found = pattern.match(path.name)
        if found and not _alive(int(found.group(1))):
            release(path)
            gone.append(path)
    return gone


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _mounted(path: Path) -> bool:
    target = str(path.resolve())
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == target for line in f)
