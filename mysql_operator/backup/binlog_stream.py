"""The archiver that follows the primary across failovers and switchovers.

    follower = Follower(servers, user, password, spool, store, max_delay=10, launch=...)
    follower.step(now)      # about every second

It finds the writable server among `servers` (the cluster's instances), streams that server's
binary logs into the local folder `spool` with the flavor's binlog tool
(`mysqlbinlog --read-from-remote-server --raw --stop-never`, MariaDB `mariadb-binlog`), and lets an
`Archiver` (binlog_archive.py) upload each file once the stream has begun the next one, then
deletes the local copy. The stream starts at the server's first file holding something the
archive lacks: after a failover the new primary's files go on where the archive stopped, without a
gap (its files hold what it replicated) and without uploading twice what it already holds.

When the primary stops answering, turns read-only, or the stream ends, the stream stops and the
next pass looks for the primary again; the spool is emptied before a new stream starts.

Before the first stream from a server of a release, the binlog tool says its version: one of an
older release series than the server's (a `spec.toolsImage` too old), or one that does not run,
raises `ToolUnusable` out of `follow`, whose message the archiver's Pod reports (its termination
message) and the operator shows in the cluster's condition BinlogArchiving.
"""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mysql_operator.backup import commands
from mysql_operator.backup.binlog_archive import Archiver, Step, Store, prune
from mysql_operator.backup.pipeline import TailBuffer, drain, option_file, tool_check, verified_instance
from mysql_operator.backup.pipeline import stop as stop_processes
from mysql_operator.db.instance import Instance
from mysql_operator.db.observation import InstanceError

STREAM_SERVER_ID = 4_000_000_000  # the stream's replica server_id: above any instance's


class ToolUnusable(Exception):
    """The binlog tool cannot archive this server's logs (too old, or it does not run)."""


@dataclass(frozen=True)
class Server:
    name: str
    host: str
    port: int


@dataclass
class Follower:
    servers: tuple[Server, ...]
    user: str
    password: str
    spool: Path
    store: Store
    max_delay: float = 10.0
    launch: Callable[[list[str]], Any] | None = None  # starts the binlog tool (a Popen or sidecar run)
    options_dir: str | None = None  # where the tool's option file goes (shared with the sidecar)
    tls_ca: str | None = None
    tools_image: str = ""  # where the tool comes from, for the messages
    connect: Callable[[Server], Instance] | None = None
    primary: Server | None = None
    stream: Any = None
    archiver: Archiver | None = None
    events: list[str] = field(default_factory=list)  # what happened, for the log
    stream_err: TailBuffer = field(default_factory=TailBuffer)
    _options: Any = None
    _option_path: str = ""
    _tool_fits: Any = None  # the server release the tool was last found fit for

    def _instance(self, s: Server) -> Instance:
        if self.connect is not None:
            return self.connect(s)
        return verified_instance(
            s.host, s.port, self.user, self.password, self.tls_ca, name=s.name, connect_timeout=3.0
        )

    def find_primary(self) -> tuple[Server, Instance] | None:
        """The one writable server, or None (none, or more than one: wait)."""
        writable = []
        for s in self.servers:
            try:
                inst = self._instance(s)
                if not int(inst.scalar("SELECT @@read_only")):
                    writable.append((s, inst))
                else:
                    inst.close()
            except (InstanceError, OSError):
                continue
        if len(writable) != 1:
            for _, inst in writable:
                inst.close()
            return None
        return writable[0]

    def step(self, now: float) -> Step | None:
        if self.archiver is not None and self.primary is not None:
            try:
                step = self.archiver.step(now)
            except (InstanceError, OSError) as e:
                self._stop(f"{self.primary.name} stopped answering ({e})")
                return None
            if step.role != "primary":
                self._stop(f"{self.primary.name} is read-only now")
                return step
            for seg in step.uploaded:
                (self.spool / seg.file).unlink(missing_ok=True)
            for name in step.skipped:
                (self.spool / name).unlink(missing_ok=True)
            if self.stream is not None and self.stream.poll() is not None:
                said = self.stream_err.text((self.password,)) or "no message"
                self._stop(f"the stream from {self.primary.name} ended ({self.stream.returncode}): {said}")
            return step
        found = self.find_primary()
        if found is None:
            return None
        server, inst = found
        if self._tool_fits != inst.dialect.version:
            try:
                self._check_tool(inst.dialect.version)
            finally:
                inst.close()
            return None
        archiver = Archiver(inst, self.spool, self.store, self.max_delay)
        if self.archiver is not None:  # what the archive holds is known already
            archiver.archived, archiver.done = self.archiver.archived, self.archiver.done
        archiver.complete = lambda file, next_file: (self.spool / next_file).exists()
        try:
            archiver.load()
            first = self._first_needed(inst, archiver)
        except (InstanceError, OSError) as e:
            inst.close()
            self.events.append(f"{server.name} stopped answering ({e})")
            return None
        self._start(server, inst, first)
        self.primary, self.archiver = server, archiver
        self.events.append(f"streaming the binary logs of {server.name} from {first}")
        return None

    def _first_needed(self, inst: Instance, archiver: Archiver) -> str:
        files = inst.binary_logs()
        for f, nxt in zip(files, files[1:]):
            if not archiver.archived.contains(nxt.previous):
                return f.name
        return files[-1].name

    @staticmethod
    def _tool(version) -> str:
        return "mariadb-binlog" if version.flavor.value == "mariadb" else "mysqlbinlog"

    def _check_tool(self, version) -> None:
        """ToolUnusable unless the binlog tool runs and is not of an older series than `version`."""
        assert self.launch is not None
        tool = self._tool(version)
        why, said = tool_check(self.launch, tool, version, self.tools_image)
        if why:
            raise ToolUnusable(why)
        self._tool_fits = version
        self.events.append(f"{said or tool} reads the binary logs of {version}")

    def _start(self, server: Server, inst: Instance, first: str) -> None:
        self.spool.mkdir(parents=True, exist_ok=True)
        for old in self.spool.iterdir():  # emptied, not removed: in a Pod it is a volume's mount point
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        version = inst.dialect.version
        if self._options is None:
            self._options = option_file(self.user, self.password, self.options_dir)
            path = self._options.__enter__()
            self._option_path = path
        tool = self._tool(version)
        argv = [
            tool,
            f"--defaults-extra-file={self._option_path}",
            f"--host={server.host}",
            f"--port={server.port}",
            "--protocol=TCP",
            *commands.tls_options(version, self.tls_ca),
            "--read-from-remote-server",
            "--raw",
            "--stop-never",
            f"--result-file={self.spool}/",
        ]
        if tool == "mariadb-binlog":
            argv.append(f"--stop-never-slave-server-id={STREAM_SERVER_ID}")
        else:
            argv.append(f"--connection-server-id={STREAM_SERVER_ID}")
        assert self.launch is not None
        self.stream = self.launch([*argv, first])
        self.stream_err = TailBuffer()
        for pipe, into in ((self.stream.stdout, TailBuffer(1)), (self.stream.stderr, self.stream_err)):
            if pipe is not None:
                drain(pipe, into)
        if getattr(self.stream, "stdin", None) is not None:
            self.stream.stdin.close()

    def _stop(self, why: str) -> None:
        self.events.append(why)
        if self.stream is not None:
            stop_processes(self.stream)
        if self.archiver is not None:
            self.archiver.active = self.archiver.dirty_since = None
            try:
                self.archiver.instance.close()
            except Exception:  # noqa: BLE001 - it is gone already
                pass
        self.stream = self.primary = None

    def close(self) -> None:
        self._stop("closing")
        if self._options is not None:
            self._options.__exit__(None, None, None)
            self._options = None


def follow(
    follower: Follower,
    stopping: threading.Event,
    say: Callable[[str], None],
    every: float = 1.0,
    passed: Callable[[bool, Step | None], None] = lambda ok, step: None,
    prune_every: float = 3600.0,
) -> None:
    """`follower.step` about every `every` seconds until `stopping` is set, then close it; what
    happened (streams started and stopped, files uploaded) goes to `say`, one line each; a line
    said again at once is not repeated. `passed(ok, step)` after each pass: ok when it streamed
    from the primary and archived what was due without an error. Every `prune_every` seconds the files no
    retained backup needs are deleted (binlog_archive.prune)."""
    pruned_at: float | None = None
    last = None

    def once(line: str) -> None:
        nonlocal last
        if line != last:
            say(line)
        last = line

    try:
        while not stopping.is_set():
            try:
                step = follower.step(time.monotonic())
            except ToolUnusable:
                raise  # no later pass can do better: the Pod reports it and the operator shows it
            except Exception as e:  # noqa: BLE001 - a pass that failed is tried again
                follower.events.append(f"a pass failed: {e}")
                step = None
            ok = step is not None and step.role == "primary" and follower.stream is not None
            passed(ok, step)
            due = pruned_at is None or time.monotonic() - pruned_at >= prune_every
            # only an archiver that loaded the archive (and so claimed its folder) prunes it
            loaded = follower.archiver is not None and follower.archiver.archived is not None
            if loaded and due:
                pruned_at = time.monotonic()
                try:
                    gone = prune(follower.store, follower.archiver.instance.dialect.parse_gtids)
                    if gone:
                        once(f"deleted {len(gone)} archived files no retained backup needs")
                except Exception as e:  # noqa: BLE001 - tried again at the next prune
                    once(f"deleting archived files no backup needs failed: {e}")
            for seg in step.uploaded if step else ():
                once(f"archived {seg.file} of {seg.server} up to {seg.gtids_after}")
            while follower.events:
                once(follower.events.pop(0))
            stopping.wait(every)
    finally:
        follower.close()


__all__ = ["Follower", "Server", "follow"]
