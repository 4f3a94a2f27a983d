"""The pure parts of a MariaDB physical restore: when the operator sees the restore Job serving a
copy, and the account statements the copy ends with (a server's init file runs them)."""

from __future__ import annotations

import pytest

from mysql_operator.backup.restore import RestoreError
from mysql_operator.backup.restore_mariadb_physical import init_file, series_refusal
from mysql_operator.restore_gate import serving


def _pod(*statuses):
    return {"status": {"containerStatuses": [{"name": n, "ready": r} for n, r in statuses]}}


@pytest.mark.parametrize(
    "pods, expected",
    [
        ([], False),  # no Pod yet
        ([{"status": {}}], False),  # scheduled, nothing started
        ([_pod(("restore", False))], False),  # a dump, or the copy not verified yet
        ([_pod(("client-tools", True), ("restore", False))], False),  # the sidecar does not count
        ([_pod(("restore", True))], True),
    ],
)
def test_the_job_serves_a_copy_once_its_container_is_ready(pods, expected):
    assert serving(pods) is expected


def test_account_statements_become_one_line_each_and_a_statement_spanning_lines_is_refused():
    assert init_file(["CREATE USER IF NOT EXISTS `a`@`%`", "GRANT USAGE ON *.* TO `a`@`%`;"]) == (
        b"CREATE USER IF NOT EXISTS `a`@`%`;\nGRANT USAGE ON *.* TO `a`@`%`;\n"
    )
    with pytest.raises(RestoreError, match="spans lines: CREATE USER `x\\nDROP`@`%`"):
        init_file(["CREATE USER `x\nDROP`@`%` IDENTIFIED BY PASSWORD '*AB'"])


def test_a_copy_restores_only_into_its_own_series():
    assert series_refusal("10.11.14", 10, 11) is None
    why = series_refusal("10.11.14", 11, 8)
    assert why and "MariaDB 10.11.14" in why and "runs 11.8" in why and "into a 10.11 cluster" in why
