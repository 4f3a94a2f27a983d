"""Pure: the SQL that converges a server to a MySQLDatabase, a MySQLUser or a MySQLGrant.

Each function takes the spec and what the server has (None: absent) and returns the statements,
in order, each with its bound parameters: identifiers are quoted here (and restricted to letters,
digits, '_', '-', '.' by api/sql.py), every value - a password, a user, a host, a character set -
is a parameter. Nothing a tenant wrote reaches the SQL text unquoted.
"""

from __future__ import annotations

from dataclasses import dataclass

from mysql_operator.api.sql import DATABASE_PRIVILEGES, TABLE_PRIVILEGES, DatabaseSpec, GrantSpec, UserSpec
from mysql_operator.db import accounts, password_hash
from mysql_operator.db import grant_plans
from mysql_operator.db.flavor import Flavor


@dataclass(frozen=True)
class Statement:
    sql: str
    args: tuple[object, ...] = ()
    what: str = ""  # for status and logs: never holds a password
    hide: tuple[str, ...] = ()  # arguments redacted from errors (a password or its hash)


@dataclass(frozen=True)
class DatabaseState:
    character_set: str
    collation: str


@dataclass(frozen=True)
class UserState:
    max_user_connections: int
    ssl_type: str  # '' (none), 'ANY' (REQUIRE SSL), 'X509', 'SPECIFIED'
    plugin: str


def quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def database(spec: DatabaseSpec, observed: DatabaseState | None) -> list[Statement]:
    """CREATE DATABASE when absent; ALTER DATABASE when its character set, or its collation when
    spec.collation is set, differ (without one, the server's default for the character set - which
    MariaDB's character_set_collations may choose - is left as the server chose it)."""
    collation = spec.collation
    options = " CHARACTER SET %s" + (" COLLATE %s" if collation else "")
    args: tuple[object, ...] = (spec.character_set,) + ((collation,) if collation else ())
    if observed is None:
        return [
            Statement(
                f"CREATE DATABASE IF NOT EXISTS {quote(spec.name)}{options}", args, f"created {spec.name}"
            )
        ]
    if _charset(observed.character_set) != _charset(spec.character_set) or (
        collation and _charset(observed.collation) != _charset(collation)
    ):
        return [
            Statement(
                f"ALTER DATABASE {quote(spec.name)}{options}",
                args,
                f"set {spec.name} to {spec.character_set}" + (f" / {collation}" if collation else ""),
            )
        ]
    return []


def _charset(name: str) -> str:
    """A character set or collation as the server stores it: utf8 is an alias of utf8mb3 (and
    utf8_* of utf8mb3_*), which both servers report; names compare without letter case."""
    name = name.lower()
    if name == "utf8" or name.startswith("utf8_"):
        return "utf8mb3" + name[4:]
    return name


def drop_database(spec: DatabaseSpec) -> list[Statement]:
    if spec.cleanup != "Delete":
        return []
    return [Statement(f"DROP DATABASE IF EXISTS {quote(spec.name)}", (), f"dropped {spec.name}")]


def identified(flavor: Flavor, plugin: str | None, password: str) -> tuple[str, tuple[str]]:
    """The clause setting an account's password, and its argument. MariaDB writes the clause to
    its binary log as given, so it gets the hash, never the password (db/password_hash.py);
    MySQL logs a hash by itself."""
    if flavor is Flavor.MARIADB:
        if plugin in (None, "mysql_native_password"):
            return "IDENTIFIED VIA mysql_native_password USING %s", (password_hash.native(password),)
        if plugin == "ed25519":
            return "IDENTIFIED VIA ed25519 USING %s", (password_hash.ed25519(password),)
        # no other plugin takes a password on MariaDB: the server refuses it (nothing is logged)
        return f"IDENTIFIED VIA {plugin} USING PASSWORD(%s)", (password,)
    if plugin is None:
        return "IDENTIFIED BY %s", (password,)
    return f"IDENTIFIED WITH {plugin} BY %s", (password,)


def user(
    spec: UserSpec,
    observed: UserState | None,
    flavor: Flavor,
    password: str,
    password_applied: bool,
) -> list[Statement]:
    """CREATE USER when absent; else ALTER USER for what differs: the password when it is not the
    one applied last (`password_applied`), the plugin, the TLS requirement, the connection limit."""
    account = (spec.name, spec.host)
    who = f"{spec.name}@{spec.host}"
    tls = "REQUIRE SSL" if spec.require_tls else "REQUIRE NONE"
    plugin = spec.auth_plugin
    if observed is None:
        clause, secret = identified(flavor, plugin, password)
        return [
            Statement(
                f"CREATE USER %s@%s {clause} {tls} WITH MAX_USER_CONNECTIONS %s",
                account + secret + (spec.max_user_connections,),
                f"created {who}",
                hide=secret,
            )
        ]
    out = []
    if not password_applied or (plugin is not None and observed.plugin != plugin):
        clause, secret = identified(flavor, plugin, password)
        out.append(
            Statement(
                f"ALTER USER %s@%s {clause}",
                account + secret,
                f"set the password of {who}",
                hide=secret,
            )
        )
    if (observed.ssl_type == "ANY") != spec.require_tls and observed.ssl_type in ("", "ANY"):
        out.append(Statement(f"ALTER USER %s@%s {tls}", account, f"{who}: {tls}"))
    if observed.max_user_connections != spec.max_user_connections:
        out.append(
            Statement(
                "ALTER USER %s@%s WITH MAX_USER_CONNECTIONS %s",
                account + (spec.max_user_connections,),
                f"{who}: at most {spec.max_user_connections} connections",
            )
        )
    return out


def drop_user(spec: UserSpec) -> list[Statement]:
    if spec.cleanup != "Delete":
        return []
    return [
        Statement("DROP USER IF EXISTS %s@%s", (spec.name, spec.host), f"dropped {spec.name}@{spec.host}")
    ]


def _statements(spec: GrantSpec, p: grant_plans.Plan) -> list[Statement]:
    account = (spec.user, spec.host)
    who = f"{spec.user}@{spec.host}"
    return [Statement(g.revoke_sql(), account, f"revoked {g.clause()} from {who}") for g in p.revoke] + [
        Statement(g.grant_sql(), account, f"granted {g.clause()} to {who}") for g in p.grant
    ]


def grant(spec: GrantSpec, held: grant_plans.Grants, flavor: Flavor = Flavor.MYSQL) -> list[Statement]:
    """Exactly spec.privileges on spec's database or table: REVOKE what the account holds there
    beyond them, GRANT what it lacks. Other targets (other MySQLGrants, grants by hand) are left
    as they are. `held`: grant_plans.parse_show_grants of the account. MySQL shows every privilege
    of a level as ALL PRIVILEGES: a list of all of them is that (else it would be revoked and
    granted again on every pass); MariaDB's ALL also holds DELETE HISTORY, which no list has."""
    privileges = spec.privileges
    level = TABLE_PRIVILEGES if spec.table else DATABASE_PRIVILEGES
    if flavor is Flavor.MYSQL and set(privileges) == set(level) - {"ALL PRIVILEGES"}:
        privileges = ("ALL PRIVILEGES",)
    here = {t: v for t, v in held.items() if t == spec.target}
    want = accounts.Grant(privileges, spec.target, grant_option=spec.grant_option)
    return _statements(spec, grant_plans.plan(here, [want]))


def revoke(spec: GrantSpec, held: grant_plans.Grants | None) -> list[Statement]:
    """Deleting a MySQLGrant (cleanupPolicy Delete): everything the account holds on its target.
    An account that no longer exists (None) holds nothing."""
    if spec.cleanup != "Delete" or held is None:
        return []
    here = {t: v for t, v in held.items() if t == spec.target}
    return _statements(spec, grant_plans.plan(here, []))
