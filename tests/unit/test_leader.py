"""The pure half of leader election (mysql_operator/leader.py) and the standby's liveness."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest

from mysql_operator.leader import Elector, Seen, may_take, observe
from mysql_operator.operator import OperatorConfig, standby_liveness


def lease(holder, renew="t1", transitions=0):
    return SimpleNamespace(
        spec=SimpleNamespace(holder_identity=holder, renew_time=renew, lease_transitions=transitions)
    )


@pytest.mark.parametrize(
    "seen, now, expected",
    [
        (None, 0.0, True),  # no Lease
        (Seen(None, (None, "t", 0), 0.0), 0.0, True),  # released
        (Seen("me", ("me", "t", 0), 0.0), 0.0, True),  # ours: renew
        (Seen("other", ("other", "t", 0), 100.0), 114.9, False),
        (Seen("other", ("other", "t", 0), 100.0), 115.0, True),  # not renewed for the duration
    ],
)
def test_may_take(seen, now, expected):
    assert may_take(seen, "me", 15.0, now) is expected


def test_the_count_restarts_on_every_renewal_and_only_then():
    first = observe(None, lease("other", "t1"), 10.0)
    assert observe(first, lease("other", "t1"), 20.0) is first  # same record: same since
    renewed = observe(first, lease("other", "t2"), 20.0)
    assert renewed.since == 20.0 and renewed.holder == "other"
    taken = observe(renewed, lease("third", "t2", 1), 21.0)
    assert taken.since == 21.0 and taken.holder == "third"


def test_the_renew_deadline_comes_before_the_duration():
    with pytest.raises(ValueError):
        Elector(SimpleNamespace(), "ns", "lease", "me", duration=10.0, deadline=10.0)


def test_config_needs_the_lease_namespace_and_one_way_to_elect():
    base = dict(namespaces=("a",), leader_lease="op")
    with pytest.raises(ValueError, match="namespace"):
        OperatorConfig(**base).check()
    with pytest.raises(ValueError, match="choose one"):
        OperatorConfig(**base, leader_namespace="ops", peering="p").check()
    OperatorConfig(**base, leader_namespace="ops").check()


def test_config_refuses_an_unknown_default_for_operator_upgrades():
    OperatorConfig(namespaces=("a",), operator_upgrades="Manual").check()
    with pytest.raises(ValueError, match="--operator-upgrades must be one of Auto, Manual"):
        OperatorConfig(namespaces=("a",), operator_upgrades="Never").check()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_standby_answers_its_liveness_probe_and_frees_the_port():
    port = _port()
    url = f"http://127.0.0.1:{port}/healthz"
    with standby_liveness(url):
        assert urllib.request.urlopen(url, timeout=5).status == 200
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=5)
    with socket.socket() as s:  # kopf's liveness server (aiohttp, SO_REUSEADDR) binds it next
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(1)
