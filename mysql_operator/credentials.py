"""Which keys a cluster's credentials Secret must and may hold, and what makes a password
unusable (said at admission time of the Secret, as a condition and an Event)."""

from __future__ import annotations


from typing import Mapping

from mysql_operator import manifests as m
from mysql_operator.api.types import MySQLCluster
from mysql_operator.members import Credentials


# MySQL and MariaDB refuse a longer replication password (error 3056, ER_CHANGE_MASTER_PASSWORD_LENGTH).
MAX_REPLICATION_PASSWORD = 32


def password_problem(key: str, value: str) -> str | None:
    """Why a password from the user's Secret (under `key`) would break an option file, an SQL string
    or CHANGE MASTER, with the fix; None if usable. Never quotes the value. Pure."""
    try:
        value.encode("utf-8")  # undecodable bytes arrive as lone surrogates (surrogateescape)
    except UnicodeEncodeError:
        return "is not valid UTF-8: store the password as UTF-8 text"
    if any(ch in value for ch in "\n\r\0"):
        return "contains a line break or a NUL character: use a single-line password without NUL"
    if key == m.REPLICATION_PASSWORD_KEY and len(value) > MAX_REPLICATION_PASSWORD:
        return (
            f"is longer than {MAX_REPLICATION_PASSWORD} characters, the most a replica accepts "
            f"for its source's password: use a shorter one"
        )
    return None


def required_keys(c: MySQLCluster) -> list[str]:
    keys = [m.ROOT_PASSWORD_KEY, m.OPERATOR_PASSWORD_KEY, m.REPLICATION_PASSWORD_KEY]
    if c.spec.database and c.spec.database.user:
        keys.append(m.APP_PASSWORD_KEY)
    if c.spec.restore:  # a new cluster: the restore account loads the dump
        keys.append(m.RESTORE_PASSWORD_KEY)
    return keys


def optional_keys(c: MySQLCluster) -> list[str]:
    """Keys always in the generated Secret, used when present in a Secret of the user's (one
    from before they existed must keep working): without backup-password the cluster has no
    backup account and its backups fail saying so; without sql-password no MySQLDatabase, MySQLUser
    or MySQLGrant of the cluster is applied, saying so; without monitor-password the metrics
    sidecars wait for it, saying so in their log (and Prometheus sees no server metrics); without
    binlog-password the binary-log archiver has no account and its Pod waits, saying so."""
    return [m.BACKUP_PASSWORD_KEY, m.SQL_PASSWORD_KEY, m.MONITOR_PASSWORD_KEY, m.BINLOG_PASSWORD_KEY]


def rotation_pending(desired: Mapping[str, str], applied: Mapping[str, str]) -> tuple[str, ...]:
    """Pure: the keys whose password in the credentials Secret differs from the one the servers
    have (the applied record). A key the record lacks was never rotated: nothing to do."""
    return tuple(sorted(k for k, pw in desired.items() if applied.get(k) and applied[k] != pw))


def rotation_accounts(
    c: MySQLCluster, keys: tuple[str, ...], desired: Mapping[str, str]
) -> dict[str, Credentials]:
    """Pure: by key, in order, the accounts (user, host, new password) a rotation changes, the
    operator's own last (its open connections stay valid, its next ones use the new one). The
    restore account exists only while a restore loads a dump: never rotated."""
    app_user = c.spec.database.user if c.spec.database else None
    accounts = {
        m.ROOT_PASSWORD_KEY: ("root", "localhost"),
        m.REPLICATION_PASSWORD_KEY: (m.REPLICATION_USER, "%"),
        m.BACKUP_PASSWORD_KEY: (m.BACKUP_USER, "%"),
        m.SQL_PASSWORD_KEY: (m.SQL_USER, "%"),
        m.MONITOR_PASSWORD_KEY: (m.MONITOR_USER, "localhost"),
        m.BINLOG_PASSWORD_KEY: (m.BINLOG_USER, "%"),
        m.OPERATOR_PASSWORD_KEY: (m.OPERATOR_USER, "%"),
    }
    if app_user:
        accounts[m.APP_PASSWORD_KEY] = (app_user, "%")
    order = [
        m.ROOT_PASSWORD_KEY,
        m.REPLICATION_PASSWORD_KEY,
        m.APP_PASSWORD_KEY,
        m.BACKUP_PASSWORD_KEY,
        m.SQL_PASSWORD_KEY,
        m.MONITOR_PASSWORD_KEY,
        m.BINLOG_PASSWORD_KEY,
    ]
    order.append(m.OPERATOR_PASSWORD_KEY)
    return {
        k: Credentials(accounts[k][0], desired[k], accounts[k][1])
        for k in order
        if k in keys and k in accounts
    }


def rotation_denied(c: MySQLCluster, key: str, user: str, host: str) -> str:
    """Pure: what to do when the primary refused the operator's ALTER USER of `user`@`host` for
    lack of a privilege (the servers keep the previous password). Of the accounts it manages, only
    MySQL's root holds SYSTEM_USER: the one refusal with a known cause and fix."""
    if c.spec.flavor == "mysql" and key == m.ROOT_PASSWORD_KEY:
        return (
            f"{key}: the primary refused to change the password of {user}@{host}: MySQL lets only an "
            f"account holding SYSTEM_USER change one that holds it, and the operator's account of "
            f"a cluster created before the operator granted it itself lacks it. Grant it once as "
            f"root (kubectl exec -it <primary Pod> -c mysqld -- mysql -uroot -p, then GRANT "
            f"SYSTEM_USER ON *.* TO '{m.OPERATOR_USER}'@'%'), then change {key} in the Secret again; "
            f"until then the servers keep the previous password"
        )
    return (
        f"{key}: the primary refused to change the password of {user}@{host} (access denied): the "
        f"servers keep the previous password; grant '{m.OPERATOR_USER}'@'%' what it lacks over that "
        f"account (CREATE USER) as root, then change {key} in the Secret again"
    )


def not_rotated(c: MySQLCluster, key: str) -> str | None:
    """Pure: why the operator does not change the password under `key` on the servers (the
    record then follows the Secret, and a Warning Event says so); None when it does."""
    if key == m.RESTORE_PASSWORD_KEY:
        return (
            "restore-password: not set on the servers: the restore account exists only while a restore "
            "loads a dump; nothing to do"
        )
    return None
