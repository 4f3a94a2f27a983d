"""Who answers at a member's address (pure): the server must be the Pod we think we reach."""

from mysql_operator.db.observation import Observation, identity_mismatch
from mysql_operator.pods import expected_identity


def seen(server_id=2, hostname="shop-1", report_host="shop-1.shop-hl.ns.svc"):
    return Observation(reachable=True, server_id=server_id, hostname=hostname, report_host=report_host)


def test_the_right_server_matches():
    assert identity_mismatch(seen(), 2, "shop-1") is None
    # the container's hostname may differ (no UTS namespace): report_host's first label counts
    assert identity_mismatch(seen(hostname="node-a"), 2, "shop-1") is None
    assert identity_mismatch(seen(hostname="shop-1", report_host=None), 2, "shop-1") is None


def test_another_server_at_the_address_is_named():
    why = identity_mismatch(seen(server_id=3, hostname="shop-2", report_host="shop-2"), 2, "shop-1")
    assert why == "answers as server_id 3, expected 2"
    why = identity_mismatch(seen(hostname="x", report_host="shop-0.shop-hl.ns.svc"), 2, "shop-1")
    assert "expected shop-1" in why and "shop-0.shop-hl.ns.svc" in why


def test_unchecked_or_unreachable_passes():
    assert identity_mismatch(seen(server_id=9), None, None) is None
    assert identity_mismatch(Observation(reachable=False), 2, "shop-1") is None


def test_expected_identity_from_ordinal_name_and_pod_uid():
    pod = {"metadata": {"name": "shop-1", "uid": "u-2"}}
    assert expected_identity("shop-1", 1, pod) == {"server_id": 2, "hostname": "shop-1", "uid": "u-2"}
    assert expected_identity("shop-1", 1, None)["uid"] is None
