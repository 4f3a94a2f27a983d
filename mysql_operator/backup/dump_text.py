"""Pure: what the backup and the restore read and rewrite in a dump's text - the snapshot's GTID
position, the databases it creates, its stored objects' definers."""

from __future__ import annotations

import re
from typing import Callable

from mysql_operator.db.flavor import Flavor

_MARIADB_GTID = re.compile(r"^-- SET GLOBAL gtid_slave_pos\s*=\s*'([0-9,\- ]*)'", re.M)
_MYSQL_GTID = re.compile(r"SET @@GLOBAL\.GTID_PURGED\s*=\s*(?:/\*!80000 '\+'\*/\s*)?'([^']*)'", re.S)


def gtid_from_dump(flavor: Flavor, text: str) -> str | None:
    """The snapshot's GTID position from the dump's head or tail (None if not there)."""
    if flavor is Flavor.MARIADB:
        found = _MARIADB_GTID.findall(text)
        return found[-1].strip() if found else None
    m = _MYSQL_GTID.search(text)
    return re.sub(r"\s+", "", m.group(1)) if m else None


# The lines of a dump that give a stored object its definer, as mysqldump and mariadb-dump write
# them: a routine's CREATE, a view's SQL SECURITY comment, a trigger's and an event's CREATE.
_DEFINER_LINE = re.compile(
    rb"^(CREATE |/\*!50013 |/\*!50003 CREATE\*/ /\*!50017 |/\*!50003 CREATE\*/ /\*!50020 "
    rb"|/\*!50106 CREATE\*/ /\*!50117 )DEFINER=`(?:[^`]|``)*`@`(?:[^`]|``)*`"
)


# A database's CREATE, as the dump tools and the binlog tools write it: the name is quoted or plain
_CREATE_DATABASE = re.compile(
    rb"^\s*CREATE\s+(?:DATABASE|SCHEMA)\s+(?:/\*!\d*\s*IF\s+NOT\s+EXISTS\s*\*/\s*|IF\s+NOT\s+EXISTS\s+)?"
    rb"(`(?:[^`]|``)+`|[A-Za-z0-9_$]+)",
    re.I,
)
GTID_LINE_LIMIT = 1 << 20  # the longest GTID statement a dump's head may hold (bytes)


def created_database(line: bytes) -> str | None:
    """The database `line` (a dump's or a binlog tool's statement) creates; None if it creates
    none, or names it in bytes that are not UTF-8."""
    m = _CREATE_DATABASE.match(line)
    if m is None:
        return None
    try:
        name = m.group(1).decode()
    except UnicodeDecodeError:
        return None
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


class DumpFilter:
    """Pure but for `on_database`; fed a dump piece by piece (pipeline.pass_on's `change`), line by
    line:
    - `on_database(name)` is called for each database the dump creates (its CREATE DATABASE
      line), before that line passes on: the restore grants the load account on it there;
    - `strip_gtid` (MySQL): the GTID statement (`SET @@GLOBAL.GTID_PURGED=...;`, one line or
      more) is held back and its set kept in `gtid_purged`: the restore sets it as its own
      account after the load (the load account may not set global variables);
    - `definer`: every stored object's DEFINER becomes it (the restore's application account),
      whoever defined it in the source. Only the dump tools' definer lines change
      (_DEFINER_LINE); a line of data never starts that way (an INSERT does not). What a dump
      writes otherwise is checked after the load (restore_server.foreign_definers).
    A problem is kept in `errors`, never raised (the pass-on thread would end silently)."""

    def __init__(
        self,
        definer: str | None = None,
        on_database: Callable[[str], None] | None = None,
        strip_gtid: bool = False,
    ):
        self.definer = b"DEFINER=" + definer.encode() if definer else None
        self.on_database = on_database
        self.strip_gtid = strip_gtid
        self.partial: list[bytes] = []
        self.held: bytes | None = None  # the GTID statement so far
        self.gtid_purged: str | None = None
        self.errors: list[str] = []

    def _gtid(self, line: bytes) -> bytes:
        assert self.held is not None
        self.held += line
        if len(self.held) > GTID_LINE_LIMIT:
            self.errors.append(f"the dump's GTID statement is longer than {GTID_LINE_LIMIT} bytes")
            out, self.held = self.held, None
            return out
        if not self.held.rstrip().endswith(b";"):
            return b""
        found = _MYSQL_GTID.search(self.held.decode(errors="replace"))
        if found is None:
            self.errors.append("the dump's GTID statement does not read as one")
        else:
            self.gtid_purged = re.sub(r"\s+", "", found.group(1))
        self.held = None
        return b""

    def _line(self, line: bytes) -> bytes:
        if self.held is not None:
            return self._gtid(line)
        if self.strip_gtid and line.startswith(b"SET @@GLOBAL.GTID_PURGED"):
            self.held = b""
            return self._gtid(line)
        if self.on_database is not None:
            name = created_database(line)
            if name is not None:
                self.on_database(name)
        if self.definer is not None:
            m = _DEFINER_LINE.match(line)
            if m is not None:
                return m.group(1) + self.definer + line[m.end() :]
        return line

    def __call__(self, chunk: bytes) -> bytes:
        if not chunk:  # the end: what is held back
            rest, self.partial = b"".join(self.partial), []
            out = self._line(rest) if rest else b""
            if self.held is not None:
                self.errors.append("the dump ends inside its GTID statement")
                self.held = None
            return out
        *complete, last = chunk.split(b"\n")
        if not complete:
            self.partial.append(last)
            return b""
        first = b"".join(self.partial) + complete[0]
        self.partial = [last] if last else []
        return b"".join(self._line(x + b"\n") for x in (first, *complete[1:]))
