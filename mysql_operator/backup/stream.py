"""A backup's bytes on their way from their producer (a dump tool, a tar of a copy, a donor's
stream) to the compressor: counted, their first and last WINDOW bytes kept (the GTID position a
dump writes), and the parts uploaded counted (`counting`)."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol

from mysql_operator.backup.pipeline import CHUNK
from mysql_operator.backup.table_digest import TableDigest

WINDOW = 64 * 1024  # bytes of the dump's head and tail kept to read the GTID position
PAUSE = 0.001  # seconds the pump waits after a short read when the dump's pipe holds PIPE_SIZE


class Pieces(Protocol):
    """A donor's offer (mariadb_copy.Offer): its stream, piece by piece."""

    def pieces(self) -> Iterator[bytes]: ...


class Feed(Protocol):
    """What reads a copy's stream on its way (xbstream.Reader)."""

    def feed(self, piece: bytes) -> None: ...


@dataclass
class DumpStream:
    """Counts the dump's bytes and keeps its head and tail while pumping it to the compressor."""

    size: int = 0
    head: bytes = b""
    tail: bytes = b""
    error: list = field(default_factory=list)
    tee_error: str = ""  # why the copy to `tee` stopped (the backup goes on without it)
    tables: dict[str, TableDigest] | None = None  # what the table digests read of the dump
    tables_note: str = ""  # why there are none

    def pump_copy(self, offer: Pieces, dst, reader: Feed, tee=None) -> None:
        """Pass a MariaDB copy's stream from the donor to pipe `dst`, read by `reader` on the way
        (its checksums), and to pipe `tee` after `dst` when given (as pump's `tee`)."""
        try:
            out = dst.fileno()
            for piece in offer.pieces():
                reader.feed(piece)
                self.size += len(piece)
                view = memoryview(piece)
                while view:
                    view = view[os.write(out, view) :]
                if tee is not None:
                    tee = self._tee(tee, memoryview(piece))
        except BaseException as e:  # noqa: BLE001 - reported by before_complete
            self.error.append(e)
        finally:
            for f in (dst, tee):
                with contextlib.suppress(OSError, AttributeError):
                    f.close()

    def pump(self, src, dst, pause: float = 0, tee=None) -> None:
        """Copy pipe `src` to pipe `dst` through one reused buffer (no allocation per read).
        Reads land after the previous ones; when less than WINDOW bytes are left, the last WINDOW
        bytes move to the front, so the buffer always ends with the stream's latest WINDOW bytes.

        Dump tools write about 8 KiB at a time: woken for each write, this thread would spend
        more CPU switching than copying (the machine's cores are shared with the dump tool and
        the compressor). So after a short read it waits `pause` seconds, and the next read takes
        all that arrived meanwhile; the caller passes a pause only when `src` holds PIPE_SIZE,
        far more than the dump writes in that time: the dump never waits for the pump.

        Given a pipe `tee`, every byte goes to it too, after `dst` (the table digests' process);
        one it cannot write to any more is closed and left out (`tee_error`), and `tee` is
        closed when the stream ends."""
        view = memoryview(bytearray(CHUNK))
        pos = 0
        try:
            src, out = src.fileno(), dst.fileno()
            while True:
                if CHUNK - pos < WINDOW:
                    view[:WINDOW] = view[pos - WINDOW : pos]
                    pos = WINDOW
                n = os.readv(src, [view[pos:]])
                if not n:
                    break
                chunk = view[pos : pos + n]
                if len(self.head) < WINDOW:
                    self.head += bytes(chunk[: WINDOW - len(self.head)])
                self.size += n
                pos += n
                while chunk:
                    chunk = chunk[os.write(out, chunk) :]
                if tee is not None:
                    tee = self._tee(tee, view[pos - n : pos])
                if pause and n < WINDOW:
                    time.sleep(pause)
            self.tail = bytes(view[max(0, pos - WINDOW) : pos])
        except BaseException as e:  # noqa: BLE001 - reported by before_complete
            self.error.append(e)
        finally:
            for f in (dst, tee):
                with contextlib.suppress(OSError, AttributeError):
                    f.close()

    def _tee(self, tee, chunk: memoryview):
        """Write `chunk` to `tee`; None once it failed."""
        try:
            fd = tee.fileno()
            while chunk:
                chunk = chunk[os.write(fd, chunk) :]
            return tee
        except OSError as e:
            self.tee_error = f"the table digests stopped reading the dump: {e.strerror or e}"
            with contextlib.suppress(OSError):
                tee.close()
            return None


def counting(readinto: Callable[[memoryview], int], part_size: int, on_part: Callable[[], None]):
    """Wrap `readinto` to call on_part each time another part_size bytes went through."""
    state = {"n": 0}

    def wrapped(view: memoryview) -> int:
        n = readinto(view)
        before = state["n"] // part_size
        state["n"] += n
        if state["n"] // part_size > before:
            on_part()
        return n

    return wrapped
