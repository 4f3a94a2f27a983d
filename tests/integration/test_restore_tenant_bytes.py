"""A backup is a tenant's bytes: a hostile dump restored through the restore Job's own command
(`mysql-operator backup restore-into`, run as a subprocess exactly as the Job runs it) never makes
the client read a local file or run a shell command, and fails with a message that says why.

Real MariaDB servers on loopback, a real S3 server (MinIO), the real `mariadb` client."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mysql_operator.manifests.tenant_jobs import ENV_ACCESS_KEY, ENV_DB_PASSWORD, ENV_SECRET_KEY
from tests.support.backups import hostile_backup, s3cfg, sql
from tests.support.mariadb import ADMIN_USER

CANARY = "canary-token-3f9a1c"  # stands in for a ServiceAccount token the client could read


def restore_job_command(factory, s3server, s3, servers, folder, tmp_path):
    """What the restore Job runs, with only the secrets the Job gets (no kubeconfig, no token)."""
    log = tmp_path / "termination-log"
    argv = [
        sys.executable,
        "-m",
        "mysql_operator.cli",
        "backup",
        "restore-into",
        "--bucket",
        s3.bucket,
        "--prefix",
        s3.prefix,
        "--endpoint",
        s3.endpoint,
        "--force-path-style",
        "--path",
        folder,
        "--user",
        ADMIN_USER,
        "--termination-log",
        str(log),
    ]
    for s in servers:
        argv += ["--target", f"{s.name}={s.host}:{s.port}"]
    env = {
        "PATH": os.environ["PATH"],
        ENV_DB_PASSWORD: factory.admin_password,
        ENV_ACCESS_KEY: s3server.access_key,
        ENV_SECRET_KEY: s3server.secret_key,
    }
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, json.loads(log.read_text())


@pytest.fixture
def canary(tmp_path):
    path = tmp_path / "token"
    path.write_text(CANARY)
    path.chmod(0o644)
    return path


def new_server(factory, prefix):
    (s,) = factory.create(1, prefix=prefix)
    s.name = f"{prefix}-0"
    sql(s, "SET GLOBAL local_infile = 1")  # the server would allow it: the restore must turn it off
    return s


def test_the_attack_is_real_without_the_guards(factory, canary):
    """Control: the same statements, fed to a client that allows LOCAL INFILE, do read the file."""
    s = new_server(factory, "lctl")
    sql(s, "SET GLOBAL read_only = OFF")
    stmts = (
        f"CREATE DATABASE loot; CREATE TABLE loot.t (v TEXT);"
        f"LOAD DATA LOCAL INFILE '{canary}' INTO TABLE loot.t;"
    )
    subprocess.run(
        [
            "mariadb",
            f"--host={s.host}",
            f"--port={s.port}",
            "--protocol=TCP",
            f"--user={ADMIN_USER}",
            f"--password={factory.admin_password}",
            "--local-infile=1",
        ],
        input=stmts.encode(),
        check=True,
    )
    assert s.query("SELECT v FROM loot.t")[0][0] == CANARY


@pytest.mark.parametrize(
    "path_of",
    [
        pytest.param(lambda canary: str(canary), id="a-token-file"),
        pytest.param(lambda canary: "/proc/self/environ", id="proc-self-environ"),
    ],
)
def test_load_data_local_infile_in_a_dump_reads_nothing_and_fails_clearly(
    factory, s3server, canary, tmp_path, path_of
):
    bucket = s3server.create_bucket(f"bk-hostile-{'env' if 'environ' in path_of(canary) else 'tok'}")
    s3 = s3cfg(s3server, bucket)
    folder = hostile_backup(
        s3server,
        bucket,
        "evil",
        (
            "CREATE DATABASE loot;\nCREATE TABLE loot.t (v LONGTEXT);\n"
            f"LOAD DATA LOCAL INFILE '{path_of(canary)}' INTO TABLE loot.t;\n"
        ),
    )
    servers = [new_server(factory, f"lhost{n}") for n in range(2)]
    rc, result = restore_job_command(factory, s3server, s3, servers, folder, tmp_path)
    assert rc == 1 and result["ok"] is False
    assert "LOAD DATA LOCAL INFILE" in result["message"] and "never allow" in result["message"]
    for s in servers:
        assert s.name in result["message"]
        rows = s.query(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='loot' AND table_name='t'"
        )
        if rows[0][0]:
            assert s.query("SELECT COUNT(*) FROM loot.t")[0][0] == 0  # nothing was read into it
        assert s.query("SELECT @@local_infile")[0][0] == 0  # the server refuses it too
        assert s.query("SELECT @@read_only")[0][0] == 1  # fenced again after the failure
    assert factory.admin_password not in json.dumps(result) and s3server.secret_key not in json.dumps(result)


def test_a_shell_escape_in_a_dump_runs_nothing(factory, s3server, tmp_path):
    bucket = s3server.create_bucket("bk-hostile-shell")
    s3 = s3cfg(s3server, bucket)
    marker = tmp_path / "pwned"
    folder = hostile_backup(
        s3server,
        bucket,
        "shell",
        (f"CREATE DATABASE loot;\n\\! touch {marker}\nsystem touch {marker}\nCREATE TABLE loot.t (v INT);\n"),
    )
    servers = [new_server(factory, "lshell")]
    rc, result = restore_job_command(factory, s3server, s3, servers, folder, tmp_path)
    assert not marker.exists()
    assert rc == 1 and result["ok"] is False and "lshell-0" in result["message"]


def test_the_delete_job_command_deletes_one_backup_folder_only(s3server, tmp_path):
    from tests.support.backups import s3cfg as cfg

    bucket = s3server.create_bucket("bk-delete-data")
    s3 = cfg(s3server, bucket)
    keep = hostile_backup(s3server, bucket, "keep", "SELECT 1;\n")
    gone = hostile_backup(s3server, bucket, "gone", "SELECT 1;\n")
    log = tmp_path / "termination-log"
    env = {
        "PATH": os.environ["PATH"],
        ENV_ACCESS_KEY: s3server.access_key,
        ENV_SECRET_KEY: s3server.secret_key,
    }
    argv = [
        sys.executable,
        "-m",
        "mysql_operator.cli",
        "backup",
        "delete-data",
        "--bucket",
        bucket,
        "--endpoint",
        s3.endpoint,
        "--force-path-style",
        "--folder",
        f"backups/{gone}",
        "--termination-log",
        str(log),
    ]
    assert subprocess.run(argv, env=env, capture_output=True, timeout=120).returncode == 0
    assert json.loads(log.read_text())["deleted"] == 2
    keys = [o["Key"] for o in s3server.client().list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert sorted(keys) == [f"backups/{keep}/backup.sql.zst", f"backups/{keep}/manifest.json"]
    argv[argv.index("--folder") + 1] = "/"
    assert subprocess.run(argv, env=env, capture_output=True, timeout=120).returncode == 1
    assert "refusing to delete a whole bucket" in json.loads(log.read_text())["message"]


def test_the_evidence_job_command_copies_a_mounted_record_to_the_bucket(s3server, tmp_path):
    """What a re-seed's export Job runs: the keys of the mounted evidence ConfigMap (not the
    kubelet's ..data entries) go to <prefix>/evidence/<name>/ in the backup bucket."""
    bucket = s3server.create_bucket("bk-evidence")
    source = tmp_path / "evidence"
    (source / "..2026_11_26_00_00_00.1").mkdir(parents=True)
    for key, text in (
        ("instance", "db-2"),
        ("gtids", "0-3-207"),
        ("events", "binlog.000002:4 Gtid BEGIN GTID 0-3-207"),
    ):
        (source / "..2026_11_26_00_00_00.1" / key).write_text(text)
        (source / key).symlink_to(f"..data/{key}")
    (source / "..data").symlink_to("..2026_11_26_00_00_00.1")
    log = tmp_path / "termination-log"
    env = {
        "PATH": os.environ["PATH"],
        ENV_ACCESS_KEY: s3server.access_key,
        ENV_SECRET_KEY: s3server.secret_key,
    }
    argv = [
        sys.executable,
        "-m",
        "mysql_operator.cli",
        "backup",
        "keep-evidence",
        "--bucket",
        bucket,
        "--prefix",
        "backups",
        "--endpoint",
        s3server.endpoint,
        "--force-path-style",
        "--source",
        str(source),
        "--name",
        "db-errant-2-20261126000000",
        "--termination-log",
        str(log),
    ]
    r = subprocess.run(argv, env=env, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "kept 3 files" in json.loads(log.read_text())["message"]
    c = s3server.client()
    folder = "backups/evidence/db-errant-2-20261126000000"
    keys = sorted(o["Key"] for o in c.list_objects_v2(Bucket=bucket).get("Contents", []))
    assert keys == [f"{folder}/events", f"{folder}/gtids", f"{folder}/instance"]
    assert c.get_object(Bucket=bucket, Key=f"{folder}/gtids")["Body"].read() == b"0-3-207"
    assert s3server.secret_key.encode() not in r.stdout + r.stderr
