"""spec.restore's data path on real MariaDB servers and a real S3 server (MinIO): the same
verified backup is loaded into every new, fenced instance (`restore.restore_all`, what the
restore Job runs); the replication engine then adopts them with the
primary recorded (Promote + ConfigureReplica) and replicas replicate what the primary writes
after the restore. A damaged backup fails the restore for every instance and leaves them fenced."""

from __future__ import annotations


import pytest

from mysql_operator import topology as t
from mysql_operator.backup.restore_types import Source, Target
from mysql_operator.backup.restore_job import restore_all
from mysql_operator.backup.run import run_backup
from mysql_operator.members import ClusterState, Credentials, Member
from mysql_operator.replication import ReplicationEngine
from tests.integration.helpers_replication import REPL, Cluster
from tests.support.backups import checksums, creds, request_for, s3cfg, sql, writable
from tests.support.mariadb import ADMIN_USER
from tests.support.wait import wait_for

APP_DB = "appdb"  # spec.database: the init step creates it empty on every instance


@pytest.fixture(scope="module")
def backup(factory, s3server):
    (src,) = factory.create(1, prefix="rsrc")
    writable(src)
    sql(
        src,
        "CREATE DATABASE shop",
        "CREATE DATABASE appdb",
        "CREATE TABLE shop.orders (id INT PRIMARY KEY, total DECIMAL(10,2)) ENGINE=InnoDB",
        "INSERT INTO shop.orders SELECT seq, seq * 1.25 FROM mysql.seq_1_to_3000",
        "CREATE TABLE appdb.t (id INT PRIMARY KEY, note VARCHAR(40)) ENGINE=InnoDB",
        "INSERT INTO appdb.t VALUES (1, 'before the backup')",
    )
    bucket = s3server.create_bucket("bk-restore-adopt")
    s3 = s3cfg(s3server, bucket)
    m = run_backup(
        request_for(src, s3, name="nightly", cluster="shop"), creds(s3server), factory.admin_password
    )
    return src, s3, m


def new_instances(factory, prefix):
    """Fresh fenced servers as the init step leaves them: replication user, empty app database."""
    servers = factory.create(3, prefix=prefix)
    for k, s in enumerate(servers):
        s.name = f"db-{k}"
        sql(
            s,
            "SET SESSION sql_log_bin = 0",
            f"CREATE USER '{REPL.user}'@'%' IDENTIFIED BY '{REPL.password}'",
            f"GRANT REPLICATION SLAVE ON *.* TO '{REPL.user}'@'%'",
            f"CREATE DATABASE {APP_DB}",
        )
        assert s.query("SELECT @@read_only")[0][0] == 1
    return servers


def run_restore(factory, servers, source, s3server):
    targets = {s.name: Target(s.host, s.port, ADMIN_USER, factory.admin_password) for s in servers}
    result = restore_all(targets, source, creds(s3server), APP_DB)
    return result["ok"], result["message"], result["durationSeconds"]


def test_every_instance_restored_then_adopted_and_replicating(factory, s3server, backup):
    src, s3, m = backup
    servers = new_instances(factory, "radopt")
    ok, message, seconds = run_restore(
        factory, servers, Source(s3, f"s3://{s3.bucket}/{m.data_key.rsplit('/', 1)[0]}"), s3server
    )
    assert ok, message
    print(f"\nrestore of {m.uncompressed_size} bytes into 3 instances: {seconds:.2f}s")
    want = checksums(src)
    for s in servers:
        assert checksums(s) == want, s.name
        assert s.query("SELECT @@read_only")[0][0] == 1  # fenced again until the engine promotes
        assert s.query("SELECT @@gtid_binlog_pos")[0][0] == m.gtid_position

    members = [Member(s.name, k, s.host, s.port) for k, s in enumerate(servers)]
    engine = ReplicationEngine(
        members,
        Credentials(ADMIN_USER, factory.admin_password),
        REPL,
        t.Settings(instances=3),
        apply_timeout=20,
    )
    c = Cluster(servers, engine, ClusterState("db-0"))  # restore_gate records the primary on success
    try:
        c.converge(timeout=60)
        assert isinstance(c.decisions[0], t.Promote), c.decisions
        assert not any(
            isinstance(d, (t.NeedsSeed, t.Errant, t.Unrecoverable, t.Bootstrap)) for d in c.decisions
        )
        sql(
            servers[0],
            "INSERT INTO appdb.t VALUES (2, 'after the restore')",
            "UPDATE shop.orders SET total = total + 1 WHERE id <= 10",
        )
        for s in servers[1:]:
            wait_for(
                lambda s=s: s.query("SELECT COUNT(*) FROM appdb.t")[0][0] == 2,
                20,
                f"row replicated to {s.name}",
            )
        after = checksums(servers[0])
        assert after != want
        for s in servers[1:]:
            assert checksums(s) == after, s.name
    finally:
        engine.close()


def test_a_damaged_backup_fails_for_every_instance_and_leaves_them_fenced_and_empty(
    factory, s3server, backup
):
    src, s3, m = backup
    bad = s3server.client()
    body = bad.get_object(Bucket=s3.bucket, Key=m.data_key)["Body"].read()
    folder = m.data_key.rsplit("/", 1)[0]
    copy = folder + "-damaged"
    bad.put_object(
        Bucket=s3.bucket, Key=m.data_key.replace(folder, copy), Body=body[:-1] + bytes([body[-1] ^ 1])
    )
    manifest = bad.get_object(Bucket=s3.bucket, Key=f"{folder}/manifest.json")["Body"].read()
    bad.put_object(
        Bucket=s3.bucket, Key=f"{copy}/manifest.json", Body=manifest.replace(folder.encode(), copy.encode())
    )
    servers = new_instances(factory, "rbad")
    ok, message, _ = run_restore(factory, servers, Source(s3, f"s3://{s3.bucket}/{copy}"), s3server)
    assert not ok
    for s in servers:
        assert s.name in message
        assert s.query("SELECT @@read_only")[0][0] == 1
        assert [r[0] for r in s.query("SHOW DATABASES") if r[0] in ("shop",)] == []
    assert "sha256" in message or "bytes" in message
    assert factory.admin_password not in message
