"""Which keys a cluster's credentials Secret must and may hold, and what makes a password
unusable (said at admission time of the Secret, as a condition and an Event)."""

from __future__ import annotations


from mysql_operator import manifests as m
from mysql_operator.api import MySQLCluster


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
    backup account and its backups fail saying so."""
    return [m.BACKUP_PASSWORD_KEY]
