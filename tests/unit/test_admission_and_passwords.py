"""Refusals that keep a tenant's input away from the server's and the operator's own names, and
passwords that would break an option file, an SQL string or CHANGE MASTER."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from mysql_operator import credentials as creds
from mysql_operator.api import SpecError, parse
from mysql_operator.api.types import RESERVED_USER_PREFIX, RESERVED_USERS, SYSTEM_SCHEMAS, reserved_user
from mysql_operator.backup import commands
from mysql_operator.manifests import common
from tests.support.credentials import GOOD, credentials
from tests.support.specs import body, spec_schema

REPO = Path(__file__).resolve().parents[2]
CORPUS = sorted((REPO / "tests" / "invalid").glob("*.yaml"))


def corpus_docs(path: Path) -> tuple[str, list[dict]]:
    text = path.read_text()
    return text.splitlines()[0].removeprefix("# expect: ").strip(), [d for d in yaml.safe_load_all(text) if d]


CLUSTER_CREATES = [
    p for p in CORPUS if len(corpus_docs(p)[1]) == 1 and corpus_docs(p)[1][0]["kind"] == "MySQLCluster"
]
RESERVED_FILES = [
    p for p in CORPUS if re.match(r"database-(name|user)-", p.stem) and p.stem != "database-name-invalid"
]


# ---------------------------------------------------------------- admission: the parser half


@pytest.mark.parametrize("path", CLUSTER_CREATES, ids=[p.stem for p in CLUSTER_CREATES])
def test_the_parser_refuses_every_invalid_cluster_of_the_corpus(path):
    with pytest.raises(SpecError):
        parse(corpus_docs(path)[1][0])


@pytest.mark.parametrize("path", RESERVED_FILES, ids=[p.stem for p in RESERVED_FILES])
def test_reserved_database_and_user_names_are_refused_with_the_crd_message(path):
    expected, (doc,) = corpus_docs(path)
    with pytest.raises(SpecError) as e:
        parse(doc)
    assert expected in f"{e.value.field} {e.value.message}"


def _rule(field: str) -> dict:
    (rule,) = spec_schema()["properties"]["database"]["properties"][field]["x-kubernetes-validations"]
    return rule


@pytest.mark.parametrize(
    "field,spec", [("name", {"name": "mysql"}), ("user", {"name": "app", "user": "root"})]
)
def test_crd_and_parser_give_the_same_message(field, spec):
    with pytest.raises(SpecError) as e:
        parse(body({"instances": 1, "database": spec}))
    assert _rule(field)["message"] == f"{e.value.field} {e.value.message}"


def test_crd_rules_list_the_names_the_parser_refuses():
    listed = lambda field: re.search(r"in \[(.*?)\]", _rule(field)["rule"]).group(1)  # noqa: E731
    assert re.findall(r"'([^']*)'", listed("name")) == list(SYSTEM_SCHEMAS)
    assert re.findall(r"'([^']*)'", listed("user")) == list(RESERVED_USERS)
    assert f"startsWith('{RESERVED_USER_PREFIX}')" in _rule("user")["rule"]
    assert all(n == n.lower() for n in SYSTEM_SCHEMAS + RESERVED_USERS)  # compared lowercased


def test_every_account_the_operator_creates_is_reserved():
    users = {name: getattr(common, name) for name in dir(common) if name.endswith("_USER")}
    assert {"ROOT_USER", "OPERATOR_USER", "REPLICATION_USER"} <= set(users)
    for name, user in users.items():
        assert reserved_user(user), f"common.{name} ({user}) must be in spec.RESERVED_USERS and the CRD rule"


@pytest.mark.parametrize(
    "user", ["mysql.session", "MySQL.InfoSchema", "MARIADB.SYS", "Root", "Mysql-Operator-Restore"]
)
def test_reserved_users_in_any_case(user):
    assert reserved_user(user)


@pytest.mark.parametrize(
    "name,user",
    [("mysql_app", "mysqluser"), ("sysdb", "replicator"), ("shop", "rooty"), ("information", "public_user")],
)
def test_names_that_only_look_alike_are_accepted(name, user):
    db = parse(body({"instances": 1, "database": {"name": name, "user": user}})).spec.database
    assert (db.name, db.user) == (name, user)


# ---------------------------------------------------------------- passwords from the user's Secret


@pytest.mark.parametrize(
    "key,value",
    [
        ("root-password", "r00t'quote\"dq\\bs$dollar ünïcode"),
        ("replication-password", "x" * 32),
        ("operator-password", "y" * 200),  # only the replication password is limited
    ],
)
def test_usable_passwords(key, value):
    assert creds.password_problem(key, value) is None


@pytest.mark.parametrize(
    "key,value,fragment",
    [
        ("root-password", "line1\nline2", "line break"),
        ("operator-password", "pw\r", "line break"),
        ("app-password", "nul\0byte", "NUL"),
        ("replication-password", "z" * 33, "longer than 32 characters"),
        ("root-password", b"caf\xe9".decode(errors="surrogateescape"), "not valid UTF-8"),
    ],
)
def test_unusable_passwords_are_named_not_shown(key, value, fragment):
    problem = creds.password_problem(key, value)
    assert problem is not None and fragment in problem and ":" in problem  # what, then the fix
    assert value.strip("\n\r\0") not in problem


def test_a_usable_secret_gives_its_passwords(monkeypatch):
    assert credentials(dict(GOOD)) == (GOOD, None)


@pytest.mark.parametrize(
    "key,value,fragment",
    [
        ("replication-password", "s3cret-" + "9" * 30, "longer than 32 characters"),
        ("operator-password", "s3cret\nmore", "line break"),
        ("root-password", "s3cret\0", "NUL"),
    ],
)
def test_an_unusable_password_is_reported_like_a_missing_key(monkeypatch, key, value, fragment):
    passwords, error = credentials({**GOOD, key: value})
    assert passwords == {}
    assert error.startswith(f"spec.credentials.secretName: Secret mine key {key} ") and fragment in error
    assert "s3cret" not in error


def test_a_password_that_is_not_utf8_is_reported_without_its_bytes(monkeypatch):
    raw = {k: v.encode() for k, v in GOOD.items()} | {"root-password": b"s3cret\xff\xfe"}
    passwords, error = credentials(raw=raw)
    assert passwords == {}
    assert error.startswith("spec.credentials.secretName: Secret mine key root-password is not valid UTF-8")
    assert "s3cret" not in error and "\\xff" not in error and "xff" not in error


# ---------------------------------------------------------------- option files


def test_option_file_quotes_what_it_can_hold():
    text = commands.client_option_file("app", "p\"w\\x 'q")
    assert text == '[client]\nuser="app"\npassword="p\\"w\\\\x \'q"\n'


@pytest.mark.parametrize(
    "user,password", [("app", "pw\nhost=evil"), ("app", "pw\r"), ("app", "pw\0"), ("app\nx", "pw")]
)
def test_option_file_refuses_line_breaks_and_nul_naming_the_user_not_the_password(user, password):
    with pytest.raises(ValueError) as e:
        commands.client_option_file(user, password)
    assert repr(user) in str(e.value) and "pw" not in str(e.value)
