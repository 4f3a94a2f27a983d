"""Owns the cluster's passwords as stored in the API: the credentials Secret (the user's, or one
generated once: created only if missing, never regenerated, missing keys added) and the record
of the passwords the servers have (`<name>-applied-credentials`, written only by the operator),
which makes a changed password a rotation instead of a lock-out.

    store = PasswordStore(reads, kube, password_factory)
    passwords, error = store.current(cluster, owner)      # error: the field and the fix
    on_servers, version = store.applied(cluster, owner, passwords)
    store.record_applied(cluster, owner, rotated)          # after ALTER USER succeeded

Which keys a Secret needs and what makes a password unusable is credentials.py (pure).
"""

from __future__ import annotations

import base64
from typing import Any, Callable, Mapping

from mysql_operator import manifests as m
from mysql_operator.api import MySQLCluster
from mysql_operator.credentials import optional_keys, password_problem, required_keys
from mysql_operator.k8s.cache import Reads
from mysql_operator.k8s.ops import KubeOps

# on the applied-credentials record: the credentials Secret's resourceVersion it was taken from
APPLIED_FROM = f"{m.GROUP}/applied-from-version"
# the credentials Secret is read again after this long (a changed password is rotated that much
# later at most): the operator may get Secrets, not watch them
CREDENTIALS_SECRET_SECONDS = 15.0


class PasswordStore:
    def __init__(
        self, reads: Reads, kube: KubeOps, password_factory: Callable[[], str], resync_seconds: float = 60.0
    ):
        self.reads, self.kube = reads, kube
        self.password_factory = password_factory
        self.resync_seconds = resync_seconds

    def current(
        self, c: MySQLCluster, owner: Mapping[str, Any], new_cluster: bool = False
    ) -> tuple[dict[str, str], str | None]:
        """Passwords by Secret key, and why they are unusable (None if fine). Creates the
        generated Secret if missing and adds missing keys; never changes a stored password.
        The generated Secret is owned by the cluster (deleted with it) only under deletionPolicy
        Delete: under Retain it outlives the cluster with the volumes, so a cluster created again
        with the same name logs in to the data they hold. `new_cluster` (it has no status yet):
        the generated Secret is created without a read first; one that exists is then read."""
        secret = m.credentials_secret_name(c)
        unread = new_cluster and c.spec.credentials is None
        found = None if unread else self.reads.secret(c.namespace, secret, CREDENTIALS_SECRET_SECONDS)
        data = found[0] if found is not None else None
        if c.spec.credentials is not None:
            return _users_secret(c, secret, data)
        existing = data or {}
        fresh: dict[str, str] = {}

        def password_for(key: str) -> str:
            if existing.get(key):
                return existing[key]
            return fresh.setdefault(key, self.password_factory())

        built = m.credentials_secret(c, password_for)
        owned = m.owned(built, owner) if c.spec.deletion_policy == "Delete" else None
        if found is None:
            created = self.kube.create_secret(owned or built)
            if created is None:  # lost a race: read it back
                return self.current(c, owner)
        elif found[1] != ((owner["metadata"]["uid"],) if owned else ()):  # policy changed, or adopted
            self.kube.set_secret_owner(c.namespace, secret, owned)
        if found is not None and fresh:
            self.kube.add_secret_keys(
                c.namespace, secret, {key: base64.b64encode(v.encode()).decode() for key, v in fresh.items()}
            )
        return {key: password_for(key) for key in required_keys(c) + optional_keys(c)}, None

    def applied(
        self,
        c: MySQLCluster,
        owner: Mapping[str, Any],
        passwords: Mapping[str, str],
        new_cluster: bool = False,
    ) -> tuple[dict[str, str], str]:
        """The passwords the servers have (the operator's record) and the version of the
        credentials Secret they came from. The first time (a new cluster, or one from before the
        record existed) they are the Secret's. `new_cluster`: the record is written without a
        read first."""
        name = m.applied_credentials_secret_name(c)
        # only the operator writes it
        found = None if new_cluster else self.reads.secret(c.namespace, name, self.resync_seconds)
        if found is not None:
            return found.data, found.annotations.get(APPLIED_FROM, "")
        return self.record_applied(c, owner, passwords), ""

    def record_applied(
        self, c: MySQLCluster, owner: Mapping[str, Any], passwords: Mapping[str, str]
    ) -> dict[str, str]:
        """Effect: the record says the servers have `passwords` (from the credentials Secret's
        current version)."""
        # the version of the read the passwords came from (the same cached read), not a newer one
        source = self.reads.secret(c.namespace, m.credentials_secret_name(c), CREDENTIALS_SECRET_SECONDS)
        record = m.owned(m.applied_credentials_secret(c, passwords), owner)
        record["metadata"].setdefault("annotations", {})[APPLIED_FROM] = source.version if source else ""
        self.kube.write_secret(record)
        return dict(passwords)


def _users_secret(
    c: MySQLCluster, secret: str, data: Mapping[str, str] | None
) -> tuple[dict[str, str], str | None]:
    """Pure: the passwords of the user's own Secret (spec.credentials), or what it lacks."""
    if data is None:
        return {}, (
            f"spec.credentials.secretName: Secret {secret} does not exist: create it "
            f"with keys {', '.join(required_keys(c))}"
        )
    missing = [key for key in required_keys(c) if not data.get(key)]
    if missing:
        return (
            {},
            f"spec.credentials.secretName: Secret {secret} lacks {', '.join(missing)}: add the missing keys",
        )
    present = required_keys(c) + [key for key in optional_keys(c) if data.get(key)]
    unusable = [f"key {key} {why}" for key in present if (why := password_problem(key, data[key]))]
    if unusable:
        return {}, f"spec.credentials.secretName: Secret {secret} " + "; ".join(unusable)
    return {key: data[key] for key in present}, None
