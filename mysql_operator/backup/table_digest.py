"""What a logical dump holds, table by table, read from the dump itself as it streams past: each
table's row count and a digest of its rows that does not depend on their order (issue 49: a
restore drill dumps the restored server the same way and compares the two, table by table).

Pure: fed the dump in pieces of any size (`feed`), it keeps only the line being read. It reads
the lines the dump tools write for data - `USE `db`;` (they dump with --databases), `CREATE TABLE
`t` (` and `INSERT INTO `t` VALUES (...),(...);` (one statement a line; MariaDB 11's tool writes
each row on a line of its own after `VALUES`), every string escaped so that no newline stands
inside one - and nothing else. A row's digest is that of its literal text as the
tool wrote it (so the same tool and version writing the same data give the same digests), mixed
with its table's name; a table's digest is the sum of its rows' modulo 2^32, twice (CRC-32 and
Adler-32: 64 bits), so the order the rows come in does not matter and a missing, extra or changed
row changes it. It detects damage, not tampering: nobody chooses the rows to collide.

Every row costs a regular expression match and two checksums computed in C (zlib), about 70 MB/s
of dump on one core here: the backup Job runs it in a process of its own (`python -m
mysql_operator.backup.table_digest`, the dump on stdin, the tables as JSON on stdout), beside
the compressor, on the dump's bytes as they pass (backup/stream.py).
"""

from __future__ import annotations

import json
import os
import re
import sys
import zlib
from dataclasses import dataclass, field
from itertools import repeat

# a value list's rows: a parenthesised run of quoted strings (backslash escapes, as the dump tools
# write them) and anything else but quotes and parentheses (numbers, NULL, 0x..., b'...' is quoted)
_ROW = re.compile(rb"\((?:'(?:[^'\\]++|\\.)*+'|[^'()]++)*+\)", re.S)
_INSERT = re.compile(rb"INSERT INTO `((?:[^`]|``)+)` VALUES ?")
_USE = re.compile(rb"USE `((?:[^`]|``)+)`;")
_CREATE = re.compile(rb"CREATE TABLE `((?:[^`]|``)+)` \(")
MASK = (1 << 32) - 1
# the longest line read: a dump tool's lines are about its net_buffer_length (1 MiB by default, 16
# MiB at most) unless one row is longer; holding this much (and its rows once more) fits the backup
# Job's memory limit beside its upload parts. A longer line is an error (the backup goes on
# without digests), not a partial count
MAX_LINE = 64 * 1024 * 1024


@dataclass
class TableDigest:
    """One table's rows as the dump holds them."""

    rows: int = 0
    crc: int = 0  # the sum of its rows' CRC-32s, modulo 2^32
    adler: int = 0  # and of their Adler-32s

    @property
    def digest(self) -> str:
        return f"{self.crc:08x}{self.adler:08x}"

    def as_dict(self) -> dict[str, int | str]:
        return {"rows": self.rows, "digest": self.digest}

    @classmethod
    def from_dict(cls, d: object) -> "TableDigest":
        """As as_dict wrote it; ValueError otherwise."""
        if not isinstance(d, dict) or not isinstance(d.get("rows"), int) or d["rows"] < 0:
            raise ValueError(f"not a table's rows and digest: {d!r}")
        digest = d.get("digest")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{16}", digest):
            raise ValueError(f"not a table's rows and digest: {d!r}")
        return cls(d["rows"], int(digest[:8], 16), int(digest[8:], 16))


@dataclass
class DumpDigest:
    """Fed a dump piece by piece; `tables` maps "db.table" to its TableDigest. A line longer than
    MAX_LINE is an error (`errors`), not read in part."""

    tables: dict[str, TableDigest] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _database: str = ""
    _line: bytearray = field(default_factory=bytearray)
    _skipping: bool = False  # inside a line too long to keep
    _inserting: str | None = None  # the table of an INSERT statement not ended yet

    def feed(self, piece: bytes) -> None:
        start = 0
        while True:
            end = piece.find(b"\n", start)
            if end < 0:
                self._keep(piece[start:])
                return
            self._keep(piece[start:end])
            if not self._skipping:
                self._read(self._line)
            self._line.clear()
            self._skipping = False
            start = end + 1

    def finish(self) -> dict[str, TableDigest]:
        """The tables once the dump has ended (a last line without a newline is read too)."""
        if self._line and not self._skipping:
            self._read(self._line)
        self._line.clear()
        return self.tables

    def _keep(self, part: bytes) -> None:
        if self._skipping:
            return
        if len(self._line) + len(part) > MAX_LINE:
            self.errors.append(f"a line of the dump is longer than {MAX_LINE} bytes: not read")
            self._line.clear()
            self._skipping = True
            return
        self._line += part

    def _read(self, line: bytearray) -> None:
        if self._inserting is not None:  # an INSERT whose rows come one a line (MariaDB 11)
            self._rows(self._inserting, line, 0)
            return
        if line.startswith(b"USE `"):
            m = _USE.match(line)
            if m:
                self._database = _name(m.group(1))
            return
        if line.startswith(b"CREATE TABLE `"):  # a table with no rows has no INSERT
            m = _CREATE.match(line)
            if m:
                self.tables.setdefault(f"{self._database}.{_name(m.group(1))}", TableDigest())
            return
        if not line.startswith(b"INSERT INTO `"):
            return
        m = _INSERT.match(line)
        if m is None:
            return
        self._rows(f"{self._database}.{_name(m.group(1))}", line, m.end())

    def _rows(self, table: str, line: bytearray, start: int) -> None:
        """The rows of an INSERT's line; the statement goes on past it unless it ends with `;`."""
        salt = table.encode() + b"\0"
        t = self.tables.setdefault(table, TableDigest())
        rows = _ROW.findall(line, start)
        t.rows += len(rows)
        t.crc = (t.crc + sum(map(zlib.crc32, rows, repeat(zlib.crc32(salt))))) & MASK
        t.adler = (t.adler + sum(map(zlib.adler32, rows, repeat(zlib.adler32(salt))))) & MASK
        self._inserting = None if line.rstrip().endswith(b";") else table


def _name(quoted: bytes | bytearray) -> str:
    return bytes(quoted).replace(b"``", b"`").decode("utf-8", "replace")


def differences(expected: dict[str, TableDigest], found: dict[str, TableDigest]) -> list[str]:
    """What differs between two dumps' tables, one line a table, sorted: missing, extra, another
    row count, the same count but other rows."""
    out = []
    for table in sorted(set(expected) | set(found)):
        e, f = expected.get(table), found.get(table)
        if f is None:
            out.append(f"{table}: missing (the backup has {e.rows if e else 0} rows)")
        elif e is None:
            out.append(f"{table}: not in the backup ({f.rows} rows restored)")
        elif e.rows != f.rows:
            out.append(f"{table}: {f.rows} rows restored, the backup has {e.rows}")
        elif e.digest != f.digest:
            out.append(f"{table}: {f.rows} rows as in the backup, but other values")
    return out


def tables_json(tables: dict[str, TableDigest]) -> dict[str, dict[str, int | str]]:
    return {name: t.as_dict() for name, t in sorted(tables.items())}


def tables_from_json(value: object) -> dict[str, TableDigest]:
    """{"db.table": {"rows": n, "digest": hex}} as tables_json wrote it; ValueError otherwise."""
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValueError("not a map of tables to their rows and digest")
    return {name: TableDigest.from_dict(d) for name, d in value.items()}


def main() -> int:
    """The dump on stdin; {"tables": ..., "errors": [...]} on stdout once it ended."""
    d = DumpDigest()
    src = sys.stdin.fileno()
    while piece := os.read(src, 1 << 20):
        d.feed(piece)
    json.dump({"tables": tables_json(d.finish()), "errors": d.errors}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
