"""The client tools are checked before they touch a server's data (backup/pipeline.tool_check),
against a real MySQL 9.7 server, the real client-tools sidecar and a real S3 server (MinIO).

- `mysql-operator backup archive-binlogs` (what the archiver's Pod runs) with a tool image that
  has no `mysqlbinlog` (a MariaDB 11.8 tool image named for a MySQL cluster, a real image of this
  project): it stops at once, exit status 1, and its termination message (what the operator shows
  in the condition BinlogArchiving, tests/unit/test_pitr_spec.py) names the tool, the image and why;
  nothing reaches the bucket.
- A logical backup with that tool image: its `mysqldump` is MariaDB's (Debian's MariaDB packages
  answer to that name): the backup fails before dumping, saying so.
- A `mysqlbinlog` of an older series than the server's: no such build exists here (no MySQL but
  9.7), so its `--version` line is the one injected fault; the archiver refuses to stream, naming
  both versions and the fix, and starts no stream."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mysql_operator.backup import storage
from mysql_operator.backup.binlog_archive import Store
from mysql_operator.backup.binlog_stream import Follower, Server, ToolUnusable
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.pitr import sidecar_launch
from mysql_operator.backup.backup_types import BackupError, BackupRequest, Candidate
from mysql_operator.backup.run import run_backup
from mysql_operator.db import accounts
from mysql_operator.db.instance import Instance
from mysql_operator.manifests import BINLOG_USER
from tests.support import mysql_container
from tests.support.backups import creds, s3cfg
from tests.support.mariadb import BACKUP_USER, OPERATOR_USER
from tests.support.mysql import MySQLFactory, client_tools_sidecar, mysql_unavailable

PASSWORD = "binlog-Pw-" + os.urandom(6).hex()
WRONG_IMAGE = "localhost/mysql-operator-tools:mariadb-11.8"


@pytest.fixture(scope="module")
def server():
    why = mysql_container.rsa_unavailable() or mysql_unavailable()
    if why:
        pytest.skip(reason=f"no MySQL server here: {why}")
    f = MySQLFactory()
    try:
        (s,) = f.create(1, prefix="toolchk")
        s.query("SET GLOBAL super_read_only = 0")
        s.query("SET GLOBAL read_only = 0")
        admin = Instance(s.host, s.port, OPERATOR_USER, s.admin_password, name=s.name)
        admin.ensure_user(BINLOG_USER, "%", PASSWORD, accounts.binlog_grants(admin.dialect.version))
        admin.close()
        yield s
    finally:
        f.close()


def shared_folder(tmp_path):
    shared = tmp_path / "shared"
    (shared / "spool").mkdir(parents=True)
    shared.chmod(0o777)
    return shared


def test_an_archiver_whose_tool_image_has_no_mysqlbinlog_stops_and_reports_why(server, s3server, tmp_path):
    bucket = s3server.create_bucket("bk-toolchk")
    s3 = s3cfg(s3server, bucket)
    shared = shared_folder(tmp_path)
    report = tmp_path / "termination-log"
    argv = [
        *(sys.executable, "-m", "mysql_operator.cli", "backup", "archive-binlogs"),
        *("--cluster", "c1", "--bucket", bucket, "--prefix", s3.prefix or ""),
        *("--endpoint", s3server.endpoint, "--force-path-style"),
        *("--user", BINLOG_USER, "--source", f"{server.name}={server.host}:{server.port}"),
        *("--spool", str(shared / "spool"), "--client-tools-dir", str(shared)),
        *("--tools-image", WRONG_IMAGE, "--termination-log", str(report)),
    ]
    env = {
        **os.environ,
        "MYSQL_OPERATOR_DB_PASSWORD": PASSWORD,
        "AWS_ACCESS_KEY_ID": s3server.access_key,
        "AWS_SECRET_ACCESS_KEY": s3server.secret_key,
    }
    with client_tools_sidecar(shared, "mariadb-tools-11.8"):
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = json.loads(report.read_text())
    assert said["ok"] is False
    assert said["message"] == (
        f"`mysqlbinlog --version` failed (tool image {WRONG_IMAGE}) with exit status 127: client-tools: "
        "mysqlbinlog is not in this image (the servers' tool image: spec.toolsImage, else the operator's "
        "toolsImage)"
    ), said
    client = storage.make_client(s3, creds(s3server))
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0, "nothing is archived, not even a claim"
    for secret in (PASSWORD, s3server.secret_key):
        assert secret not in proc.stdout + proc.stderr + report.read_text()
    print(f"\nthe archiver's report: {said['message']}")


def test_a_backup_whose_tool_image_has_no_mysqldump_fails_before_dumping(server, s3server, tmp_path):
    server.query("CREATE DATABASE IF NOT EXISTS shop")  # something to back up
    bucket = s3server.create_bucket("bk-tooldump")
    s3 = s3cfg(s3server, bucket)
    shared = shared_folder(tmp_path)
    req = BackupRequest(
        cluster="c1",
        namespace="ns",
        backup="b1",
        s3=s3,
        candidates=(Candidate(server.name, Endpoint(server.host, server.port, BACKUP_USER)),),
        tools_dir=str(shared),
    )
    with client_tools_sidecar(shared, "mariadb-tools-11.8"):
        with pytest.raises(BackupError) as failed:
            run_backup(req, creds(s3server), server.admin_password)
    # Debian's MariaDB tools answer to `mysqldump` too: refused as MariaDB's, not run on MySQL's data
    assert str(failed.value).startswith("mysqldump 11.8."), failed.value
    assert " is mariadb's, and the server is mysql 9.7." in str(failed.value), failed.value
    assert "Fix spec.toolsImage: name a tool image of mysql 9.7 or later" in str(failed.value)
    client = storage.make_client(s3, creds(s3server))
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0, "nothing was uploaded"


def test_a_mysqlbinlog_of_an_older_series_is_refused_before_any_stream(server, s3server, tmp_path):
    bucket = s3server.create_bucket("bk-toolold")
    s3 = s3cfg(s3server, bucket)
    shared = shared_folder(tmp_path)
    real = sidecar_launch(str(shared), stdin=False)
    asked = []

    def launch(argv):
        asked.append(argv)
        if argv[1:] == ["--version"]:  # the injected fault: an 8.4 build's answer
            line = "mysqlbinlog  Ver 8.4.3 for Linux on x86_64 (MySQL Community Server - GPL)"
            return subprocess.Popen(["echo", line], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return real(argv)

    follower = Follower(
        (Server(server.name, server.host, server.port),),
        BINLOG_USER,
        PASSWORD,
        shared / "spool",
        Store(storage.make_client(s3, creds(s3server)), s3, "c1"),
        launch=launch,
        options_dir=str(shared),
        tools_image="reg.example/tools:mysql-8.4",
    )
    with client_tools_sidecar(shared):
        with pytest.raises(ToolUnusable) as refused:
            follower.step(0.0)
        follower.close()
    assert str(refused.value).startswith(
        "mysqlbinlog 8.4.3 in the tool image reg.example/tools:mysql-8.4 is older than the server (mysql 9.7."
    ), refused.value
    assert "Fix spec.toolsImage: name a tool image of mysql 9.7 or later" in str(refused.value)
    assert asked == [["mysqlbinlog", "--version"]], "no stream was started"
    assert follower.stream is None and not any((shared / "spool").iterdir())
