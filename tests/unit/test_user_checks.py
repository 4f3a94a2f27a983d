"""Issue 49: a user's own checks of restored data (spec.restore.checksConfigMap,
spec.backup.drill.checksConfigMap): the ConfigMap's keys read into checks, refused with the key
and the fix when they cannot be; results compared without their values in any message; the
restore Job mounting the ConfigMap; a drill's throwaway cluster getting it. The checks against
real servers: tests/integration/test_user_checks.py."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from decimal import Decimal

import pytest

from mysql_operator.api import parse
from mysql_operator.backup.restore_types import RestoreError
from mysql_operator.backup.user_checks import (
    Check,
    difference,
    first_word,
    parse as parse_checks,
    read_folder,
    text,
)
from mysql_operator.job_commands import TERMINATION_BYTES
from mysql_operator.manifests.drill_cluster import drill_cluster
from mysql_operator.manifests.restore_jobs import RESTORE_CHECKS_DIR, restore_job
from tests.support.specs import body

SOURCE = "spec.restore.checksConfigMap 'shop-checks'"


def test_pairs_of_keys_become_checks_by_name_with_their_rows():
    checks = parse_checks(
        {
            "orders.sql": "  SELECT COUNT(*), SUM(total) FROM shop.orders;\n",
            "orders.expected": "3000\t5627500.00\n",
            "none.sql": "SELECT id FROM shop.orders WHERE total < 0",
            "none.expected": "",
            "nulls.sql": "(SELECT NULL, 'a')",
            "nulls.expected": "NULL\ta",
        },
        SOURCE,
    )
    assert checks == (
        Check("none", "SELECT id FROM shop.orders WHERE total < 0", ()),
        Check("nulls", "(SELECT NULL, 'a')", (("NULL", "a"),)),
        Check("orders", "SELECT COUNT(*), SUM(total) FROM shop.orders", (("3000", "5627500.00"),)),
    )


@pytest.mark.parametrize(
    "files, says",
    [
        ({}, "no check in it (missing, or no key NAME.sql)"),
        ({"a.sql": "SELECT 1"}, "a.expected is missing"),
        ({"a.expected": "1"}, "a.sql is missing"),
        ({"a.sql": "SELECT 1", "a.expected": "1", "notes.txt": "x"}, "key 'notes.txt' is neither NAME.sql"),
        ({"x" * 41 + ".sql": "SELECT 1"}, "NAME at most 40 characters"),
        ({"a.sql": "DELETE FROM t", "a.expected": ""}, "a.sql starts with 'DELETE': a check may only read"),
        ({"a.sql": "/*!50000 DROP TABLE t */", "a.expected": ""}, "starts with no keyword"),
        ({"a.sql": "SELECT '" + "x" * 70000 + "'", "a.expected": ""}, "a.sql is longer than 65536 bytes"),
        ({f"c{i}.{k}": "SELECT 1" for i in range(51) for k in ("sql", "expected")}, "51 checks; at most 50"),
    ],
)
def test_a_configmap_that_cannot_be_checks_is_refused_naming_the_key_and_the_fix(files, says):
    with pytest.raises(RestoreError) as e:
        parse_checks(files, SOURCE)
    assert str(e.value).startswith(SOURCE) and says in str(e.value)


@pytest.mark.parametrize(
    "query, word",
    [
        ("select 1", "SELECT"),
        ("-- counts\nSELECT 1", "SELECT"),
        ("# note\n/* a */ ((WITH x AS (SELECT 1) SELECT * FROM x))", "WITH"),
        ("  checksum table shop.orders", "CHECKSUM"),
        ("/*!80000 SELECT */ 1", ""),  # an executable comment may hide a write: not skipped
        ("--x\nSELECT 1", ""),  # '--' without a space is not a comment
        ("", ""),
    ],
)
def test_the_first_word_skips_comments_but_not_executable_ones(query, word):
    assert first_word(query) == word


def test_values_read_as_the_command_line_client_prints_them():
    assert [
        text(v)
        for v in (
            None,
            b"\xc3\xbc",
            Decimal("1.50"),
            dt.datetime(2025, 1, 1, 0, 1),
            dt.timedelta(hours=26, minutes=3, seconds=4),
            dt.timedelta(seconds=-5),
            7,
            0.5,
        )
    ] == ["NULL", "ü", "1.50", "2025-01-01 00:01:00", "26:03:04", "-00:00:05", "7", "0.5"]


@pytest.mark.parametrize(
    "got, says",
    [
        ([("1", "a"), ("2", "b")], None),
        ([("1", "a")], "it returned 1 rows, 2 expected"),
        ([("1", "a"), ("2", "b"), ("3", "c")], "it returned 3 rows, 2 expected"),
        ([("1", "a"), ("2", "secret")], "row 2 differs from the expected row in column 2"),
        ([("1",), ("2", "b")], "row 1 has 1 columns, the expected row 2"),
    ],
)
def test_a_difference_names_the_row_and_column_never_a_value(got, says):
    said = difference((("1", "a"), ("2", "b")), got)
    assert said == says
    assert "secret" not in (said or "")


def test_a_mounted_configmap_is_read_without_the_kubelets_own_entries(tmp_path):
    (tmp_path / "..2026_12_05").mkdir()
    (tmp_path / "..data").symlink_to(tmp_path / "..2026_12_05")
    (tmp_path / "a.sql").write_text("SELECT 1")
    (tmp_path / "a.expected").write_text("1\n")
    assert read_folder(str(tmp_path), SOURCE) == (Check("a", "SELECT 1", (("1",),)),)
    with pytest.raises(RestoreError, match="no check in it"):  # optional: a missing ConfigMap mounts empty
        read_folder(str(tmp_path / "absent"), SOURCE)
    (tmp_path / "b.sql").write_bytes(b"SELECT '\xff'")
    with pytest.raises(RestoreError, match="key 'b.sql' cannot be read as UTF-8 text"):
        read_folder(str(tmp_path), SOURCE)


CLUSTER = body(
    {
        "flavor": "mariadb",
        "instances": 2,
        "restore": {
            "s3": {"bucket": "backups", "credentialsSecret": {"name": "s3"}, "path": "shop/shop-1"},
            "checksConfigMap": {"name": "shop-checks"},
        },
    },
    "shop",
    "prod",
    uid="u1",
)


def test_the_restore_job_mounts_the_configmap_optional_and_read_only_and_names_it():
    c = parse(CLUSTER)
    assert c.spec.restore.checks_config_map == "shop-checks"
    pod = restore_job(c, c.spec.restore.s3, "shop/shop-1", "img")["spec"]["template"]["spec"]
    (ctr,) = pod["containers"]
    args = ctr["args"]
    assert args[args.index("--checks-dir") + 1] == RESTORE_CHECKS_DIR
    assert args[args.index("--checks-from") + 1] == "spec.restore.checksConfigMap 'shop-checks'"
    assert {"name": "user-checks", "configMap": {"name": "shop-checks", "optional": True}} in pod["volumes"]
    assert {"name": "user-checks", "mountPath": RESTORE_CHECKS_DIR, "readOnly": True} in ctr["volumeMounts"]
    # without the field: no volume, no argument
    plain = parse(
        {**CLUSTER, "spec": {**CLUSTER["spec"], "restore": {"s3": CLUSTER["spec"]["restore"]["s3"]}}}
    )
    pod = restore_job(plain, plain.spec.restore.s3, "shop/shop-1", "img")["spec"]["template"]["spec"]
    assert "--checks-dir" not in pod["containers"][0]["args"]
    assert not any(v["name"] == "user-checks" for v in pod["volumes"])


def test_a_drill_gives_its_throwaway_cluster_the_checks_configmap():
    source = {
        "metadata": {"name": "shop", "namespace": "prod", "uid": "u1"},
        "spec": {"flavor": "mysql", "backup": {"drill": {"checksConfigMap": {"name": "shop-checks"}}}},
    }
    body = drill_cluster(source, "shop-1", False, "job-uid")
    assert body["spec"]["restore"]["checksConfigMap"] == {"name": "shop-checks"}
    drill_spec = parse(
        {
            **CLUSTER,
            "spec": {
                **CLUSTER["spec"],
                **source["spec"],
                "backup": {
                    "storage": {"s3": CLUSTER["spec"]["restore"]["s3"] | {"path": None}},
                    "drill": {"checksConfigMap": {"name": "shop-checks"}},
                },
            },
        }
    )
    assert drill_spec.spec.backup.drill.checks_config_map == "shop-checks"


def restore_job_run(tmp_path, monkeypatch, checks_from: str | None = None) -> dict:
    """The restore Job's command, run with its own arguments, its ConfigMap's folder `tmp_path`;
    what it reported (its termination message)."""
    from mysql_operator.cli_backup import register
    from mysql_operator.job_commands import cmd_restore_into
    from mysql_operator.manifests.tenant_jobs import ENV_ACCESS_KEY, ENV_DB_PASSWORD, ENV_SECRET_KEY

    for name in (ENV_ACCESS_KEY, ENV_DB_PASSWORD, ENV_SECRET_KEY):
        monkeypatch.setenv(name, "x")
    log = tmp_path / "termination"
    c = parse(CLUSTER)
    pod = restore_job(c, c.spec.restore.s3, "shop/shop-1", "img")["spec"]["template"]["spec"]
    argv = [str(tmp_path) if a == RESTORE_CHECKS_DIR else a for a in pod["containers"][0]["args"]]
    argv += ["--termination-log", str(log), *(["--checks-from", checks_from] if checks_from else [])]
    p = argparse.ArgumentParser()
    register(p.add_subparsers(dest="command", required=True))
    assert cmd_restore_into(p.parse_args(argv)) == 1
    text = log.read_text()
    assert len(text.encode()) <= TERMINATION_BYTES
    return json.loads(text)


def test_a_configmap_that_cannot_be_read_fails_the_restore_job_before_it_touches_a_server(
    tmp_path, monkeypatch
):
    """Without connecting anywhere: the Job's targets do not exist here."""
    (tmp_path / "a.sql").write_text("UPDATE t SET x = 1")
    (tmp_path / "a.expected").write_text("")
    result = restore_job_run(tmp_path, monkeypatch)
    assert result["ok"] is False and result["message"].startswith(f"{SOURCE}: a.sql starts with 'UPDATE'")


def test_a_report_too_long_stays_whole_json_with_its_message_shortened(tmp_path, monkeypatch):
    result = restore_job_run(tmp_path, monkeypatch, checks_from="ü" * 5000)
    assert (
        result["ok"] is False and result["message"].startswith("üüü") and result["message"].endswith(" [...]")
    )
