"""The SQL-object contract (MySQLDatabase, MySQLUser, MySQLGrant) as typed, immutable values.

`parse_sql_object(body)` re-checks what the CRDs' schemas and CEL rules check (an object stored
before a CRD upgrade must not slip through), raising SpecError(field, message) with the fix.
Identifiers are restricted to letters, digits and '_' (user names also '-' and '.'), so that what
reaches the server is always quoted and never a pattern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from .fields import read_bool, read_enum, read_int, read_metadata, read_object, read_str
from .types import GROUP, SYSTEM_SCHEMAS, SpecError, reserved_user

DATABASE_KIND, DATABASE_PLURAL = "MySQLDatabase", "mysqldatabases"
USER_KIND, USER_PLURAL = "MySQLUser", "mysqlusers"
GRANT_KIND, GRANT_PLURAL = "MySQLGrant", "mysqlgrants"
PLURALS = {DATABASE_KIND: DATABASE_PLURAL, USER_KIND: USER_PLURAL, GRANT_KIND: GRANT_PLURAL}
# the operator's finalizer: the object's SQL is undone (cleanupPolicy) before it goes
FINALIZER = f"{GROUP}/sql-cleanup"
CLEANUP = ("Skip", "Delete")
AUTH_PLUGINS = ("caching_sha2_password", "mysql_native_password", "ed25519")
# privileges a MySQLGrant may list: those of a database (ALL PRIVILEGES is all of them), and
# which of them also apply to one table
DATABASE_PRIVILEGES = (
    "ALL PRIVILEGES",
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "CREATE",
    "DROP",
    "INDEX",
    "ALTER",
    "REFERENCES",
    "CREATE TEMPORARY TABLES",
    "LOCK TABLES",
    "EXECUTE",
    "CREATE VIEW",
    "SHOW VIEW",
    "CREATE ROUTINE",
    "ALTER ROUTINE",
    "EVENT",
    "TRIGGER",
)
# those that name no table: a MySQLGrant with spec.table refuses them
DATABASE_ONLY_PRIVILEGES = (
    "CREATE TEMPORARY TABLES",
    "LOCK TABLES",
    "EXECUTE",
    "CREATE ROUTINE",
    "ALTER ROUTINE",
    "EVENT",
)
TABLE_PRIVILEGES = tuple(p for p in DATABASE_PRIVILEGES if p not in DATABASE_ONLY_PRIVILEGES)

_CLUSTER_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_IDENT_RE = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_USER_RE = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
_HOST_RE = re.compile(r"^[A-Za-z0-9_.%:/-]{1,255}$")
_CHARSET_RE = re.compile(r"^[a-z0-9]{1,32}$")
_COLLATION_RE = re.compile(r"^[a-z0-9_]{1,64}$")
_SECRET_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")


@dataclass(frozen=True)
class SecretKeyRef:
    name: str
    key: str
    field: str = "spec.passwordSecret"  # where it was set (spec.passwordSecretKeyRef: the older spelling)


@dataclass(frozen=True)
class DatabaseSpec:
    cluster: str
    name: str
    character_set: str = "utf8mb4"
    collation: str | None = None
    cleanup: str = "Skip"


@dataclass(frozen=True)
class UserSpec:
    cluster: str
    name: str
    host: str = "%"
    password: SecretKeyRef | None = None  # None: a generated Secret
    max_user_connections: int = 0
    require_tls: bool = False
    auth_plugin: str | None = None
    cleanup: str = "Delete"


@dataclass(frozen=True)
class GrantSpec:
    cluster: str
    user: str
    database: str
    privileges: tuple[str, ...]
    host: str = "%"
    table: str | None = None
    grant_option: bool = False
    cleanup: str = "Delete"

    @property
    def target(self) -> str:
        """As `accounts.Grant.target`: db.* or db.table."""
        return f"{self.database}.{self.table or '*'}"


@dataclass(frozen=True)
class SqlObject:
    """One of the three kinds: where it is and what it asks for."""

    kind: str
    name: str
    namespace: str
    spec: DatabaseSpec | UserSpec | GrantSpec
    generation: int | None = None
    uid: str | None = None


def _cluster(s: dict[str, Any]) -> str:
    ref = read_object(s.get("clusterRef"), "spec.clusterRef", {"name"})
    out = read_str(
        ref,
        "name",
        "spec.clusterRef",
        required=True,
        max_len=40,
        pattern=_CLUSTER_RE,
        hint="a MySQLCluster name",
    )
    assert out is not None
    return out


def _ident(s: dict[str, Any], key: str, what: str, required: bool = True) -> str | None:
    v = read_str(
        s,
        key,
        "spec",
        required=required,
        max_len=64,
        pattern=_IDENT_RE,
        hint=f"letters, digits and '_' only: {what}",
    )
    if v is not None and key in ("name", "database") and v.lower() in SYSTEM_SCHEMAS:
        raise SpecError(f"spec.{key}", f"{v!r} is a schema the server owns: choose another database")
    return v


def _user(s: dict[str, Any], key: str) -> str:
    v = read_str(
        s,
        key,
        "spec",
        required=True,
        max_len=32,
        pattern=_USER_RE,
        hint="letters, digits, '_', '-' and '.' only",
    )
    assert v is not None
    if reserved_user(v):
        raise SpecError(
            f"spec.{key}", f"{v!r} is an account the server or the operator owns: choose another user"
        )
    return v


def _host(s: dict[str, Any]) -> str:
    v = read_str(
        s, "host", "spec", "%", max_len=255, pattern=_HOST_RE, hint="e.g. %, 10.244.%, app.example.com"
    )
    assert v is not None
    return v


def _database(s: dict[str, Any]) -> DatabaseSpec:
    charset = read_str(
        s, "characterSet", "spec", "utf8mb4", max_len=32, pattern=_CHARSET_RE, hint="e.g. utf8mb4"
    )
    collation = read_str(
        s, "collation", "spec", max_len=64, pattern=_COLLATION_RE, hint="e.g. utf8mb4_unicode_ci"
    )
    assert charset is not None
    if collation is not None and not collation.startswith(charset + "_"):
        raise SpecError("spec.collation", f"{collation!r} does not belong to spec.characterSet {charset!r}")
    name = _ident(s, "name", "the database's name")
    assert name is not None
    return DatabaseSpec(
        cluster=_cluster(s),
        name=name,
        character_set=charset,
        collation=collation,
        cleanup=read_enum(s, "cleanupPolicy", "spec", "Skip", CLEANUP),
    )


def _user_spec(s: dict[str, Any]) -> UserSpec:
    ref = None
    if s.get("passwordSecret") is not None and s.get("passwordSecretKeyRef") is not None:
        raise SpecError(
            "spec.passwordSecretKeyRef",
            "is the older spelling of spec.passwordSecret: set one of them, not both",
        )
    field_ = "passwordSecret" if s.get("passwordSecret") is not None else "passwordSecretKeyRef"
    if s.get(field_) is not None:
        path = f"spec.{field_}"
        r = read_object(s[field_], path, {"name", "key"})
        secret = read_str(r, "name", path, required=True, pattern=_SECRET_RE, hint="a Secret name")
        key = read_str(r, "key", path, required=True, pattern=_KEY_RE, hint="a Secret key")
        assert secret is not None and key is not None
        ref = SecretKeyRef(secret, key, path)
    plugin = s.get("authPlugin")
    if plugin is not None and plugin not in AUTH_PLUGINS:
        raise SpecError("spec.authPlugin", f"must be one of {', '.join(AUTH_PLUGINS)}, not {plugin!r}")
    limit = read_int(s, "maxUserConnections", "spec", 0, 0, 100_000)
    assert limit is not None
    return UserSpec(
        cluster=_cluster(s),
        name=_user(s, "name"),
        host=_host(s),
        password=ref,
        max_user_connections=limit,
        require_tls=read_bool(s, "requireTLS", "spec", False),
        auth_plugin=plugin,
        cleanup=read_enum(s, "cleanupPolicy", "spec", "Delete", CLEANUP),
    )


def _grant_spec(s: dict[str, Any]) -> GrantSpec:
    privileges = s.get("privileges")
    if not isinstance(privileges, list) or not privileges or len(privileges) > 20:
        raise SpecError("spec.privileges", "must list 1 to 20 privileges")
    table = _ident(s, "table", "one table", required=False)
    allowed = TABLE_PRIVILEGES if table else DATABASE_PRIVILEGES
    for n, p in enumerate(privileges):
        if p not in allowed:
            where = "a table" if table and p in DATABASE_PRIVILEGES else "MySQLGrant"
            raise SpecError(
                f"spec.privileges[{n}]", f"{p!r} is not a privilege of {where}: use {', '.join(allowed)}"
            )
    if len(set(privileges)) != len(privileges):
        raise SpecError("spec.privileges", "lists a privilege twice")
    if "ALL PRIVILEGES" in privileges and len(privileges) > 1:
        raise SpecError("spec.privileges", "lists ALL PRIVILEGES with others: list it alone")
    database = _ident(s, "database", "one database")
    assert database is not None
    return GrantSpec(
        cluster=_cluster(s),
        user=_user(s, "user"),
        host=_host(s),
        database=database,
        table=table,
        privileges=tuple(privileges),
        grant_option=read_bool(s, "grantOption", "spec", False),
        cleanup=read_enum(s, "cleanupPolicy", "spec", "Delete", CLEANUP),
    )


_FIELDS: dict[str, tuple[set[str], Callable[[dict[str, Any]], DatabaseSpec | UserSpec | GrantSpec]]] = {
    DATABASE_KIND: ({"clusterRef", "name", "characterSet", "collation", "cleanupPolicy"}, _database),
    USER_KIND: (
        {
            "clusterRef",
            "name",
            "host",
            "passwordSecret",
            "passwordSecretKeyRef",
            "maxUserConnections",
            "requireTLS",
            "authPlugin",
            "cleanupPolicy",
        },
        _user_spec,
    ),
    GRANT_KIND: (
        {"clusterRef", "user", "host", "database", "table", "privileges", "grantOption", "cleanupPolicy"},
        _grant_spec,
    ),
}


def parse_sql_object(body: Any) -> SqlObject:
    """A MySQLDatabase, MySQLUser or MySQLGrant custom object (dict) -> SqlObject. Raises
    SpecError."""
    kind = body.get("kind") if isinstance(body, dict) else None
    if kind not in _FIELDS:
        raise SpecError("kind", f"must be one of {', '.join(_FIELDS)}, not {kind!r}")
    meta, name, namespace = read_metadata(body, kind)
    allowed, parse_spec = _FIELDS[kind]
    spec = parse_spec(read_object(body.get("spec"), "spec", allowed))
    return SqlObject(kind, name, namespace, spec, meta.get("generation"), meta.get("uid"))
