"""A dump loaded by several clients at once (issue 49, restore speed): the decompressed dump cut
into pieces as it streams (backup/dump_pieces.py), each table piece spooled to a file of the
restore Job's scratch folder and loaded, once complete, by one of `workers` client sessions (its
own session: the dump's preamble, its database, its tables); the rest - databases, views, events,
routines - in one more session once every table is there.

Loading one stream in one session keeps one server thread busy; pieces keep `workers` of them
busy. The bytes pass through this process once, as in a serial load (the same DumpFilter
changes them first); what a piece holds is on disk until it is loaded, at most `workers` + 1
pieces' worth when the stream is faster than the loads (the reader waits for room)."""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Callable

from mysql_operator.backup.dump_pieces import Cutter, Piece, PieceError
from mysql_operator.backup.pipeline import CHUNK, TailBuffer, drain, spawn, stop
from mysql_operator.backup.sidecar import SidecarError, SidecarProcess

PIECE_BYTES = 32 * 1024 * 1024


@dataclass
class PieceLoad:
    """Run `run(decompressed)` in a thread; `error` says why it failed (None: every piece and
    the rest loaded). `argv`: the client; `tools_dir`: the sidecar's folder (None: local)."""

    argv: list[str]
    tools_dir: str | None
    spool: str
    workers: int
    secrets: tuple[str, ...] = ()
    change: Callable[[bytes], bytes] | None = None
    hint: Callable[[str], str] = lambda _text: ""
    piece_bytes: int | None = None  # default: PIECE_BYTES
    error: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _loaded: dict[int, threading.Event] = field(default_factory=dict)

    def run(self, decompressed) -> None:
        folder = tempfile.mkdtemp(prefix="pieces-", dir=self.spool)
        todo: queue.Queue = queue.Queue(maxsize=self.workers)
        loaders = [
            threading.Thread(target=self._worker, args=(todo,), daemon=True) for _ in range(self.workers)
        ]
        for t in loaders:
            t.start()
        try:
            cutter = Cutter(target=self.piece_bytes or PIECE_BYTES)
            main_path = os.path.join(folder, "main.sql")
            with open(main_path, "wb") as main:
                self._cut(decompressed, cutter, folder, main, todo)
        except (PieceError, OSError) as e:
            self._fail(f"cutting the dump into pieces: {e}")
        finally:
            for _ in loaders:
                todo.put(None)
            for t in loaders:
                t.join()
            try:
                decompressed.close()
            except OSError:
                pass
        try:
            if self.error is None:  # the rest: every table is there
                self._load(main_path, b"", "the dump's databases, views, events and routines")
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _cut(self, decompressed, cutter: Cutter, folder: str, main, todo: queue.Queue) -> None:
        current = None  # (Piece, file) being written
        change = self.change or (lambda b: b)
        chunks = iter(lambda: decompressed.read(CHUNK), b"")
        for chunk in _changed(chunks, change):
            if self.error is not None:
                return  # a piece failed: stop reading (the caller sees the error)
            events = cutter.feed(chunk) if chunk is not None else cutter.finish()
            for kind, value in events:
                if kind == "main":
                    main.write(value)  # type: ignore[arg-type]
                elif kind == "start":
                    assert isinstance(value, Piece)
                    path = os.path.join(folder, f"piece-{value.number}.sql")
                    current = (value, open(path, "wb"), path)
                elif kind == "piece":
                    assert current is not None
                    current[1].write(value)
                elif kind == "end":
                    assert current is not None
                    current[1].close()
                    todo.put((cutter.preamble + current[0].prefix, current[2], current[0]))
                    current = None

    def _worker(self, todo: queue.Queue) -> None:
        while True:
            item = todo.get()
            if item is None:
                return
            head, path, piece = item
            try:
                if piece.after is not None:
                    self._done(piece.after).wait()  # the piece that creates its table
                if self.error is None:
                    self._load(path, head, piece.describe())
            except Exception as e:  # noqa: BLE001 - a worker that died would stop the reader
                self._fail(f"loading {piece.describe()}: {e}")
            self._done(piece.number).set()
            try:
                os.unlink(path)
            except OSError:
                pass

    def _load(self, path: str, head: bytes, what: str) -> None:
        err = TailBuffer()
        try:
            if self.tools_dir:
                cli = SidecarProcess(self.argv, self.tools_dir, stdin=True)
                cli.stdout.close()
            else:
                cli = spawn(
                    self.argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
                )
        except (SidecarError, RuntimeError) as e:
            self._fail(str(e))
            return
        reader = drain(cli.stderr, err)
        try:
            with open(path, "rb") as f:
                cli.stdin.write(head)
                for chunk in iter(lambda: f.read(CHUNK), b""):
                    cli.stdin.write(chunk)
            cli.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # the client ended: its exit status says why
        rc = cli.wait()
        reader.join(5)
        if rc != 0:
            text = err.text(self.secrets) or "no message"
            self._fail(f"{self.argv[0]} failed loading {what} (exit status {rc}): {text}{self.hint(text)}")
        if isinstance(cli, subprocess.Popen):
            stop(cli)

    def _done(self, number: int) -> threading.Event:
        """Set once piece `number` was loaded (or skipped after a failure)."""
        with self._lock:
            return self._loaded.setdefault(number, threading.Event())

    def _fail(self, message: str) -> None:
        with self._lock:
            if self.error is None:
                self.error = message


def _changed(chunks, change):
    """Each chunk through `change`, then what it holds back (change(b"")), then None (the end)."""
    for chunk in chunks:
        yield change(chunk)
    yield change(b"")
    yield None
