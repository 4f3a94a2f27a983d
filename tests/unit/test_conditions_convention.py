"""The API's conventions. Conditions as Kubernetes API conventions have them, on every kind: a list keyed by `type` (one
condition of a type), each written with the generation it was computed for (`observedGeneration`)
and a `lastTransitionTime` that moves only when its status changes. MySQLBackup's are a Job's:
Complete and Failed. The writers here are pure; tests/integration/test_crds.py has the API server
refuse two conditions of one type and keep what the writers write."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mysql_operator import status as cstatus
from mysql_operator import conditions as cconditions
from mysql_operator import summary as csummary
from mysql_operator.backup.backup_status import backup_status
from mysql_operator.units import human_size
from mysql_operator.sql_status import Result, status_for

ROOT = Path(__file__).resolve().parents[2]
CRDS = sorted((ROOT / "crds").glob("*.yaml"))


def status_schema(path: Path) -> dict:
    (version,) = yaml.safe_load(path.read_text())["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]["properties"]["status"]


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.stem)
def test_every_kinds_conditions_are_a_list_keyed_by_type(path):
    conditions = status_schema(path)["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert "type" in conditions["items"]["required"]
    assert {"observedGeneration", "lastTransitionTime"} <= set(conditions["items"]["properties"])


def written(conditions) -> bool:
    return all("observedGeneration" in c and "lastTransitionTime" in c for c in conditions)


def test_a_cluster_with_no_spec_in_effect_has_conditions_for_the_refused_generation():
    s = csummary.Summary(instances=0, spec_error="spec.instances: must be 1-9", refused_generation=3)
    status = cstatus.build_status(s, {}, "T1")
    assert status["phase"] == "Invalid" and written(status["conditions"])
    assert {c["observedGeneration"] for c in status["conditions"]} == {3}


def test_pass_overdue_carries_the_generation_and_keeps_the_others():
    ready = {"type": "Ready", "status": "True", "observedGeneration": 6, "lastTransitionTime": "T0"}
    overdue = cconditions.overdue_conditions([ready], 300, "T1", 7)
    assert overdue[0] == ready and written(overdue)
    assert (overdue[1]["type"], overdue[1]["status"], overdue[1]["observedGeneration"]) == (
        "PassOverdue",
        "True",
        7,
    )
    assert cconditions.overdue_conditions(overdue, None, "T2", 7) == [ready]


def test_a_sql_objects_ready_condition_carries_its_generation():
    status = status_for(Result(True, "Applied", "in sync"), {}, 2, "T1")
    assert written(status["conditions"]) and status["conditions"][0]["observedGeneration"] == 2


def conds(status) -> dict:
    return {c["type"]: (c["status"], c["reason"], c["lastTransitionTime"]) for c in status["conditions"]}


def test_a_backups_conditions_are_a_jobs_complete_and_failed():
    pending = backup_status({"phase": "Pending", "message": "waiting for one"}, {}, 1, "T1")
    assert conds(pending) == {
        "Complete": ("False", "BackupPending", "T1"),
        "Failed": ("False", "BackupPending", "T1"),
    }
    assert written(pending["conditions"]) and pending["conditions"][0]["message"] == "waiting for one"
    running = backup_status({"phase": "Running", "message": "Job b-backup started"}, pending, 1, "T2")
    # the status stays False: the time of the last change stays too
    assert conds(running) == {
        "Complete": ("False", "BackupRunning", "T1"),
        "Failed": ("False", "BackupRunning", "T1"),
    }
    done = backup_status(
        {"phase": "Succeeded", "sizeBytes": 1610612736, "message": "stored"}, running, 1, "T3"
    )
    assert conds(done) == {
        "Complete": ("True", "BackupSucceeded", "T3"),
        "Failed": ("False", "BackupSucceeded", "T1"),
    }
    assert (done["phase"], done["sizeBytes"], done["size"]) == ("Succeeded", 1610612736, "1.5 GiB")
    failed = backup_status({"phase": "Failed", "message": "boom"}, running, 1, "T4")
    assert conds(failed) == {
        "Complete": ("False", "BackupFailed", "T1"),
        "Failed": ("True", "BackupFailed", "T4"),
    }
    assert "size" not in failed


@pytest.mark.parametrize(
    "n,words",
    [
        (0, "0 B"),
        (512, "512 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (10 * 1024**2 + 1, "10.0 MiB"),
        (1610612736, "1.5 GiB"),
        (3 * 1024**4, "3.0 TiB"),
        (2048 * 1024**6, "2048.0 EiB"),
    ],
)
def test_a_backups_size_in_binary_units_with_one_decimal(n, words):
    assert human_size(n) == words


def unnamed(value, schema: dict, path: str = "status") -> list[str]:
    """The fields of `value` the schema does not name (where it lists properties)."""
    if isinstance(value, list):
        return [
            p for i, item in enumerate(value) for p in unnamed(item, schema.get("items", {}), f"{path}[{i}]")
        ]
    if not isinstance(value, dict) or "properties" not in schema:
        return []
    props = schema["properties"]
    return [
        p
        for key, item in value.items()
        for p in ([f"{path}.{key}"] if key not in props else unnamed(item, props[key], f"{path}.{key}"))
    ]


def test_the_status_schemas_name_every_field_the_writers_write():
    """status keeps x-kubernetes-preserve-unknown-fields (an older operator's fields survive), and
    names, typed and described, what this one writes."""
    entry = {"name": "db-1", "role": "reseeding", "ready": False, "reachable": True, "gtidExecuted": "0-1-9"}
    entry |= {"lagSeconds": 3, "error": "e", "waiting": "w", "reseed": {"phase": "copying", "bytesCopied": 1}}
    summary = csummary.Summary(instances=2, generation=1, ready=1, credentials_version="7", entries=(entry,))
    cluster = cstatus.build_status(summary, {}, "T1")
    backup = backup_status({"phase": "Succeeded", "sizeBytes": 5, "message": "stored"}, {}, 1, "T1")
    user = status_for(
        Result(True, "Applied", "ok", extra={"passwordSecret": "s", "passwordVersion": "v"}), {}, 1, "T"
    )
    for crd, status in (("mysqlclusters", cluster), ("mysqlbackups", backup), ("mysqlusers", user)):
        schema = status_schema(ROOT / "crds" / f"{crd}.yaml")
        assert schema["x-kubernetes-preserve-unknown-fields"] is True
        assert not unnamed(status, schema), (crd, unnamed(status, schema))


def rules(schema: dict):
    yield from schema.get("x-kubernetes-validations", [])
    for sub in (schema.get("properties") or {}).values():
        yield from rules(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from rules(schema[key])


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.stem)
def test_a_rule_that_names_the_offending_value_keeps_its_plain_message(path):
    """messageExpression names the value (tests/invalid/ has the API server say it); message
    stays for a server that does not evaluate it, and says the same without the value."""
    (version,) = yaml.safe_load(path.read_text())["spec"]["versions"]
    for rule in rules(version["schema"]["openAPIV3Schema"]):
        if "messageExpression" in rule:
            assert rule.get("message"), rule
            assert "self" in rule["messageExpression"] or "oldSelf" in rule["messageExpression"], rule
