"""Fixtures shared by the backup and restore integration tests: a real S3 server (MinIO) and real
MariaDB servers with the dump tools."""

from __future__ import annotations

import shutil

import pytest

from tests.support import mariadb as mdb
from tests.support import s3 as s3support


@pytest.fixture(scope="module")
def s3server(tmp_path_factory):
    reason = s3support.missing()
    if reason:
        pytest.skip(reason)
    server = s3support.S3Server(root=tmp_path_factory.mktemp("s3")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def factory():
    missing = mdb.missing_binaries() + [b for b in ("mariadb-dump", "mariadb", "zstd") if not shutil.which(b)]
    if missing:
        pytest.skip(reason=f"MariaDB tools missing ({', '.join(missing)}): run hack/install-deps.sh")
    f = mdb.MariaDBFactory()
    yield f
    f.close()
