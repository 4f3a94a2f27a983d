"""mariadb-backup's stream format (xbstream), read as it passes by: every chunk's checksum is
checked, and a few small files of the copy are kept (the binary log position the copy is
consistent at). Pure: bytes in, facts out.

    reader = Reader(keep=POSITION_FILES)
    for piece in stream: reader.feed(piece)     # raises StreamError on a damaged stream
    reader.finish()                             # raises when the stream was cut short
    gtid = copy_position(reader.kept)           # "0-1-3,1-2-7": the copy's binlog GTID position

A chunk: the magic XBSTCK01, a flags byte, a type byte (P: a piece of a file, E: a file's end), the
file's path (length, 4 bytes little-endian, then the path); a P chunk then carries the piece's
length and offset (8 bytes each), its CRC-32 (4 bytes) and the piece. A stream ends after its
last chunk (no trailer).
"""

from __future__ import annotations

import re
import struct
import zlib
from typing import Collection

MAGIC = b"XBSTCK01"
_FIXED = len(MAGIC) + 2 + 4  # magic, flags, type, path length
_PIECE = 8 + 8 + 4  # length, offset, checksum
MAX_PATH = 4096
KEEP_LIMIT = 64 * 1024  # bytes kept of each file asked for
# where mariadb-backup writes the binary log position of the copy (10.x: xtrabackup_*; 11.x: mariadb_backup_*)
POSITION_FILES = ("mariadb_backup_binlog_info", "xtrabackup_binlog_info")
# the file mariadb-backup writes last: a stream that ends without it was cut short
LAST_FILES = ("mariadb_backup_info", "xtrabackup_info")
_GTID_LIST = re.compile(r"^\d+-\d+-\d+(,\d+-\d+-\d+)*$")


class StreamError(Exception):
    pass


class Reader:
    """Follows one xbstream; `kept` holds the files named in `keep` (their first KEEP_LIMIT
    bytes), `files` counts the files, `payload` the bytes of file content."""

    def __init__(self, keep: Collection[str] = ()):
        self.keep = frozenset(keep)
        self.kept: dict[str, bytes] = {}
        self.files = 0
        self.payload = 0
        self.chunks = 0
        self.last_file = ""  # the last file the stream ended
        self._head = bytearray()
        self._left = 0  # bytes of the current piece still to come
        self._path = ""
        self._crc = 0
        self._expected = 0

    def feed(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        i = 0
        while i < len(view):
            if self._left:
                n = min(self._left, len(view) - i)
                piece = view[i : i + n]
                self._crc = zlib.crc32(piece, self._crc)
                if self._path in self.keep:
                    have = self.kept.get(self._path, b"")
                    self.kept[self._path] = have + bytes(piece[: max(0, KEEP_LIMIT - len(have))])
                self._left -= n
                i += n
                if not self._left:
                    self._check()
                continue
            need = self._need()
            take = min(need - len(self._head), len(view) - i)
            self._head += view[i : i + take]
            i += take
            if len(self._head) == self._need():
                self._chunk()

    def finish(self) -> None:
        """The stream ended: StreamError unless it ended after mariadb-backup's last file."""
        if self._head or self._left:
            raise StreamError(f"the copy's stream ended inside a chunk of {self._path or 'a file'}")
        if not self.chunks:
            raise StreamError("the copy's stream is empty")
        if self.last_file not in LAST_FILES:
            raise StreamError(
                f"the copy's stream ended before mariadb-backup finished it (after {self.last_file})"
            )

    def _need(self) -> int:
        """The length of the current chunk's header, as far as its bytes so far tell."""
        if len(self._head) < _FIXED:
            return _FIXED
        if self._head[: len(MAGIC)] != MAGIC:
            raise StreamError(f"not an xbstream chunk after {self.chunks} chunks")
        (path_len,) = struct.unpack_from("<I", self._head, len(MAGIC) + 2)
        if path_len > MAX_PATH:
            raise StreamError(f"a chunk names a path of {path_len} bytes")
        kind = chr(self._head[len(MAGIC) + 1])
        if kind == "E":
            return _FIXED + path_len
        if kind == "P":
            return _FIXED + path_len + _PIECE
        raise StreamError(f"a chunk of unknown type {kind!r}")

    def _chunk(self) -> None:
        head = bytes(self._head)
        self._head.clear()
        self.chunks += 1
        (path_len,) = struct.unpack_from("<I", head, len(MAGIC) + 2)
        path = head[_FIXED : _FIXED + path_len].decode(errors="replace")
        if chr(head[len(MAGIC) + 1]) == "E":
            self.files += 1
            self.last_file = path
            return
        length, _offset, crc = struct.unpack_from("<QQI", head, _FIXED + path_len)
        self._path, self._crc, self._expected, self._left = path, 0, crc, length
        self.payload += length
        if not length:
            self._check()

    def _check(self) -> None:
        if self._crc != self._expected:
            raise StreamError(f"a piece of {self._path} does not match its checksum: the copy is damaged")


def copy_position(kept: dict[str, bytes]) -> str:
    """The GTID position (MariaDB's list) the copy is consistent at, from the position file
    mariadb-backup wrote into it ("<binlog file>\t<offset>\t<gtid list>")."""
    for name in POSITION_FILES:
        if name in kept:
            fields = kept[name].decode(errors="replace").split()
            if len(fields) >= 3 and _GTID_LIST.match(fields[2]):
                return fields[2]
            raise StreamError(f"the copy's {name} holds no GTID position (is the binary log on?)")
    raise StreamError("the copy holds no binary log position (is the binary log on?)")


def file_chunks(path: str, data: bytes) -> bytes:
    """Pure: a whole file as xbstream chunks (one piece, then its end), as mariadb-backup writes
    them: what a stream may carry after the copy's own files."""
    name = path.encode()
    head = MAGIC + b"\x00"
    piece = head + b"P" + struct.pack("<I", len(name)) + name
    piece += struct.pack("<QQI", len(data), 0, zlib.crc32(data)) + data
    return piece + head + b"E" + struct.pack("<I", len(name)) + name
