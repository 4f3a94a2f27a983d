"""A dump cut into pieces that load at once (the restore's parallel load, issue 49): pure, fed the
dump's plaintext piece by piece as it streams.

What a dump tool (mysqldump, mariadb-dump; `--databases`) writes is a preamble of session settings,
then per database a `Current Database` section (CREATE DATABASE ... IF NOT EXISTS, USE), one
section per table (its structure, its rows, its triggers), its views, events and routines, then a
trailer that restores the session. Each section starts with a header comment at the start of a
line (`-- Table structure for table ...`); a row never holds a raw newline (the tools escape it),
and a header inside a stored program's body (between DELIMITER ;; and DELIMITER ;) is not one.

The pieces:
- `preamble`: everything before the first section; each piece's session runs it first.
- table pieces: runs of consecutive table sections, cut at a table once a piece holds `target`
  bytes; each starts with the CREATE DATABASE and USE of the database it is in (CREATE DATABASE
  ... IF NOT EXISTS, so running it again is harmless). A run loads in its own session exactly as
  it would in the dump's one session: what a table section changes in the session it restores.
  A table whose rows pass `target` is cut between two INSERT statements: its further rows are
  pieces that load once the piece that created the table has (`after`), and what follows its
  rows (its triggers) goes to the rest, so that no trigger fires on a restored row.
- the rest (`main`): the preamble, every database section, views, events, routines and the
  trailer, in order; it loads last, once every table is there (a view checks the tables it reads).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER = re.compile(
    rb"-- (Table structure for table|Current Database:|Temporary (?:view|table) structure for view"
    rb"|Final view structure for view|Dumping events for database|Dumping routines for database)"
)
_DELIMITER = re.compile(rb"DELIMITER\s+(\S+)", re.IGNORECASE)
# a table's rows are loaded between these: left out of a piece (see Cutter)
_LOCKING = re.compile(rb"(?:LOCK TABLES `(?:[^`]|``)+` WRITE|UNLOCK TABLES);\s*$")
MAX_LINE = 64 * 1024 * 1024  # a longer line is not a dump's (an INSERT is cut well below it)


class PieceError(Exception):
    pass


@dataclass
class Piece:
    """A run of table sections - or more rows of a table too large for one piece, to load once
    piece `after` (which created the table) has - loaded after `prefix` (its database's CREATE
    DATABASE and USE)."""

    number: int
    prefix: bytes
    tables: int = 0
    size: int = 0
    after: int | None = None

    def describe(self) -> str:
        if self.after is not None:
            return f"piece {self.number} (rows of a table piece {self.after} created)"
        return f"piece {self.number} ({self.tables} tables)"


@dataclass
class Cutter:
    """Fed with `feed(bytes)`; returns events in dump order: ("main", bytes), ("start", Piece),
    ("piece", bytes) - the current piece's - and ("end", Piece). `finish()` ends the last ones.
    A piece leaves out its tables' LOCK TABLES ... WRITE and UNLOCK TABLES lines: a table's
    foreign keys may name a table another session is loading at the same time, and MariaDB then
    refuses an INSERT into the locked table (1100, "Table ... was not locked with LOCK TABLES");
    InnoDB loads no faster under them."""

    target: int = 64 * 1024 * 1024
    preamble: bytes = b""
    _partial: bytes = b""
    _delimiter: bytes = b";"
    _in_preamble: bool = True
    _database: bytes = b""  # the current database section's lines (CREATE DATABASE, USE)
    _in_database: bool = False
    _piece: Piece | None = None
    _in_table: bool = False
    _count: int = 0
    _held: bytes | None = None  # a bare "--" line, until the next line says where it goes
    # the current table's section: "structure", then "rows" (its INSERT statements), then "tail"
    # (what follows them: its triggers); the piece that created it; whether its rows were cut
    _part: str = "structure"
    _head: int = 0
    _split: bool = False
    _boundary: bool = True  # the last line of the piece ended a statement

    def feed(self, data: bytes) -> list[tuple[str, object]]:
        out: list[tuple[str, object]] = []
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_LINE:
            raise PieceError(f"a line of the dump is longer than {MAX_LINE} bytes")
        for line in lines:
            self._line(line + b"\n", out)
        return out

    def finish(self) -> list[tuple[str, object]]:
        out: list[tuple[str, object]] = []
        if self._partial:
            self._line(self._partial, out)
            self._partial = b""
        if self._held is not None:
            self._route(self._held, out)
            self._held = None
        self._end_piece(out)
        return out

    # -- one line ----------------------------------------------------------------------------
    def _line(self, line: bytes, out: list) -> None:
        # a header's block starts with a bare "--" line: it goes with the section it opens
        if line == b"--\n" and self._delimiter == b";":
            if self._held is not None:
                self._route(self._held, out)
            self._held = line
            return
        held, self._held = self._held, None
        kind = self._header(line)
        if kind is not None:
            self._in_preamble = False
            self._in_database = kind == b"Current Database:"
            if kind == b"Table structure for table":
                self._table(out)
            else:
                self._in_table = False
                self._end_piece(out)
            if self._in_database:
                self._database = b""
        if held is not None:
            self._route(held, out)
        self._route(line, out)

    def _route(self, line: bytes, out: list) -> None:
        if self._in_table:
            self._emit_piece(line, out)
            return
        if self._in_preamble:
            self.preamble += line
        elif self._in_database and not line.startswith(b"--") and line.strip():
            self._database += line  # CREATE DATABASE ...; USE ...;
        self._delimit(line)
        out.append(("main", line))

    def _header(self, line: bytes) -> bytes | None:
        """The kind of section `line` starts (None: it starts none); never inside a stored
        program's body (while the delimiter is not ';')."""
        if self._delimiter != b";" or not line.startswith(b"-- "):
            return None
        m = _HEADER.match(line)
        return m.group(1) if m else None

    def _delimit(self, line: bytes) -> None:
        m = _DELIMITER.match(line.strip())
        if m:
            self._delimiter = m.group(1)

    # -- pieces --------------------------------------------------------------------------------
    def _table(self, out: list) -> None:
        self._in_table = True
        self._part, self._split, self._boundary = "structure", False, True
        p = self._piece
        if p is not None and p.size >= self.target:
            self._end_piece(out)
            p = None
        if p is None:
            if not self._database:
                raise PieceError(
                    "a table comes before any database's CREATE DATABASE: not a dump of --databases"
                )
            self._count += 1
            self._piece = Piece(self._count, self._database)
            out.append(("start", self._piece))
        self._piece.tables += 1

    def _emit_piece(self, line: bytes, out: list) -> None:
        assert self._piece is not None
        inserting = line.startswith(b"INSERT INTO ")
        if self._part == "structure" and inserting:
            self._part, self._head = "rows", self._piece.number
        elif self._part == "rows" and self._boundary and self._delimiter == b";":
            if not inserting:
                self._part = "tail"
            elif self._piece.size >= self.target:  # more rows of this table: a piece of their own
                out.append(("end", self._piece))
                self._count += 1
                self._piece = Piece(self._count, self._database, after=self._head)
                out.append(("start", self._piece))
                self._split = True
        if self._part == "tail" and self._split:
            # a cut table's triggers are made once all its rows are there: with the rest, last
            self._delimit(line)
            out.append(("main", line))
            return
        if self._part != "structure" or line.startswith(b"LOCK TABLES"):
            if self._delimiter == b";" and _LOCKING.match(line):
                self._boundary = True
                return  # left out: see the class
        self._delimit(line)
        self._boundary = line.rstrip().endswith(b";")
        self._piece.size += len(line)
        out.append(("piece", line))

    def _end_piece(self, out: list) -> None:
        if self._piece is not None:
            out.append(("end", self._piece))
            self._piece = None
