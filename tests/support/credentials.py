"""A cluster's passwords as PasswordStore reads them from a credentials Secret of the user's."""

from __future__ import annotations

import pytest

from mysql_operator.api import parse
from mysql_operator.passwords import PasswordStore
from tests.support.fakes import RecordingKube, RecordingReads
from tests.support.specs import body

CLUSTER = parse(body({"instances": 1, "credentials": {"secretName": "mine"}}, name="db"))


def credentials(data=None, raw=None):
    """PasswordStore.current against the Secret `mine` holding `data` (decoded) or `raw` (bytes,
    decoded as k8s.objects.read_secret does), with no owner; nothing is written."""
    if raw is not None:
        data = {k: v.decode(errors="surrogateescape") for k, v in raw.items()}
    kube = RecordingKube(secrets={"mine": data} if data is not None else {})
    store = PasswordStore(
        RecordingReads(kube), kube, lambda: pytest.fail("never generates for a user's Secret")
    )
    found = store.current(CLUSTER, {})
    assert [c for c in kube.calls if c[0] != "read"] == []
    return found


GOOD = {"root-password": "r", "operator-password": "o", "replication-password": "p"}
