"""Parsing, defaults and cross-field checks of the typed spec (mysql_operator.api)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from mysql_operator.api.sql import PLURALS as SQL_PLURALS
from mysql_operator.api.sql import parse_sql_object

from mysql_operator.api import (
    SpecError,
    check_cron,
    parse,
    parse_backup,
    storage_bytes,
)
from mysql_operator.api import mycnf
from mysql_operator.manifests import server_settings
from tests.support.specs import CLUSTER_CRD, FULL, body, spec_schema

REPO = Path(__file__).resolve().parents[2]


def minimal(**spec) -> dict:
    return body({"instances": 3, **spec}, name="db")


def apply_schema_defaults(schema: dict, value):
    """What the apiserver's defaulting does (enough for this CRD: object defaults, recursively)."""
    if not isinstance(value, dict) or schema.get("type") != "object":
        return value
    out = dict(value)
    for name, sub in schema.get("properties", {}).items():
        if name not in out and "default" in sub:
            out[name] = copy.deepcopy(sub["default"])
        if name in out:
            out[name] = apply_schema_defaults(sub, out[name])
    return out


def test_minimal_spec_gets_the_documented_defaults():
    c = parse(minimal())
    s = c.spec
    assert (c.name, c.namespace) == ("db", "ns")
    assert s.flavor == "mysql" and s.server_version == "8.4" and s.image_ref == "mysql:8.4"
    assert s.image_pull_policy == "IfNotPresent"
    assert s.primary is None and s.desired_primary == 0
    assert s.replication.mode == "semisync" and s.replication.semi_sync_acks is None
    assert s.replication.allow_async_fallback is False
    assert s.replication.failover.enabled is True and s.replication.failover.delay_seconds == 3
    assert s.credentials is None and s.database is None and s.my_cnf == ""
    assert s.storage.size == "10Gi" and storage_bytes(s) == 10 * 2**30
    assert s.service.type == "ClusterIP" and s.deletion_policy == "Retain"
    assert s.backup is None and s.restore is None


@pytest.mark.parametrize("spec", [{"instances": 1}, FULL, {"instances": 2, "flavor": "mariadb"}])
def test_python_defaults_mirror_the_crd_defaults(spec):
    """A spec defaulted the way the apiserver does it parses to the same value as the raw one."""
    raw = body(spec)
    defaulted = body(apply_schema_defaults(spec_schema(), copy.deepcopy(spec)))
    assert defaulted != raw or spec is FULL  # the CRD did add defaults (FULL sets nearly all)
    assert parse(defaulted) == parse(raw)


@pytest.mark.parametrize(
    "flavor,version,image,expected",
    [
        ("mysql", None, None, "mysql:8.4"),
        ("mysql", "9.7", None, "mysql:9.7"),
        ("mariadb", None, None, "mariadb:10.11"),
        ("mariadb", "11.4", None, "mariadb:11.4"),
        ("mariadb", "11.4", "localhost/mariadb:test", "localhost/mariadb:test"),
    ],
)
def test_image_from_flavor_and_version_or_override(flavor, version, image, expected):
    spec = {"flavor": flavor}
    if version:
        spec["version"] = version
    if image:
        spec["image"] = image
    assert parse(minimal(**spec)).spec.image_ref == expected


BAD = [
    ({"instances": 0}, "spec.instances", "between 1 and 9"),
    ({"instances": "3"}, "spec.instances", "integer"),
    ({"flavor": "postgres"}, "spec.flavor", "one of MySQL, MariaDB, not 'postgres'"),
    ({"primary": 3}, "spec.primary", "lower than spec.instances"),
    ({"version": "10.11"}, "spec.version", "must match spec.flavor"),
    ({"flavor": "mariadb", "version": "8.4"}, "spec.version", "must match spec.flavor"),
    ({"version": "8.0"}, "spec.version", "not a supported release"),
    ({"version": "5.7.44"}, "spec.version", "must match spec.flavor"),
    ({"flavor": "mariadb", "version": "10.6"}, "spec.version", "not a supported release"),
    ({"flavor": "mariadb", "version": "11.2"}, "spec.version", "not a supported release"),
    ({"image": "registry:5000/mysql:8.0.40"}, "spec.image", "not a supported release of spec.flavor"),
    ({"flavor": "mariadb", "image": "mariadb:9.7"}, "spec.image", "not a supported release of spec.flavor"),
    ({"version": "9.7", "image": "mysql:8.4"}, "spec.image", "another server version than spec.version"),
    ({"replication": {"semiSyncAcks": 3}}, "spec.replication.semiSyncAcks", "lower than spec.instances"),
    (
        {"flavor": "mariadb", "replication": {"semiSyncAcks": 2}},
        "spec.replication.semiSyncAcks",
        "exactly one",
    ),
    (
        {"replication": {"mode": "async", "semiSyncAcks": 1}},
        "spec.replication.semiSyncAcks",
        "set the mode to SemiSync",
    ),
    (
        {"replication": {"failover": {"delaySeconds": 0}}},
        "spec.replication.failover.delaySeconds",
        "between 1 and 600",
    ),
    ({"storage": {"size": "10GB"}}, "spec.storage.size", "quantity"),
    ({"storage": {"size": "0"}}, "spec.storage.size", "larger than zero"),
    ({"config": {"myCnf": "[mysqld]\nserver-id=7"}}, "spec.config.myCnf", "line 2: server-id"),
    ({"config": {"myCnf": "!includedir /etc/x"}}, "spec.config.myCnf", "!includedir"),
    (
        {"podLabels": {"app.kubernetes.io/instance": "x"}},
        "spec.podLabels.app.kubernetes.io/instance",
        "choose another key",
    ),
    ({"podLabels": {"team": "-bad-"}}, "spec.podLabels.team", "label value"),
    ({"podLabels": {"bad key": "x"}}, "spec.podLabels.bad key", "not a valid label key"),
    ({"podLabels": {"Example.com/x": "x"}}, "spec.podLabels.Example.com/x", "not a valid label key"),
    ({"nodeSelector": {"zone": "a b"}}, "spec.nodeSelector.zone", "valid node label"),
    ({"podAnnotations": {"mysql.operator.dev/x": "1"}}, "spec.podAnnotations.mysql.operator.dev/x", "owns"),
    ({"resources": {"limits": {"memory": "lots"}}}, "spec.resources.limits.memory", "not a quantity"),
    ({"service": {"type": "ExternalName"}}, "spec.service.type", "one of"),
    ({"backup": {"schedule": "0 3 * * *"}}, "spec.backup.schedule", "needs spec.backup.storage"),
    (
        {
            "backup": {
                "storage": {"s3": {"bucket": "b-1", "credentialsSecret": {"name": "s"}}},
                "schedule": "61 * * * *",
            }
        },
        "spec.backup.schedule",
        "minute",
    ),
    ({"backup": {"retention": {"maxAge": "30 days"}}}, "spec.backup.retention.maxAge", "30d"),
    ({"backup": {"method": "snapshot"}}, "spec.backup.method", "one of Logical, Physical"),
    (
        {"backup": {"storage": {"s3": {"bucket": "Bad_Bucket", "credentialsSecret": {"name": "s"}}}}},
        "spec.backup.storage.s3.bucket",
        "lowercase",
    ),
    ({"restore": {}}, "spec.restore", "exactly one"),
    (
        {"restore": {"s3": {"bucket": "b-1", "credentialsSecret": {"name": "s"}}}},
        "spec.restore.s3.path",
        "required",
    ),
    ({"database": {"name": "my-db"}}, "spec.database.name", "letters, digits and '_'"),
    ({"deletionPolicy": "Orphan"}, "spec.deletionPolicy", "Retain, Delete"),
    ({"operatorUpgrades": "Never"}, "spec.operatorUpgrades", "Auto, Manual"),
]


@pytest.mark.parametrize("spec,field,fragment", BAD, ids=[b[1] + ":" + b[2] for b in BAD])
def test_bad_spec_is_refused_naming_the_field(spec, field, fragment):
    with pytest.raises(SpecError) as e:
        parse(minimal(**spec))
    assert e.value.field == field
    assert fragment in str(e.value)


def test_fields_this_version_does_not_know_are_ignored_and_named_not_refused():
    """A newer CRD's fields (a rolled-back operator): the cluster keeps being managed (failover
    goes on); what was ignored is named, for the reconciler's Warning Event."""
    spec = minimal(
        replicas=3,
        tls={"issuerRef": {"name": "ca", "issuer": "x"}, "certificateValiditySeconds": 3600},
        backup={
            "storage": {"s3": {"bucket": "b-1", "credentialsSecret": {"name": "s"}}},
            "encryption": {"keySecret": {"name": "k"}, "algorithm": "x"},
            "binlogs": {"enabled": True, "delay": 3},
        },
    )
    c = parse(spec)
    assert sorted(c.ignored) == [
        "spec.backup.binlogs.delay",
        "spec.backup.encryption.algorithm",
        "spec.replicas",
        "spec.tls.issuerRef.issuer",
    ]
    assert c.spec.tls.issuer_ref is not None and c.spec.backup is not None and c.spec.backup.binlogs.enabled
    assert parse(minimal()).ignored == ()


def test_valid_label_keys_are_accepted():
    c = parse(
        minimal(
            podLabels={"team": "a", "example.com/tier": "db", "a.b-c_d": ""},
            nodeSelector={"topology.kubernetes.io/zone": "eu-1a"},
        )
    )
    assert c.spec.pod_labels["example.com/tier"] == "db"


def test_missing_instances_and_bad_names():
    with pytest.raises(SpecError, match="spec.instances: is required"):
        parse(body({}))
    for name in ("Upper", "x" * 41, "1abc", "a_b"):
        with pytest.raises(SpecError) as e:
            parse(body({"instances": 1}, name=name))
        assert e.value.field == "metadata.name"


def test_backup_and_restore_are_parsed():
    c = parse(body(FULL))
    b = c.spec.backup
    assert b.s3.bucket == "bucket-one" and b.s3.credentials_secret.access_key_id_key == "AK"
    assert b.schedule == "0 3 * * *" and b.retention.keep_last == 7
    assert b.retention.max_age_seconds == 30 * 86400
    assert c.spec.restore.from_backup == "backup-1" and c.spec.restore.s3 is None


def test_backup_method_is_logical_unless_physical_is_asked_for():
    assert parse(minimal(backup={})).spec.backup.method == "logical"
    assert parse(minimal(backup={"method": "physical"})).spec.backup.method == "physical"


def test_parse_backup():
    bk = parse_backup({"metadata": {"name": "b1", "namespace": "n"}, "spec": {"clusterRef": {"name": "db"}}})
    assert (bk.name, bk.namespace, bk.cluster_name, bk.s3) == ("b1", "n", "db", None)
    with pytest.raises(SpecError) as e:
        parse_backup({"metadata": {"name": "b1"}, "spec": {}})
    assert e.value.field == "spec.clusterRef.name"
    assert bk.method is None  # the cluster's
    ref = {"clusterRef": {"name": "db"}}
    assert (
        parse_backup({"metadata": {"name": "b1"}, "spec": {**ref, "method": "physical"}}).method == "physical"
    )
    with pytest.raises(SpecError) as e:
        parse_backup({"metadata": {"name": "b1"}, "spec": {**ref, "method": "snapshot"}})
    assert e.value.field == "spec.method" and "one of Logical, Physical" in str(e.value)


# ---------------------------------------------------------------- myCnf


OWNED_LINES = [
    "server_id=3",
    "server-id = 3",
    "SERVER_ID=3",
    "loose-server-id=3",
    "gtid_mode=OFF",
    "gtid-strict-mode=0",
    "log_bin",
    "log-bin=foo",
    "skip-log-bin",
    "disable_log_bin",
    "log_slave_updates=0",
    "log-replica-updates=OFF",
    "read_only=0",
    "super-read-only=OFF",
    "port=3307",
    "datadir=/x",
    "socket=/tmp/s",
    "bind-address=127.0.0.1",
    "report_host=x",
    "skip-slave-start=0",
    "skip_replica_start",
    "binlog_format=STATEMENT",
    "plugin_load=x.so",
    "user=root",
    "rpl_semi_sync_master_enabled=1",
    "rpl-semi-sync-source-timeout=5",
    "  gtid_domain_id = 2",
    "enforce_gtid_consistency=WARN",
    "pid-file=/x",
    "relay_log=r",
    "init-rpl-role=MASTER",
    "binlog_expire_logs_seconds=86400",  # spec.replication.binlogRetention
    "expire-logs-days=3",
]
FREE_LINES = [
    "max_connections=100",
    "log_bin_trust_function_creators=1",
    "port_open_timeout=5",
    "read_only_compressed=OFF",
    "innodb_buffer_pool_size=1G",
    "binlog_cache_size=1M",
    "plugin_load_add=auth_pam.so",
    "# server_id=1 is a comment",
    "; port=1",
    "[mysqld]",
    "character-set-server=utf8mb4",
    "userstat=1",
    "server_audit_logging=ON",
    "sql_mode=''",
]


@pytest.mark.parametrize("line", OWNED_LINES)
def test_owned_setting_is_refused(line):
    with pytest.raises(mycnf.MyCnfError, match="line 2"):
        mycnf.check(f"max_connections=1\n{line}\n")


@pytest.mark.parametrize("line", FREE_LINES)
def test_free_setting_is_accepted(line):
    mycnf.check(f"{line}\n")


def _cel_owned_regex() -> re.Pattern:
    """The CRD's CEL regex for owned keys, translated from RE2 to Python syntax."""
    text = CLUSTER_CRD.read_text()
    rule = next(r for r in re.findall(r"matches\('(.*?)'\)", text) if "server[-_]id" in r)
    return re.compile(rule.replace("[[:space:]]", "[ \\t\\n\\r\\v\\f]"))


@pytest.mark.parametrize("line", OWNED_LINES + FREE_LINES)
def test_crd_cel_rule_and_python_agree_on_owned_keys(line):
    python_refuses = True
    try:
        mycnf.check(line)
        python_refuses = False
    except mycnf.MyCnfError:
        pass
    assert bool(_cel_owned_regex().search(line)) == python_refuses


def test_settings_the_operator_writes_cannot_be_overridden_by_the_user():
    not_owned = {"skip_name_resolve", "plugin_load_add", "mysqlx_socket"}  # additive or harmless
    for flavor, version in (("mysql", "8.4"), ("mariadb", "10.11")):
        spec = parse(minimal(flavor=flavor, version=version)).spec
        for key, _ in server_settings(spec):
            assert mycnf.is_owned(key) or key in not_owned, f"{flavor}: {key} could be overridden"


# ---------------------------------------------------------------- cron


@pytest.mark.parametrize(
    "expr",
    [
        "0 3 * * *",
        "*/15 * * * *",
        "0 0 1,15 * MON-FRI",
        "5 4 * jan sun",
        "@daily",
        "@hourly",
        "0 0-6/2 * * 7",
        "0 0 L * *",  # cronsim's extensions: last day of the month, 2nd Monday
        "0 0 * * mon#2",
    ],
)
def test_cron_accepts(expr):
    check_cron(expr)


@pytest.mark.parametrize(
    "expr,fragment",
    [
        ("0 3 * *", "5 fields"),
        ("60 * * * *", "minute"),
        ("* 24 * * *", "hour"),
        ("* * 0 * *", "day of month"),
        ("* * * 13 *", "month"),
        ("* * * * 8", "day of week"),
        ("*/0 * * * *", "minute '\\*/0'"),
        ("5-1 * * * *", "minute '5-1'"),
        ("0 0 30 2 *", "day of month '30'"),  # never fires: refused when parsed
        ("@reboot", "5 fields"),
        ("0 0 3 * * *", "5 fields"),  # no seconds field
    ],
)
def test_cron_refuses(expr, fragment):
    with pytest.raises(ValueError, match=fragment):
        check_cron(expr)


def test_examples_parse():
    docs = [
        d
        for p in sorted((REPO / "examples").glob("*.yaml"))
        if not p.name.startswith("values-")
        for d in yaml.safe_load_all(p.read_text())
    ]  # values-*.yaml are Helm values, not resources
    kinds = sorted(d["kind"] for d in docs)
    assert kinds.count("MySQLCluster") >= 3 and "MySQLBackup" in kinds
    assert {"MySQLDatabase", "MySQLUser", "MySQLGrant"} <= set(kinds)
    for d in docs:
        if d["kind"] in SQL_PLURALS:
            parse_sql_object(d)
        else:
            (parse if d["kind"] == "MySQLCluster" else parse_backup)(d)


def test_admission_refuses_every_setting_the_operator_owns():
    """The CRD's CEL rule on spec.config.myCnf and mycnf.OWNED_KEYS name the same settings: a key
    the operator owns is refused at admission, not only later in the status."""
    import re

    import yaml

    from tests.support.chart import REPO

    crd = yaml.safe_load((REPO / "crds" / "mysqlclusters.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rules = spec["properties"]["config"]["properties"]["myCnf"]["x-kubernetes-validations"]
    (rule,) = [r["rule"] for r in rules if "server[-_]id" in r["rule"]]
    pattern = re.compile(
        rule.removeprefix("!self.matches('").removesuffix("')").replace("[[:space:]]", "[ \\t\\n\\r\\v\\f]")
    )
    for key in sorted(mycnf.OWNED_KEYS):
        assert pattern.search(f"{key.replace('_', '-')} = 1\n"), (
            f"{key}: admitted by the CRD, refused by the operator"
        )
    assert not pattern.search("max_connections = 100\n")
