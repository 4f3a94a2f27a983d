"""An account's grants as SHOW GRANTS prints them (`parse_show_grants`), and the REVOKEs and GRANTs
that take them to the wanted ones (`plan`). Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from mysql_operator.db.flavor import Flavor, ServerVersion
from mysql_operator.db.accounts import Grant, flavor_of


# ---------------------------------------------------------------------------------- SHOW GRANTS
# privileges that one flavor prints under another name
_ALIASES = {
    Flavor.MARIADB: {
        "REPLICATION CLIENT": "BINLOG MONITOR",
        "REPLICA MONITOR": "SLAVE MONITOR",
        "REPLICATION REPLICA ADMIN": "REPLICATION SLAVE ADMIN",
        "REPLICATION REPLICA": "REPLICATION SLAVE",
    },
    Flavor.MYSQL: {},
}
_GRANT_LINE = re.compile(
    r"^GRANT (?P<privileges>[^`(]+?) ON (?P<db>\*|`(?:[^`]|``)*`)\.(?P<table>\*|`(?:[^`]|``)*`) "
    r"TO (?P<tail>.*)$",
    re.S,
)


Grants = dict[str, tuple[frozenset[str], bool]]  # target -> (privileges, grant option)


def _unquote(part: str) -> str:
    return part if part == "*" else part[1:-1].replace("``", "`")


def _database(part: str, database_level: bool) -> str:
    """A database name as SHOW GRANTS prints it, literal: a database-level grant's escaped
    wildcards (`app\\_db`) are the characters themselves."""
    name = _unquote(part)
    return name.replace("\\_", "_").replace("\\%", "%") if database_level else name


def parse_show_grants(lines: Iterable[str], v: ServerVersion | Flavor | str) -> Grants:
    """SHOW GRANTS output as {target: (privileges, grant option)}, targets as in `Grant.target`.
    Only global, database and table grants: roles, PROXY, routine and column grants (which
    the operator never gives) are left out. USAGE is no privilege."""
    aliases = _ALIASES[flavor_of(v)]
    out: dict[str, tuple[set[str], bool]] = {}
    for line in lines:
        m = _GRANT_LINE.match(line.strip())
        if not m or m["privileges"].startswith("PROXY"):
            continue
        target = f"{_database(m['db'], m['table'] == '*')}.{_unquote(m['table'])}"
        privileges = {aliases.get(p.strip().upper(), p.strip().upper()) for p in m["privileges"].split(",")}
        privileges.discard("USAGE")
        held, option = out.setdefault(target, (set(), False))
        held |= privileges
        out[target] = (held, option or " WITH GRANT OPTION" in m["tail"])
    return {t: (frozenset(p), o) for t, (p, o) in out.items() if p or o}


def expected(grants: Iterable[Grant]) -> Grants:
    """`grants` in the shape `parse_show_grants` returns."""
    out: dict[str, tuple[set[str], bool]] = {}
    for g in grants:
        held, option = out.setdefault(g.target, (set(), False))
        out[g.target] = (held | set(g.privileges), option or g.grant_option)
    return {t: (frozenset(p), o) for t, (p, o) in out.items()}


@dataclass(frozen=True)
class Plan:
    """What converges an account's grants: these REVOKEs first (GRANT OPTION is revoked as the
    privilege "GRANT OPTION"), then these GRANTs."""

    revoke: tuple[Grant, ...]
    grant: tuple[Grant, ...]


def plan(current: Mapping[str, tuple[frozenset[str], bool]], desired: Iterable[Grant]) -> Plan:
    """Pure: what turns `current` (parse_show_grants) into exactly `desired`. ALL PRIVILEGES
    wanted on a target covers whatever is held there; held but not wanted, it is revoked whole.
    Targets whose names a `Grant` refuses (quotes, dots) are left as they are."""
    want = expected(desired)
    revoke, grant = [], []
    for target, (held, option) in sorted(current.items()):
        wanted, wanted_option = want.get(target, (frozenset(), False))
        extra = frozenset() if "ALL PRIVILEGES" in wanted else held - wanted
        try:
            if extra:
                revoke.append(Grant(tuple(sorted(extra)), target))
            if option and not wanted_option:
                revoke.append(Grant(("GRANT OPTION",), target))
        except ValueError:
            continue
    for g in desired:
        held, option = current.get(g.target, (frozenset(), False))
        if "ALL PRIVILEGES" in held - set(g.privileges):
            held = frozenset()  # ALL PRIVILEGES revoked above
        if not set(g.privileges) <= held or (g.grant_option and not option):
            grant.append(g)
    return Plan(tuple(revoke), tuple(grant))
