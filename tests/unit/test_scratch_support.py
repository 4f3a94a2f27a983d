"""tests/support/scratch.py: the servers' work folders in memory, and the sweep of the folders a
killed session left."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import scratch


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_folder_of_a_process_that_is_gone_is_released_and_a_living_ones_kept(tmp_path):
    gone = tmp_path / f"db-test-{dead_pid()}-abc"
    living = tmp_path / f"db-test-{os.getpid()}-def"
    other = tmp_path / "other-1-x"
    for d in (gone, living, other):
        (d / "data").mkdir(parents=True)
    assert scratch.sweep(tmp_path, "db-test-") == [gone]
    assert not gone.exists() and living.exists() and other.exists()


def test_a_memory_folder_is_a_tmpfs_as_root_and_release_removes_it(tmp_path):
    folder = scratch.memory_folder("db-test-", tmp_path)
    assert folder.parent == tmp_path and folder.name.startswith(f"db-test-{os.getpid()}-")
    assert scratch._mounted(folder) == (os.geteuid() == 0)
    (folder / "f").write_bytes(b"x")
    scratch.release(folder)
    assert not folder.exists() and not scratch._mounted(folder)
