"""A cluster's passwords as PasswordStore reads them from a credentials Secret faked by monkeypatch."""

from __future__ import annotations

import pytest

from mysql_operator import passwords as password_store
from mysql_operator.api import parse
from mysql_operator.k8s.cache import Reads
from mysql_operator.passwords import PasswordStore
from tests.support.specs import body

CLUSTER = parse(body({"instances": 1, "credentials": {"secretName": "mine"}}, name="db"))


def credentials(monkeypatch, data=None, raw=None):
    """PasswordStore.current against a Secret holding `data` (decoded) or `raw` (bytes, decoded
    as k8s.objects.read_secret does), with no owner."""

    def read(api, ns, name):
        assert (ns, name) == ("ns", "mine")
        if raw is not None:
            return {k: v.decode(errors="surrogateescape") for k, v in raw.items()}, (), "1"
        return (data, (), "1") if data is not None else None

    monkeypatch.setattr(password_store.k, "read_secret", read)
    api = object()
    store = PasswordStore(api, Reads(api), lambda: pytest.fail("never generates for a user's Secret"))
    return store.current(CLUSTER, {})


GOOD = {"root-password": "r", "operator-password": "o", "replication-password": "p"}
