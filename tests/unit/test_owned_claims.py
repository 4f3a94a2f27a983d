"""When a pass reads the data claims to grow them (owned.must_check_claims): only while one may
ask for less than spec.storage.size, so an idle cluster's resync reads none."""

from __future__ import annotations

from mysql_operator.owned import must_check_claims


def statefulset(uid: str, templated: str | None) -> dict:
    templates = [{"spec": {"resources": {"requests": {"storage": templated}}}}] if templated else []
    return {"metadata": {"uid": uid}, "spec": {"replicas": 3, "volumeClaimTemplates": templates}}


def test_before_the_statefulset_exists_its_claims_are_not_read():
    assert not must_check_claims(None, "1Gi", None)


def test_claims_are_read_until_each_was_seen_at_the_size_then_not_again():
    sts = statefulset("u1", "1Gi")
    assert must_check_claims(sts, "1Gi", None)
    assert not must_check_claims(sts, "1Gi", ("u1", "1Gi"))
    assert not must_check_claims(sts, "1024Mi", ("u1", "1024Mi"))


def test_a_new_statefulset_or_a_new_size_is_read_again():
    assert must_check_claims(statefulset("u2", "1Gi"), "1Gi", ("u1", "1Gi"))  # made again
    assert must_check_claims(statefulset("u1", "1Gi"), "512Mi", ("u1", "1Gi"))


def test_after_a_raise_every_apply_reads_them_the_template_is_smaller():
    # the template is immutable: a claim it makes later (a new server, a re-seed) is smaller
    assert must_check_claims(statefulset("u1", "1Gi"), "2Gi", ("u1", "2Gi"))
    assert must_check_claims(statefulset("u1", None), "2Gi", ("u1", "2Gi")) is False
