"""GTID positions as values: parse, compare, subtract. Pure; no server needed.

Two shapes, one interface (`contains`, `subtract`, `union`, `is_empty`, `origins`,
`without_origins`, `str()`):

* **MySQL** GTID sets `3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7,<uuid>:tag:1-3`: intervals of
  transaction numbers per source uuid (and, from 8.3, per tag). Exact set arithmetic.
* **MariaDB** GTIDs `domain-server_id-seq_no`. The server keeps, in `@@gtid_binlog_state`, the last
  seq_no per (domain, server_id); with `gtid_strict_mode` seq_no grows along one history per
  domain, so "has (d, s, n)" means "has every transaction of server s in domain d up to n". We keep
  the highest seq_no per (domain, server_id), which makes positions (`gtid_slave_pos`,
  `Gtid_IO_Pos`: one GTID per domain) and binlog states comparable in the same way. Comparing per
  (domain, server_id) rather than per domain is what catches a replica that applied transactions
  of an old primary the new primary never received (per-domain seq_no alone says "behind").
  `subtract` returns, for each (domain, server_id) where self is ahead, self's last GTID there.

The origin of a GTID is the server that wrote it: the uuid (MySQL) or the server_id (MariaDB),
as a string. Errant transactions of a replica are the ones it has that its primary lacks.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Protocol, TypeVar

G = TypeVar("G", bound="GtidSet")


class GtidParseError(ValueError):
    pass


class GtidSet(Protocol):
    def contains(self: G, other: G) -> bool: ...
    def subtract(self: G, other: G) -> G: ...
    def union(self: G, other: G) -> G: ...
    def intersect(self: G, other: G) -> G: ...
    def is_empty(self) -> bool: ...
    def origins(self) -> frozenset[str]: ...
    def without_origins(self: G, origins: Iterable[str]) -> G: ...


def is_ahead_of(a: G, b: G) -> bool:
    """a has everything b has, and more."""
    return a.contains(b) and not b.contains(a)


def errant(replica: G, primary: G) -> G:
    """Transactions on `replica` that `primary` lacks (empty for a healthy replica)."""
    return replica.subtract(primary)


# ----------------------------------------------------------------------------------------------
# MariaDB
# ----------------------------------------------------------------------------------------------
_MARIADB_GTID = re.compile(r"^(\d+)-(\d+)-(\d+)$")


@dataclass(frozen=True)
class MariaDBGtids:
    """Highest seq_no per (domain_id, server_id)."""

    entries: tuple[tuple[int, int, int], ...] = ()  # sorted (domain, server_id, seq_no)

    @classmethod
    def of(cls, items: Iterable[tuple[int, int, int]]) -> "MariaDBGtids":
        best: dict[tuple[int, int], int] = {}
        for d, s, n in items:
            if min(d, s, n) < 0:
                raise GtidParseError(f"negative number in GTID {d}-{s}-{n}")
            best[(d, s)] = max(n, best.get((d, s), -1))
        return cls(tuple(sorted((d, s, n) for (d, s), n in best.items())))

    @classmethod
    def parse(cls, text: str | None) -> "MariaDBGtids":
        """'0-1-100,1-2-5' (spaces and newlines allowed); '' or None is empty."""
        items = []
        for part in (text or "").replace("\n", ",").split(","):
            part = part.strip()
            if not part:
                continue
            m = _MARIADB_GTID.match(part)
            if not m:
                raise GtidParseError(
                    f"not a MariaDB GTID: {part!r} (expected domain-server_id-seq_no, e.g. 0-1-42)"
                )
            items.append((int(m[1]), int(m[2]), int(m[3])))
        return cls.of(items)

    def _map(self) -> dict[tuple[int, int], int]:
        return {(d, s): n for d, s, n in self.entries}

    def contains(self, other: "MariaDBGtids") -> bool:
        mine = self._map()
        return all(mine.get((d, s), -1) >= n for d, s, n in other.entries if n > 0)

    def covers(self, other: "MariaDBGtids") -> bool:
        """Per domain: no seq_no of `other` is above this one's highest in that domain, whatever
        server wrote it. True of one history (a domain's seq_nos grow, whichever server is the
        primary), where a position (one GTID per domain, as `gtid_binlog_pos`) stands for every
        earlier GTID of its domain; `contains` compares server by server."""
        top: dict[int, int] = {}
        for d, _, n in self.entries:
            top[d] = max(n, top.get(d, -1))
        return all(top.get(d, -1) >= n for d, _, n in other.entries if n > 0)

    def subtract(self, other: "MariaDBGtids") -> "MariaDBGtids":
        theirs = other._map()
        return MariaDBGtids(tuple(e for e in self.entries if e[2] > 0 and theirs.get((e[0], e[1]), 0) < e[2]))

    def union(self, other: "MariaDBGtids") -> "MariaDBGtids":
        return MariaDBGtids.of(self.entries + other.entries)

    def intersect(self, other: "MariaDBGtids") -> "MariaDBGtids":
        """Per (domain, server_id), the lower of the two highest seq_nos: what both hold."""
        theirs = other._map()
        return MariaDBGtids.of((d, s, min(n, theirs[(d, s)])) for d, s, n in self.entries if (d, s) in theirs)

    def is_empty(self) -> bool:
        return all(n == 0 for _, _, n in self.entries)

    def origins(self) -> frozenset[str]:
        return frozenset(str(s) for _, s, n in self.entries if n > 0)

    def without_origins(self, origins: Iterable[str]) -> "MariaDBGtids":
        drop = set(origins)
        return MariaDBGtids(tuple(e for e in self.entries if str(e[1]) not in drop))

    def position(self) -> str:
        """One GTID per domain (the highest seq_no), as `gtid_slave_pos` wants it."""
        best: dict[int, tuple[int, int]] = {}
        for d, s, n in self.entries:
            if n >= best.get(d, (0, -1))[1]:
                best[d] = (s, n)
        return ",".join(f"{d}-{s}-{n}" for d, (s, n) in sorted(best.items()))

    def __str__(self) -> str:
        return ",".join(f"{d}-{s}-{n}" for d, s, n in self.entries)


# ----------------------------------------------------------------------------------------------
# MySQL
# ----------------------------------------------------------------------------------------------
_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
_TAG = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,31}$")
_INTERVAL = re.compile(r"^(\d+)(?:-(\d+))?$")

Interval = tuple[int, int]  # inclusive


def _normalize(intervals: Iterable[Interval]) -> tuple[Interval, ...]:
    out: list[list[int]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


def _subtract_intervals(xs: tuple[Interval, ...], ys: tuple[Interval, ...]) -> tuple[Interval, ...]:
    """xs minus ys, both normalized (sorted, disjoint, not adjacent): one merge pass, O(len(xs) +
    len(ys)). The result is normalized: pieces of one x are split by a y, pieces of two xs by
    the gap between them."""
    out: list[Interval] = []
    j = 0
    for a, b in xs:
        while j < len(ys) and ys[j][1] < a:
            j += 1  # ends before this x, so before every later one
        start = a
        k = j
        while k < len(ys) and ys[k][0] <= b and start <= b:
            c, d = ys[k]
            if c > start:
                out.append((start, c - 1))
            start = max(start, d + 1)
            k += 1
        if start <= b:
            out.append((start, b))
    return tuple(out)


def _covers(ivs: tuple[Interval, ...], starts: list[int], a: int, b: int) -> bool:
    """Whether the normalized intervals `ivs` (whose starts are `starts`) hold all of a..b."""
    i = bisect.bisect_right(starts, a) - 1
    return i >= 0 and ivs[i][1] >= b


def _canon_uuid(u: str) -> str:
    h = u.replace("-", "").lower()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass(frozen=True)
class MySQLGtidSet:
    """Transaction intervals per (source uuid, tag); tag '' is the untagged set."""

    sets: tuple[tuple[tuple[str, str], tuple[Interval, ...]], ...] = ()
    _index: dict[tuple[str, str], tuple[tuple[Interval, ...], list[int]]] | None = field(
        default=None, compare=False, repr=False, hash=False
    )

    @classmethod
    def of(cls, mapping: Mapping[tuple[str, str], Iterable[Interval]]) -> "MySQLGtidSet":
        items = []
        for key, ivs in mapping.items():
            norm = _normalize(ivs)
            if norm:
                items.append((key, norm))
        return cls(tuple(sorted(items)))

    @classmethod
    def parse(cls, text: str | None) -> "MySQLGtidSet":
        """MySQL's text form (`@@gtid_executed`); whitespace and newlines are ignored."""
        mapping: dict[tuple[str, str], list[Interval]] = {}
        compact = re.sub(r"\s+", "", text or "")
        for part in compact.split(","):
            if not part:
                continue
            fields = part.split(":")
            uuid = fields[0]
            if not _UUID.match(uuid):
                raise GtidParseError(f"not a MySQL server uuid: {uuid!r} in GTID set part {part!r}")
            uuid = _canon_uuid(uuid)
            tag = ""
            mapping.setdefault((uuid, tag), [])
            for f in fields[1:]:
                m = _INTERVAL.match(f)
                if m:
                    a = int(m[1])
                    b = int(m[2]) if m[2] else a
                    if a < 1 or b < a:
                        raise GtidParseError(f"bad interval {f!r} in GTID set part {part!r}")
                    mapping.setdefault((uuid, tag), []).append((a, b))
                elif _TAG.match(f):
                    tag = f.lower()
                    mapping.setdefault((uuid, tag), [])
                else:
                    raise GtidParseError(f"bad interval or tag {f!r} in GTID set part {part!r}")
        return cls.of(mapping)

    def _map(self) -> dict[tuple[str, str], tuple[Interval, ...]]:
        return dict(self.sets)

    def union(self, other: "MySQLGtidSet") -> "MySQLGtidSet":
        merged: dict[tuple[str, str], list[Interval]] = {}
        for key, ivs in self.sets + other.sets:
            merged.setdefault(key, []).extend(ivs)
        return MySQLGtidSet.of(merged)

    def subtract(self, other: "MySQLGtidSet") -> "MySQLGtidSet":
        theirs = other._map()
        return MySQLGtidSet.of({key: _subtract_intervals(ivs, theirs.get(key, ())) for key, ivs in self.sets})

    def intersect(self, other: "MySQLGtidSet") -> "MySQLGtidSet":
        return self.subtract(self.subtract(other))

    def contains(self, other: "MySQLGtidSet") -> bool:
        """O(m log n) for m intervals in `other`: each is looked up in this set's (normalized,
        so an interval is held only if one of ours covers it whole)."""
        mine = self._starts()
        for key, ivs in other.sets:
            if key not in mine:
                return False
            own, starts = mine[key]
            if not all(_covers(own, starts, a, b) for a, b in ivs):
                return False
        return True

    def _starts(self) -> dict[tuple[str, str], tuple[tuple[Interval, ...], list[int]]]:
        """Per key, its intervals and their starts (for bisect); computed once per set."""
        if self._index is None:
            index = {key: (ivs, [a for a, _ in ivs]) for key, ivs in self.sets}
            object.__setattr__(self, "_index", index)
            return index
        return self._index

    def is_empty(self) -> bool:
        return not self.sets

    def count(self) -> int:
        return sum(b - a + 1 for _, ivs in self.sets for a, b in ivs)

    def origins(self) -> frozenset[str]:
        return frozenset(u for (u, _), _ in self.sets)

    def without_origins(self, origins: Iterable[str]) -> "MySQLGtidSet":
        drop = {_canon_uuid(o) if _UUID.match(o) else o for o in origins}
        return MySQLGtidSet(tuple(item for item in self.sets if item[0][0] not in drop))

    def __str__(self) -> str:
        by_uuid: dict[str, list[str]] = {}
        for (uuid, tag), ivs in self.sets:
            text = ":".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ivs)
            by_uuid.setdefault(uuid, []).append(f"{tag}:{text}" if tag else text)
        return ",".join(f"{u}:" + ":".join(parts) for u, parts in sorted(by_uuid.items()))


def parser_for(flavor: str) -> Callable[[str | None], MariaDBGtids | MySQLGtidSet]:
    """The GTID text parser of `flavor` ("mysql" or "mariadb")."""
    return MySQLGtidSet.parse if flavor == "mysql" else MariaDBGtids.parse
