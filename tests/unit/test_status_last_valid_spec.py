"""A spec the CRD admits but the parser refuses never stops a cluster: the pass acts on the last
spec that parsed (status.lastValidSpec), the status says what is refused (condition SpecValid, a
Warning Event once per generation) and never claims the refused generation is in effect."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from mysql_operator import status as cstatus
from mysql_operator import spec_record as cspec
from mysql_operator import summary as csummary
from tests.support.specs import body as cluster_body

GOOD = {"flavor": "mariadb", "instances": 3, "credentials": {"secretName": "mine"}}
BAD = {**GOOD, "config": {"myCnf": "[mysqld]\n= 50\n"}}
REFUSED = "spec.config.myCnf: line 2: a setting needs a name before '='"


def body(spec: dict, generation: int, status: dict | None = None) -> dict[str, Any]:
    return cluster_body(spec, "db", uid="u-1", generation=generation, status=status or {})


def healthy(**kw) -> csummary.Summary:
    base: dict[str, Any] = dict(
        instances=3,
        generation=4,
        spec=GOOD,
        ready=3,
        primary="db-0",
        primary_serving=True,
        primary_in_service=True,
        decision="Healthy",
    )
    return csummary.Summary(**{**base, **kw})


def condition(status: dict, ctype: str) -> dict:
    return next(c for c in status["conditions"] if c["type"] == ctype)


# ---------------------------------------------------------------------- the spec a pass acts on
def test_a_spec_that_parses_is_acted_on_as_it_is():
    own = body(GOOD, 4, {csummary.LAST_VALID_SPEC: {"generation": 3, "spec": {"instances": 1}}})
    acted, c, refused = cspec.spec_in_effect(own)
    assert acted is own and refused is None
    assert c is not None and (c.generation, c.spec.instances) == (4, 3)


def test_a_refused_spec_gives_way_to_the_last_that_parsed_with_its_generation():
    recorded = {csummary.LAST_VALID_SPEC: {"generation": 4, "spec": GOOD}}
    acted, c, refused = cspec.spec_in_effect(body(BAD, 5, recorded))
    assert refused == REFUSED
    assert c is not None and c.generation == 4 and c.spec.my_cnf == ""
    assert acted["spec"] == GOOD and acted["metadata"] == {
        "namespace": "ns",
        "name": "db",
        "uid": "u-1",
        "generation": 4,
    }


def test_with_no_spec_that_parsed_there_is_nothing_to_act_on():
    # the first spec refused, or a cluster an earlier operator version recorded nothing for
    _, c, refused = cspec.spec_in_effect(body(BAD, 1))
    assert c is None and refused == REFUSED
    # a recorded spec this version refuses counts as none
    _, c, refused = cspec.spec_in_effect(
        body(BAD, 6, {csummary.LAST_VALID_SPEC: {"generation": 5, "spec": {"instances": 12}}})
    )
    assert c is None and refused == REFUSED


# ---------------------------------------------------------------------- the status of such a pass
def test_a_refused_spec_with_a_working_primary_keeps_the_phase_and_availability_and_says_why():
    s = healthy(spec_error=REFUSED, refused_generation=5)
    status = cstatus.build_status(s, {}, "T1")
    assert status["phase"] == "Ready"
    assert condition(status, "Available")["status"] == "True"
    assert condition(status, "Ready")["status"] == "True"
    assert condition(status, "Degraded")["status"] == "False"
    said = condition(status, "SpecValid")
    assert (said["status"], said["reason"], said["observedGeneration"]) == ("False", "InvalidSpec", 5)
    assert said["message"].startswith(REFUSED + "; generation 5 is not applied")
    assert "generation 4" in said["message"]
    # what is in effect is generation 4's spec: observedGeneration never claims the refused one
    assert status["observedGeneration"] == 4
    assert all(c["observedGeneration"] == 4 for c in status["conditions"] if c["type"] != "SpecValid")


def test_with_nothing_in_effect_the_phase_is_invalid_and_nothing_serves():
    s = csummary.Summary(instances=0, generation=1, spec_error=REFUSED, refused_generation=1)
    status = cstatus.build_status(s, {}, "T1")
    assert status["phase"] == "Invalid"
    assert condition(status, "Available")["status"] == "False"
    assert (condition(status, "SpecValid")["status"], condition(status, "SpecValid")["message"]) == (
        "False",
        REFUSED,
    )


def test_the_warning_is_posted_once_per_refused_generation_and_the_condition_clears_on_a_fix():
    def invalid(events):
        return [e for e in events if e[1] == "InvalidSpec"]

    first = cstatus.plan(healthy(spec_error=REFUSED, refused_generation=5), {}, [], "T1")
    assert invalid(first.events) == [
        ("Warning", "InvalidSpec", condition(first.status, "SpecValid")["message"])
    ]
    again = cstatus.plan(healthy(spec_error=REFUSED, refused_generation=5), first.status, [], "T2")
    # every later pass of that generation: nothing said, nothing written
    assert invalid(again.events) == [] and not again.changed
    other = cstatus.plan(healthy(spec_error=REFUSED, refused_generation=6), first.status, [], "T3")
    assert len(invalid(other.events)) == 1  # another edit, refused as well
    fixed = cstatus.plan(healthy(generation=7, spec={**GOOD, "instances": 2}), other.status, [], "T4")
    assert invalid(fixed.events) == []
    assert condition(fixed.status, "SpecValid")["status"] == "True"
    assert fixed.status["observedGeneration"] == 7


def test_a_first_spec_refused_is_said_once_not_also_as_degraded():
    s = csummary.Summary(instances=0, generation=1, spec_error=REFUSED, refused_generation=1)
    first = cstatus.plan(s, {}, [], "T1")
    assert [e[1] for e in first.events] == ["InvalidSpec"]
    assert cstatus.plan(s, first.status, [], "T2").events == ()


# ---------------------------------------------------------------------- the record
def test_the_spec_is_recorded_when_a_generation_first_parses_and_not_written_again():
    first = cstatus.plan(healthy(), {}, [], "T1")
    assert first.status[csummary.LAST_VALID_SPEC] == {"generation": 4, "spec": GOOD}
    stored = {**first.status}
    again = cstatus.plan(healthy(), stored, [], "T2")
    assert csummary.LAST_VALID_SPEC not in again.status and not again.changed
    # a refused spec leaves the record as it is: the pass runs on it
    refused = cstatus.plan(healthy(spec_error=REFUSED, refused_generation=5), stored, [], "T3")
    assert csummary.LAST_VALID_SPEC not in refused.status
    # nothing in effect: nothing recorded
    invalid = cstatus.plan(csummary.Summary(instances=0, spec_error=REFUSED), {}, [], "T4")
    assert csummary.LAST_VALID_SPEC not in invalid.status


def test_a_field_removed_from_the_spec_is_removed_from_the_record():
    """The status is written with a JSON merge patch: a nested key the new spec lacks is nulled."""
    old = {"generation": 4, "spec": {**GOOD, "backup": {"schedule": "0 3 * * *"}}}
    patch = cspec.spec_record(healthy(generation=5), {csummary.LAST_VALID_SPEC: old})
    assert merge(old, patch[csummary.LAST_VALID_SPEC]) == {"generation": 5, "spec": GOOD}
    assert patch[csummary.LAST_VALID_SPEC]["spec"]["backup"] is None


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386, as the API server applies a status patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k), v)
    return out


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=12,
)
OBJECTS = st.dictionaries(st.text(max_size=2), JSON, max_size=4)


@given(OBJECTS, OBJECTS)
def test_replacing_turns_any_stored_object_into_the_new_one(old, new):
    stored = merge({}, old)  # as stored: no null member
    assert merge(stored, cspec.replacing(stored, new)) == merge({}, new)
