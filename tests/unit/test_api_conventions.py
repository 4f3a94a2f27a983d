"""The API's conventions (docs/reference/index.md) and the spellings of earlier versions.

A choice is spelled in UpperCamelCase, a duration is a string with its unit, a Secret the user
provides is `...Secret: {name, key}`. Objects written with the earlier spellings (lowercase
choices, `...Seconds` integers, `binlogRetention.hours`, `passwordSecretKeyRef`) mean exactly
what they meant; where an object sets both, the newer field is read and the older one named.
"""

from __future__ import annotations

import re

import pytest
import yaml

from mysql_operator.api import SpecError, parse, parse_backup
from mysql_operator.api.fields import DURATION_RE, duration_seconds, format_duration
from mysql_operator.api.sql import parse_sql_object
from tests.support.specs import CLUSTER_CRD, body

SPELLINGS = [
    ({"flavor": "MariaDB", "version": "10.11"}, {"flavor": "mariadb", "version": "10.11"}),
    ({"flavor": "MySQL"}, {"flavor": "mysql"}),
    ({"replication": {"mode": "Async"}}, {"replication": {"mode": "async"}}),
    ({"replication": {"mode": "SemiSync"}}, {"replication": {"mode": "semisync"}}),
    ({"replication": {"failover": {"delay": "10s"}}}, {"replication": {"failover": {"delaySeconds": 10}}}),
    ({"replication": {"failover": {"delay": "2m"}}}, {"replication": {"failover": {"delaySeconds": 120}}}),
    ({"replication": {"maxReadLag": "0s"}}, {"replication": {"maxReadLagSeconds": 0}}),
    ({"replication": {"maxReadLag": "1h"}}, {"replication": {"maxReadLagSeconds": 3600}}),
    (
        {"replication": {"binlogRetention": {"maxAge": "3d"}}},
        {"replication": {"binlogRetention": {"hours": 72}}},
    ),
    (
        {"replication": {"binlogRetention": {"maxAge": "0h"}}},
        {"replication": {"binlogRetention": {"hours": 0}}},
    ),
    ({"tls": {"certificateValidity": "90d"}}, {"tls": {"certificateValiditySeconds": 7776000}}),
    ({"tls": {"certificateValidity": "2w"}}, {"tls": {"certificateValiditySeconds": 14 * 86400}}),
]
S3 = {"bucket": "bucket-one", "credentialsSecret": {"name": "s3"}}
BACKUP_SPELLINGS = [
    ({"storage": {"s3": S3}, "method": "Physical"}, {"storage": {"s3": S3}, "method": "physical"}),
    (
        {"storage": {"s3": S3}, "binlogs": {"enabled": True, "maxDelay": "30s"}},
        {"storage": {"s3": S3}, "binlogs": {"enabled": True, "maxDelaySeconds": 30}},
    ),
]


def cluster(**spec) -> dict:
    return body({"instances": 3, **spec}, name="db")


@pytest.mark.parametrize("newer,older", SPELLINGS, ids=lambda v: repr(v)[:60])
def test_the_newer_spelling_means_what_the_older_one_meant(newer, older):
    new, old = parse(cluster(**newer)), parse(cluster(**older))
    assert new == old and not new.superseded


@pytest.mark.parametrize("newer,older", BACKUP_SPELLINGS, ids=lambda v: repr(v)[:60])
def test_the_backup_sections_newer_spellings_mean_what_the_older_ones_meant(newer, older):
    assert parse(cluster(backup=newer)) == parse(cluster(backup=older))


def test_a_durations_default_is_the_older_fields_default():
    spec = parse(cluster()).spec
    assert spec.replication.failover.delay_seconds == 3 and spec.replication.max_read_lag_seconds == 60
    assert spec.replication.binlog_retention_seconds == 168 * 3600
    assert spec.tls.certificate_validity_seconds == 90 * 86400


def test_with_both_spellings_set_the_newer_is_read_and_the_older_named():
    """An object created before the newer field existed has the older one's default stored in it
    (the API server wrote it): adding the newer field is not refused, the older one is named."""
    c = parse(cluster(replication={"failover": {"delaySeconds": 3, "delay": "20s"}}))
    assert c.spec.replication.failover.delay_seconds == 20
    assert c.superseded == (("spec.replication.failover.delaySeconds", "spec.replication.failover.delay"),)
    c = parse(cluster(tls={"certificateValiditySeconds": 7776000, "certificateValidity": "30d"}))
    assert c.spec.tls.certificate_validity_seconds == 30 * 86400
    assert c.superseded == (("spec.tls.certificateValiditySeconds", "spec.tls.certificateValidity"),)


def test_the_backups_method_is_spelled_either_way():
    ref = {"clusterRef": {"name": "db"}}
    for spelled in ("Physical", "physical"):
        bk = parse_backup({"metadata": {"name": "b1"}, "spec": {**ref, "method": spelled}})
        assert bk.method == "physical"


@pytest.mark.parametrize(
    "spec,field,message",
    [
        ({"flavor": "Postgres"}, "spec.flavor", "must be one of MySQL, MariaDB, not 'Postgres'"),
        ({"replication": {"mode": "sync"}}, "spec.replication.mode", "one of SemiSync, Async"),
        (
            {"replication": {"failover": {"delay": "10"}}},
            "spec.replication.failover.delay",
            "'10' is not a duration",
        ),
        (
            {"replication": {"failover": {"delay": 10}}},
            "spec.replication.failover.delay",
            "use a whole number and s",
        ),
        (
            {"replication": {"failover": {"delay": "1h"}}},
            "spec.replication.failover.delay",
            "between 1s and 10m, not 1h",
        ),
        (
            {"replication": {"failover": {"delay": "0s"}}},
            "spec.replication.failover.delay",
            "between 1s and 10m",
        ),
        (
            {"replication": {"failover": {"delaySeconds": 601}}},
            "spec.replication.failover.delaySeconds",
            "between 1 and 600",
        ),
        (
            {"replication": {"binlogRetention": {"hours": -1}}},
            "spec.replication.binlogRetention.hours",
            "between 0 and 87600",
        ),
        (
            {"tls": {"certificateValidity": "1m"}},
            "spec.tls.certificateValidity",
            "between 2m and 1095d, not 1m",
        ),
        (
            {"tls": {"certificateValidity": "30m", "issuerRef": {"name": "ca"}}},
            "spec.tls.certificateValidity",
            "at least 1h with spec.tls.issuerRef",
        ),
        (
            {"tls": {"certificateValiditySeconds": 1800, "issuerRef": {"name": "ca"}}},
            "spec.tls.certificateValiditySeconds",
            "at least 3600 with spec.tls.issuerRef",
        ),
        ({"version": "9." + "7" * 20}, "spec.version", "at most 16 characters, not 22"),
    ],
)
def test_a_bad_value_is_refused_naming_the_field_and_the_fix(spec, field, message):
    with pytest.raises(SpecError) as e:
        parse(cluster(**spec))
    assert e.value.field == field and message in str(e.value)


def user(**spec) -> dict:
    return {
        "apiVersion": "mysql.operator.dev/v1alpha1",
        "kind": "MySQLUser",
        "metadata": {"name": "app", "namespace": "ns"},
        "spec": {"clusterRef": {"name": "db"}, "name": "app", **spec},
    }


def test_a_users_password_secret_is_read_under_either_name_and_errors_name_the_one_set():
    ref = {"name": "pw", "key": "password"}
    newer, older = (
        parse_sql_object(user(passwordSecret=ref)),
        parse_sql_object(user(passwordSecretKeyRef=ref)),
    )
    assert (newer.spec.password.name, newer.spec.password.key) == ("pw", "password")
    assert newer.spec.password.field == "spec.passwordSecret"
    assert older.spec.password.field == "spec.passwordSecretKeyRef"
    assert dict(newer.spec.__dict__, password=None) == dict(older.spec.__dict__, password=None)
    with pytest.raises(SpecError) as e:
        parse_sql_object(user(passwordSecret=ref, passwordSecretKeyRef=ref))
    assert e.value.field == "spec.passwordSecretKeyRef" and "not both" in str(e.value)


@pytest.mark.parametrize(
    "text,seconds", [("0s", 0), ("90s", 90), ("10m", 600), ("36h", 129600), ("90d", 7776000), ("2w", 1209600)]
)
def test_a_duration_reads_and_prints_back(text, seconds):
    assert duration_seconds(text) == seconds and duration_seconds(format_duration(seconds)) == seconds


def test_every_duration_of_the_crd_has_the_parsers_pattern_and_range_rule():
    """Each duration field's schema pattern is the parser's DURATION_RE, and its CEL rule checks
    the same range the parser does (read from the rule's text)."""
    crd = yaml.safe_load(CLUSTER_CRD.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    found = {}

    def walk(schema: dict, path: str) -> None:
        for k, v in (schema.get("properties") or {}).items():
            if v.get("pattern") == DURATION_RE.pattern:
                rule = v["x-kubernetes-validations"][0]["rule"]
                found[f"{path}.{k}"] = tuple(int(n) for n in re.findall(r"(?:>=|<=) ([0-9]+)", rule))
            walk(v, f"{path}.{k}")

    walk(spec, "spec")
    assert found == {
        "spec.replication.binlogRetention.maxAge": (0, 3650 * 86400),
        "spec.replication.maxReadLag": (0, 86400),
        "spec.replication.failover.delay": (1, 600),
        "spec.tls.certificateValidity": (120, 3 * 365 * 86400),
        "spec.backup.binlogs.maxDelay": (1, 3600),
        "spec.backup.drill.timeout": (300, 86400),
    }
    for path, (lo, hi) in found.items():
        field = path.rsplit(".", 1)[1]
        section = path.removeprefix("spec.").rsplit(".", 1)[0].split(".")

        def nest(value: str) -> dict:
            d: dict = {field: value}
            for k in reversed(section):
                d = {k: d}
            if section[0] == "backup":
                d["backup"].update(
                    storage={"s3": S3}, binlogs={**d["backup"].get("binlogs", {}), "enabled": True}
                )
            return d

        assert parse(cluster(**nest(format_duration(hi)))) is not None
        with pytest.raises(SpecError):
            parse(cluster(**nest(format_duration(hi + 1))))
        if lo:
            with pytest.raises(SpecError):
                parse(cluster(**nest(format_duration(lo - 1))))
