"""Issue 49: a user's own checks of restored data (backup/user_checks.py), run against a real server
of each flavor as the restore Job runs them: results compared as the command-line client prints
them; a failed check named without its values; no check can write, not even through a stored
function a SELECT calls; a check past its time limit stopped by the server."""

from __future__ import annotations

import pytest

from mysql_operator.backup import user_checks
from mysql_operator.backup.restore_types import RestoreError, Target
from tests.support.mariadb import ADMIN_USER

SOURCE = "spec.restore.checksConfigMap 'shop-checks'"


@pytest.fixture(scope="module")
def server(writable_server):
    s = writable_server
    for statement in (
        "CREATE DATABASE shop",
        "CREATE TABLE shop.orders (id INT PRIMARY KEY, total DECIMAL(10,2), at DATETIME, note VARCHAR(20))",
        "INSERT INTO shop.orders VALUES (1, 12.50, '2026-12-01 10:00:00', NULL), "
        "(2, 7.25, '2026-12-02 11:30:00', 'gift'), (3, 100.00, '2026-12-03 12:00:01', 'secret-value')",
        "CREATE TABLE shop.audit (n INT)",
        "SET GLOBAL log_bin_trust_function_creators = 1",
        # a function that writes: what a check's SELECT could call
        "CREATE FUNCTION shop.bump() RETURNS INT MODIFIES SQL DATA BEGIN INSERT INTO shop.audit VALUES (1); "
        "RETURN 1; END",
    ):
        s.query(statement)
    return s


def target(s) -> Target:
    return Target(s.host, s.port, ADMIN_USER, s.admin_password)


def checks(**pairs: tuple[str, str]) -> tuple[user_checks.Check, ...]:
    files = {}
    for name, (query, expected) in pairs.items():
        files[f"{name}.sql"], files[f"{name}.expected"] = query, expected
    return user_checks.parse(files, SOURCE)


def test_checks_that_hold_pass_by_name(server):
    passed = user_checks.run(
        target(server),
        checks(
            totals=(
                "SELECT COUNT(*), SUM(total), MAX(at) FROM shop.orders",
                "3\t119.75\t2026-12-03 12:00:01\n",
            ),
            rows=("SELECT id, note FROM shop.orders ORDER BY id;", "1\tNULL\n2\tgift\n3\tsecret-value\n"),
            none=("SELECT id FROM shop.orders WHERE total < 0", ""),
            checksum=("CHECKSUM TABLE shop.audit", "shop.audit\t0\n"),
        ),
    )
    assert passed == ("checksum", "none", "rows", "totals")


def test_checks_that_fail_are_named_with_where_they_differ_never_their_values(server):
    with pytest.raises(RestoreError) as e:
        user_checks.run(
            target(server),
            checks(
                good=("SELECT COUNT(*) FROM shop.orders", "3"),
                count=("SELECT COUNT(*) FROM shop.orders", "4"),
                notes=("SELECT note FROM shop.orders WHERE id = 3", "other-value"),
                more=("SELECT id FROM shop.orders ORDER BY id", "1\n2"),
                gone=("SELECT COUNT(*) FROM shop.lost", "0"),
            ),
        )
    text = str(e.value)
    assert text.startswith("4 of 5 checks failed: ")
    assert "count: row 1 differs from the expected row in column 1" in text
    assert "notes: row 1 differs from the expected row in column 1" in text
    assert "more: it returned 3 rows, 2 expected" in text
    assert "gone: " in text and "shop.lost" in text and "doesn't exist" in text
    assert "good" not in text and "secret-value" not in text and "other-value" not in text


def test_no_check_writes_even_through_a_function_its_select_calls(server):
    with pytest.raises(RestoreError, match=r"bump: .*READ ONLY transaction"):
        user_checks.run(target(server), checks(bump=("SELECT shop.bump()", "1")))
    assert server.query("SELECT COUNT(*) FROM shop.audit")[0][0] == 0


def test_a_check_past_its_time_limit_is_stopped_by_the_server(server, monkeypatch):
    monkeypatch.setattr(user_checks, "STATEMENT_SECONDS", 1)
    slow = "SELECT COUNT(*) FROM shop.orders a, shop.orders b WHERE SLEEP(1) = 0"  # 9 rows, a second each
    with pytest.raises(
        RestoreError, match=r"1 of 1 checks failed: slow: .*(execution time|max_statement_time)"
    ):
        user_checks.run(target(server), checks(slow=(slow, "9")))
