"""The backup and restore accounts' keys in the credentials Secret: generated ones get them (also
a Secret generated before they existed), a Secret of the user's may lack them."""

from __future__ import annotations

import itertools

from mysql_operator import manifests as m
from mysql_operator.passwords import PasswordStore
from mysql_operator.api import parse
from tests.support.credentials import GOOD, credentials
from tests.support.fakes import RecordingKube, RecordingReads
from tests.support.specs import body


def test_a_user_secret_with_backup_password_gives_it_and_one_without_still_works(monkeypatch):
    assert credentials({**GOOD, "backup-password": "b"}) == (
        {**GOOD, "backup-password": "b"},
        None,
    )
    assert credentials(dict(GOOD)) == (GOOD, None)  # no backup account, no error
    passwords, error = credentials({**GOOD, "backup-password": "b\nx"})
    assert passwords == {} and "key backup-password contains a line break" in error


def test_a_generated_secret_from_before_gets_the_new_keys_and_keeps_the_old():
    old = {"root-password": "r", "operator-password": "o", "replication-password": "p"}
    kube = RecordingKube(secrets={"db-credentials": old})
    n = itertools.count()
    store = PasswordStore(RecordingReads(kube), kube, lambda: f"new-{next(n)}")
    c = parse(body({"instances": 1, "restore": {"fromBackup": {"name": "nightly"}}}, name="db"))
    passwords, error = store.current(c, {})
    assert error is None
    new_keys = (
        m.BACKUP_PASSWORD_KEY,
        m.RESTORE_PASSWORD_KEY,
        m.SQL_PASSWORD_KEY,
        m.MONITOR_PASSWORD_KEY,
        m.BINLOG_PASSWORD_KEY,
    )
    assert set(passwords) == set(old) | set(new_keys)
    assert {k: passwords[k] for k in old} == old  # never changes a stored password
    # the Secret gets exactly the new keys, with the passwords the engine is given
    assert [c for c in kube.calls if c[0] != "read"] == [("secret keys", "db-credentials", sorted(new_keys))]
    assert kube.secrets["db-credentials"] == passwords


def test_a_user_secret_for_a_restored_cluster_must_hold_the_restore_password():
    c = parse(
        body(
            {
                "instances": 1,
                "credentials": {"secretName": "mine"},
                "restore": {"fromBackup": {"name": "nightly"}},
            },
            name="db",
        )
    )
    kube = RecordingKube(secrets={"mine": GOOD})
    store = PasswordStore(RecordingReads(kube), kube, lambda: "never")
    passwords, error = store.current(c, {})
    assert (
        passwords == {}
        and "lacks restore-password" in error
        and error.startswith("spec.credentials.secretName")
    )


def test_a_rotation_is_pending_for_changed_passwords_only():
    from mysql_operator.credentials import rotation_pending

    applied = {"root-password": "r", "operator-password": "o", "replication-password": "p"}
    assert rotation_pending(dict(applied), applied) == ()
    desired = {**applied, "operator-password": "o2", "app-password": "new-key"}
    assert rotation_pending(desired, applied) == ("operator-password",)  # a new key is not a rotation


def test_rotation_accounts_change_the_operators_own_last_and_never_the_restore_account():
    from mysql_operator.credentials import rotation_accounts

    c = parse(
        body(
            {"instances": 1, "flavor": "mariadb", "database": {"name": "shop", "user": "shopper"}}, name="db"
        )
    )
    keys = (m.APP_PASSWORD_KEY, m.OPERATOR_PASSWORD_KEY, m.RESTORE_PASSWORD_KEY, m.ROOT_PASSWORD_KEY)
    desired = {k: f"{k}-2" for k in keys}
    got = rotation_accounts(c, keys, desired)
    assert [(k, a.user, a.host) for k, a in got.items()] == [
        (m.ROOT_PASSWORD_KEY, "root", "localhost"),
        (m.APP_PASSWORD_KEY, "shopper", "%"),
        (m.OPERATOR_PASSWORD_KEY, m.OPERATOR_USER, "%"),
    ]
    assert all(a.password == desired[k] for k, a in got.items())


def test_root_is_rotated_on_both_flavors_and_a_refusal_says_what_to_do():
    from mysql_operator.credentials import not_rotated, rotation_accounts, rotation_denied

    mysql = parse(body({"instances": 1, "flavor": "mysql"}, name="db"))
    mariadb = parse(body({"instances": 1, "flavor": "mariadb"}, name="db"))
    keys = (m.ROOT_PASSWORD_KEY,)
    for c in (mysql, mariadb):
        assert list(rotation_accounts(c, keys, {m.ROOT_PASSWORD_KEY: "r2"})) == [m.ROOT_PASSWORD_KEY]
        assert not_rotated(c, m.ROOT_PASSWORD_KEY) is None
        assert not_rotated(c, m.RESTORE_PASSWORD_KEY)
    why = rotation_denied(mysql, m.ROOT_PASSWORD_KEY, "root", "localhost")
    assert f"GRANT SYSTEM_USER ON *.* TO '{m.OPERATOR_USER}'@'%'" in why and "root-password" in why
    assert "previous password" in rotation_denied(mariadb, m.APP_PASSWORD_KEY, "app", "%")


def test_rotate_passwords_covers_every_generated_key_but_the_restore_accounts():
    """A key added to the generated Secret must be rotatable by `mysql-operator rotate-passwords`."""
    from mysql_operator.cli_requests import ROTATABLE_KEYS

    c = parse(
        body(
            {
                "instances": 1,
                "database": {"name": "app", "user": "app"},
                "restore": {"fromBackup": {"name": "b"}},
            }
        )
    )
    generated = set(m.credentials_secret(c, lambda key: "pw")["data"])
    assert set(ROTATABLE_KEYS) == generated - {m.RESTORE_PASSWORD_KEY}
