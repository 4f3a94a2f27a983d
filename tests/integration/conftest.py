"""Fixtures shared by integration tests: a real S3 server (MinIO), the OCI registry, real MariaDB servers with the dump
tools (backup and restore tests), and one writable server of each flavor (SQL objects, exporter)."""

from __future__ import annotations

import shutil

import pytest

import sys

from mysql_operator.db.flavor import Flavor
from tests.support import mariadb as mdb
from tests.support import mysql_container
from tests.support import registry as reg
from tests.support import s3 as s3support
from tests.support.mysql import MySQLFactory, mysql_unavailable


@pytest.fixture(scope="module")
def s3server(tmp_path_factory):
    reason = s3support.missing()
    if reason:
        pytest.skip(reason)
    server = s3support.S3Server(root=tmp_path_factory.mktemp("s3")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """The test registry (TLS, basic auth) on loopback, one per module."""
    reason = reg.missing()
    if reason:
        pytest.skip(reason=reason)
    r = reg.Registry(tmp_path_factory.mktemp("registry")).start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def factory():
    missing = mdb.missing_binaries() + [b for b in ("mariadb-dump", "mariadb", "zstd") if not shutil.which(b)]
    if missing:
        pytest.skip(reason=f"MariaDB tools missing ({', '.join(missing)}): run hack/install-deps.sh")
    f = mdb.MariaDBFactory()
    yield f
    f.close()


@pytest.fixture(scope="module", params=["mariadb", "mysql"])
def writable_server(request):
    """One server of each flavor, writable as a primary is (the operator creates accounts there),
    with `flavor` set; its log is printed when a test of the module failed."""
    if request.param == "mysql":
        missing = mysql_container.rsa_unavailable() or mysql_unavailable()
        if missing:
            pytest.skip(reason=f"no MySQL server here: {missing}")
        factory = MySQLFactory()
    else:
        factory = mdb.MariaDBFactory()
    failed_before = request.session.testsfailed
    try:
        (s,) = factory.create(1, prefix=request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")[:8])
        s.flavor = Flavor(request.param)
        if s.flavor is Flavor.MYSQL:
            s.query("SET GLOBAL super_read_only = 0")
        s.query("SET GLOBAL read_only = 0")
        yield s
    finally:
        if request.session.testsfailed > failed_before:
            print("\n" + factory.logs_report(40), file=sys.stderr)
        factory.close()
