"""The pure parts of a MariaDB physical restore: when the operator sees the restore Job serving a
copy, and the account statements the copy ends with (a server's init file runs them)."""

from __future__ import annotations

import pytest

from mysql_operator.backup.restore_types import RestoreError
from mysql_operator.backup.copy_serving import peer_named
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


HOSTS = frozenset({"db-0.db-headless.prod.svc", "db-1.db-headless.prod.svc"})


def _cert(*dns, cn=None):
    out: dict = {"subjectAltName": tuple(("DNS", d) for d in dns)}
    if cn:
        out["subject"] = ((("commonName", cn),),)
    return out


@pytest.mark.parametrize(
    "cert, expected",
    [
        (_cert("*.db-headless.prod.svc", "db-rw"), True),  # an instance's certificate (server_dns_names)
        (_cert("DB-1.db-headless.prod.svc."), True),  # names are case-insensitive, a final dot ignored
        (_cert("*.db-headless.tenant-b.svc"), False),  # the same cluster name in another namespace
        (_cert("*.other-headless.prod.svc"), False),  # another cluster of the namespace
        (_cert("*.prod.svc", "*.svc"), False),  # a wildcard covers one label only
        (_cert("db-rw.prod.svc", cn="*.db-headless.prod.svc"), False),  # with SANs the CN is not a name
        (_cert(cn="db-0.db-headless.prod.svc"), True),  # without SANs it is
        ({}, False),
        (None, False),  # no certificate
    ],
)
def test_the_copy_goes_only_to_a_certificate_naming_an_instance_of_the_cluster(cert, expected):
    assert peer_named(cert, HOSTS) is expected
