"""Backups and restores of real MySQL 9.7 servers, to and from a real S3 server (MinIO), with the
dump tool and the client of the MySQL image itself - what the backup and restore Jobs do through
their client-tools sidecar (the cluster's server image). The sidecar's script runs here from the
image's root with chroot (`tests/support/mysql.py`), serving a folder shared as the Pod's emptyDir
is; the servers require TLS, verified against the cluster's CA and host name, as in a cluster.

The host's own `mysqldump` is MariaDB's (a symlink to mariadb-dump): the dump's header shows which
tool made it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shutil
import subprocess

import pytest

from mysql_operator import tls
from mysql_operator.backup import user_checks
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.crypto import Key
from mysql_operator.backup.manifest import Manifest
from mysql_operator.backup.physical import METHOD_PHYSICAL
from mysql_operator.backup.pipeline import verified_instance
from mysql_operator.backup.restore import restore_into
from mysql_operator.backup.restore_types import RestoreError, Source, Target
from mysql_operator.backup.restore_job import restore_all
from mysql_operator.backup.backup_types import BackupRequest, Candidate
from mysql_operator.backup.run import run_backup
from mysql_operator.backup.table_check import recorded_tables
from mysql_operator.db.accounts import restore_grants, restore_revokes
from mysql_operator.db.flavor import Flavor
from mysql_operator.db.gtid import MySQLGtidSet
from mysql_operator.db.observation import InstanceError
from tests.support.backups import checksums, creds, s3cfg, sql
from tests.support.flavor_servers import tls_servers
from tests.support.pki import new_pki
from tests.support.mysql import (
    ADMIN_USER,
    BACKUP_USER,
    OPERATOR_USER,
    MySQLFactory,
    client_tools_sidecar,
    mysql_unavailable,
    restarted_when_down,
)
from tests.support.ports import free_port

HOST = "localhost"  # the name the servers' certificate carries (they listen on 127.0.0.1)


def restorer_grants() -> list[str]:
    """The restore account's GRANT and REVOKE statements, as init gives them, for 'restorer'."""
    account = "'restorer'@'%'"
    return [g.grant_sql().replace("%s@%s", account) for g in restore_grants(Flavor.MYSQL)] + [
        g.revoke_sql().replace("%s@%s", account) for g in restore_revokes(Flavor.MYSQL)
    ]


@pytest.fixture(scope="module")
def mysql():
    why = mysql_unavailable()
    if why:
        pytest.skip(reason=f"no MySQL 9.7 server: {why}")
    f = MySQLFactory()
    yield f
    f.close()


@pytest.fixture(scope="module")
def pki(mysql):
    """The servers' certificate (SAN localhost) and its CA, inside the image's root (the servers
    run chrooted there)."""
    return new_pki(mysql.workdir / "pki", [HOST], "backup-test")


@pytest.fixture(scope="module")
def shared(mysql, pki, tmp_path_factory):
    """The folder the Job's container shares with its sidecar (with the cluster's CA in it, as
    the Job mounts it in both), and the sidecar serving it."""
    d = tmp_path_factory.mktemp("client-tools")
    shutil.copy(pki / "ca.crt", d / "ca.crt")
    with client_tools_sidecar(d):
        yield d


def backup_request(
    s3, shared, source, name: str, method: str = "logical", copy_digests: bool = False
) -> BackupRequest:
    """A backup of `source` as the backup Job makes it: over TLS verified with the CA in the
    folder shared with the client-tools sidecar, as the backup account (`copy_digests`: a physical
    one records its tables, as for a cluster with drills)."""
    return BackupRequest(
        cluster="c1",
        namespace="ns",
        backup=name,
        s3=s3,
        tls_ca=str(shared / "ca.crt"),
        tools_dir=str(shared),
        candidates=(Candidate(source.name, Endpoint(HOST, source.port, BACKUP_USER)),),
        method=method,
        copy_digests=copy_digests,
    )


def load(server):
    server.query("SET GLOBAL super_read_only = OFF")
    sql(
        server,
        "CREATE DATABASE app CHARACTER SET utf8mb4",
        "CREATE DATABASE shop",
        "CREATE TABLE app.small (id INT PRIMARY KEY, name VARCHAR(32), note TEXT)",
        "INSERT INTO app.small VALUES (1, 'ünïcode ✓', NULL), (2, 'quote''s', 'a\\nb'), (3, '', 'x')",
        "CREATE TABLE shop.orders (id INT PRIMARY KEY, total DECIMAL(10,2), payload BLOB)",
        "SET SESSION cte_max_recursion_depth = 10000",
        "INSERT INTO shop.orders WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 5000) "
        "SELECT n, n * 1.25, RANDOM_BYTES(512) FROM s",
        "CREATE VIEW shop.expensive AS SELECT id, total FROM shop.orders WHERE total > 100",
        "CREATE PROCEDURE shop.count_orders() SELECT COUNT(*) FROM shop.orders",
        "CREATE TRIGGER shop.no_negative BEFORE INSERT ON shop.orders FOR EACH ROW "
        "SET NEW.total = GREATEST(NEW.total, 0)",
    )


def test_mysql_backup_and_restore_with_the_images_own_tools_over_verified_tls(mysql, pki, shared, s3server):
    source, target = tls_servers(mysql, pki, 2, "bk")
    load(source)
    s3 = s3cfg(s3server, s3server.create_bucket("bk-mysql"))
    ca = str(shared / "ca.crt")
    req = backup_request(s3, shared, source, "b1")

    m = run_backup(req, creds(s3server), mysql.admin_password)

    executed = source.query("SELECT @@gtid_executed")[0][0].replace("\n", "")
    assert m.flavor == "mysql" and m.server_version.startswith("9.7.")
    assert m.databases == ("app", "shop")
    assert MySQLGtidSet.parse(m.gtid_position) == MySQLGtidSet.parse(executed)
    body = s3server.client().get_object(Bucket=s3.bucket, Key=m.data_key)["Body"].read()
    head = subprocess.run(["zstd", "-dc"], input=body, capture_output=True, check=True).stdout[:400].decode()
    assert head.startswith("-- MySQL dump") and "Distrib 9.7." in head, (
        head
    )  # MySQL's mysqldump, not MariaDB's

    # as a new cluster's instance is: fenced (super_read_only), its empty app database, the
    # application account (spec.database.user; here also granted shop, as a MySQLGrant would) and
    # the restore account (which drops itself when done) made at init. The source's routines are
    # root's: the restore gives them the application account as their definer (the restore
    # account may not name root, which holds SYSTEM_USER)
    with target.connect() as conn, conn.cursor() as cur:
        for statement in (
            "SET GLOBAL super_read_only = OFF",
            "SET SESSION sql_log_bin = 0",
            "CREATE DATABASE app",
            "CREATE USER 'shopper'@'%' IDENTIFIED BY 'shopper-Pw-31'",
            "GRANT ALL ON app.* TO 'shopper'@'%'",
            "GRANT ALL ON shop.* TO 'shopper'@'%'",
            f"CREATE USER 'restorer'@'%' IDENTIFIED BY '{mysql.admin_password}'",
            *restorer_grants(),
            "SET GLOBAL super_read_only = ON",
        ):
            cur.execute(statement)
    target_account = Target(
        HOST,
        target.port,
        "restorer",
        mysql.admin_password,
        tls_ca=ca,
        tools_dir=str(shared),
        definer="shopper",
    )
    result = restore_all(
        {"t": target_account},
        Source(s3, "c1/b1"),
        creds(s3server),
        "app",
        drop_account=True,
        check_tables=True,
    )

    assert result["ok"], result["message"]
    # the loaded tables have the rows the backup's dump had (issue 49: dumped again by the
    # sidecar's mysqldump, read through the same digests)
    assert m.tables is not None and {n: t["rows"] for n, t in m.tables.items()} == {
        "app.small": 3,
        "shop.orders": 5000,
    }
    assert result["tablesChecked"] == {"tables": 2, "rows": 5003}
    assert target.query("SELECT @@super_read_only")[0][0] == 1  # fenced again afterwards
    assert target.query("SELECT COUNT(*) FROM mysql.user WHERE user = 'restorer'")[0][0] == 0
    assert checksums(target) == checksums(source)
    assert result["gtidPosition"] == m.gtid_position
    # the dump set GTID_PURGED: the restored server's history is the backup's, so replicas of it
    # and the source agree on what was executed
    assert MySQLGtidSet.parse(
        target.query("SELECT @@gtid_executed")[0][0].replace("\n", "")
    ) == MySQLGtidSet.parse(m.gtid_position)
    assert sql(target, "CALL shop.count_orders()") == ((5000,),)
    assert sql(target, "SELECT COUNT(*) FROM shop.expensive") == sql(
        source, "SELECT COUNT(*) FROM shop.expensive"
    )
    target.query("SET GLOBAL super_read_only = OFF")  # as the operator does for a primary
    sql(target, "INSERT INTO shop.orders VALUES (999999, -5, NULL)")
    assert sql(target, "SELECT total FROM shop.orders WHERE id = 999999")[0][0] == 0


def test_a_mysql_dump_that_reads_a_local_file_fails_the_restore_and_reads_nothing(
    mysql, pki, shared, s3server
):
    """A tenant's dump asking the client to send a file of the Job's Pod: the image's client runs
    with --local-infile=0 and the server refuses LOAD DATA LOCAL during the restore."""
    (target,) = tls_servers(mysql, pki, 1, "hostile")
    s3 = s3cfg(s3server, s3server.create_bucket("bk-mysql-hostile"))
    dump = (
        "CREATE DATABASE loot;\nCREATE TABLE loot.t (line TEXT);\n"
        "LOAD DATA LOCAL INFILE '/etc/hosts' INTO TABLE loot.t;\n"
    ).encode()
    _store_dump(s3server, s3, dump)
    e = _refused_restore(target, mysql, shared, s3server, s3)
    assert "mysql failed loading the backup" in str(e) and "LOAD DATA LOCAL" in str(e)
    assert sql(target, "SELECT COUNT(*) FROM loot.t") == ((0,),)


def _refused_restore(target, mysql, shared, s3server, s3) -> RestoreError:
    """The restore of the stored dump (_store_dump) into `target`, writable, as the restore Job
    runs it: it must fail; its error."""
    target.query("SET GLOBAL super_read_only = OFF")
    target.query("SET GLOBAL read_only = OFF")  # as load_instance leaves it: the dump's account is no SUPER
    with pytest.raises(RestoreError) as e:
        restore_into(
            Target(
                HOST,
                target.port,
                ADMIN_USER,
                mysql.admin_password,
                tls_ca=str(shared / "ca.crt"),
                tools_dir=str(shared),
            ),
            Source(s3, "c1/evil"),
            creds(s3server),
        )
    return e.value


def _store_dump(s3server, s3, dump: bytes) -> None:
    """A backup folder holding `dump`, with a manifest that matches it (as a tenant can write)."""
    import hashlib

    from mysql_operator.backup.manifest import Manifest

    data = subprocess.run(["zstd", "-q", "-c"], input=dump, capture_output=True, check=True).stdout
    key = f"{s3.prefix}/c1/evil/backup.sql.zst"
    s3server.client().put_object(Bucket=s3.bucket, Key=key, Body=data)
    m = Manifest(
        cluster="c1",
        namespace="ns",
        backup="evil",
        flavor="mysql",
        server_version="9.7.4",
        gtid_position=None,
        source_instance="x",
        started_at="2026-01-01T00:00:00Z",
        completed_at="2026-01-01T00:00:01Z",
        data_key=key,
        compression="zstd",
        compressed_size=len(data),
        uncompressed_size=len(dump),
        sha256=hashlib.sha256(data).hexdigest(),
        databases=("loot",),
    )
    s3server.client().put_object(Bucket=s3.bucket, Key=f"{s3.prefix}/c1/evil/manifest.json", Body=m.to_json())


@pytest.fixture(scope="module")
def shared_as_job_user(mysql, pki, tmp_path_factory):
    """As `shared`, writable by the image's mysql user: the throwaway server of a physical backup,
    started by this sidecar as root, runs as that user (as the Jobs' sidecar runs as theirs)."""
    d = tmp_path_factory.mktemp("client-tools-physical")
    shutil.copy(pki / "ca.crt", d / "ca.crt")
    d.chmod(0o777)
    with client_tools_sidecar(d):
        yield d


def test_a_physical_backup_is_a_clone_a_server_starts_on_with_the_same_data_and_gtids(
    mysql, pki, shared_as_job_user, s3server
):
    """method physical: CLONE of the source (over TLS verified with the cluster's CA) into a
    throwaway server of the image, sent as tar through zstd to S3. A server started on the
    unpacked object holds the same rows and exactly the GTIDs the manifest names; the copy's
    files are gone from the shared folder afterwards."""
    from mysql_operator.backup.physical import METHOD_PHYSICAL

    source, target = tls_servers(mysql, pki, 2, "phys")
    load(source)
    s3 = s3cfg(s3server, s3server.create_bucket("bk-mysql-physical"))
    shared = shared_as_job_user
    req = backup_request(s3, shared, source, "p1", METHOD_PHYSICAL)

    m = run_backup(req, creds(s3server), mysql.admin_password)

    executed = source.query("SELECT @@gtid_executed")[0][0].replace("\n", "")
    assert m.method == "physical" and m.data_key.endswith("/backup.tar.zst")
    assert m.tables is None and m.tables_note is None  # not asked to: no dump of the copy
    assert m.databases == ("app", "shop")
    assert MySQLGtidSet.parse(m.gtid_position) == MySQLGtidSet.parse(executed)
    assert sorted(p.name for p in shared.iterdir() if p.name.startswith("clone")) == []

    body = s3server.client().get_object(Bucket=s3.bucket, Key=m.data_key)["Body"].read()
    assert m.compressed_size == len(body)
    target.stop()
    shutil.rmtree(target.datadir)
    target.datadir.mkdir()
    tar = subprocess.run(["zstd", "-dc"], input=body, capture_output=True, check=True).stdout
    assert m.uncompressed_size == len(tar)
    subprocess.run(["tar", "-C", str(target.datadir), "-xf", "-"], input=tar, check=True)
    assert (target.datadir / "mysql.ibd").exists()
    target.start()
    assert checksums(target) == checksums(source)
    assert MySQLGtidSet.parse(
        target.query("SELECT @@gtid_executed")[0][0].replace("\n", "")
    ) == MySQLGtidSet.parse(m.gtid_position)
    assert sql(target, "CALL shop.count_orders()") == ((5000,),)
    # a copy is not loaded into one server: refused, saying so, before anything is touched
    with pytest.raises(RestoreError, match="a physical backup .* restore Job's physical path"):
        restore_into(
            Target(HOST, target.port, ADMIN_USER, mysql.admin_password), Source(s3, "c1/p1"), creds(s3server)
        )


def test_a_physical_copy_verifies_the_donor_with_the_clusters_ca(mysql, pki, shared_as_job_user):
    """A donor whose certificate another CA signed: the clone is refused, the error names the
    clone and never the password, and nothing of the copy is left in the shared folder."""
    from mysql_operator.backup import copy_server, physical

    (source,) = tls_servers(mysql, pki, 1, "physca")
    other = shared_as_job_user / "other-ca.crt"
    other.write_text(tls.new_ca("someone-else", dt.datetime.now(dt.timezone.utc)).cert_pem)
    plugins = copy_server.recipient_plugins(
        [
            r[0]
            for r in source.query(
                "SELECT PLUGIN_LIBRARY FROM information_schema.PLUGINS "
                "WHERE PLUGIN_LIBRARY IS NOT NULL AND PLUGIN_STATUS = 'ACTIVE'"
            )
        ]
    )
    donor = Endpoint(HOST, source.port, BACKUP_USER)

    with pytest.raises(copy_server.PhysicalError) as e:
        with physical.cloned(str(shared_as_job_user), donor, mysql.admin_password, str(other), plugins):
            pass

    assert "CLONE INSTANCE FROM" in str(e.value) and mysql.admin_password not in str(e.value)
    assert sorted(p.name for p in shared_as_job_user.iterdir() if p.name.startswith("clone")) == []
    with physical.cloned(
        str(shared_as_job_user), donor, mysql.admin_password, str(shared_as_job_user / "ca.crt"), plugins
    ) as copy:
        assert (copy.data / "mysql.ibd").exists()


def donor_with_certificate(mysql, pki, shared, certificate_of=None):
    """The restore Job's server of a physical copy: reached at `localhost`, serving a certificate
    for that name (in the folder shared with the sidecar, as the Job's Secret is mounted there) of
    the cluster's CA, or of the CA of `certificate_of` (a folder as new_pki makes); the instances
    verify it with the CA file their own TLS uses (a path inside the image's root)."""
    from mysql_operator.backup.restore_types import Donor

    folder = shared / "donor-tls"
    folder.mkdir(exist_ok=True)
    for f in ("ca.crt", "tls.crt", "tls.key"):
        shutil.copy((certificate_of or pki) / f, folder / f)
        (folder / f).chmod(0o644)  # as a Secret volume's files: the server runs as the image's user
    instance_ca = "/" + str((pki / "ca.crt").relative_to(mysql.rootfs))
    return Donor(HOST, free_port(), tls_dir=str(folder), instance_ca=instance_ca)


def test_a_physical_backup_restores_into_new_instances_that_keep_their_own_accounts(
    mysql, pki, shared_as_job_user, s3server
):
    """restore_all of a physical backup: the copy, unpacked by tar in the sidecar, is served by a
    throwaway server there that each new instance clones in turn (encrypted, the server's
    certificate verified with the cluster's CA for the name it is reached at), then restarts on.
    Each has the source's rows and exactly the manifest's GTIDs; the accounts the new cluster
    made keep its passwords (the operator's new one works, the backup's does not), an account
    only the backup had is there, the restore account is gone, every instance is fenced again,
    and nothing of the copy is left in the shared folder."""
    from mysql_operator.backup.physical import METHOD_PHYSICAL
    from mysql_operator.backup.restore_types import Donor

    source, *targets = tls_servers(mysql, pki, 3, "physr")
    load(source)
    sql(source, "CREATE USER 'reporting'@'%' IDENTIFIED BY 'from-the-backup'")
    # a scheduled job of an application account, ENABLED in the copy (of the primary): the
    # instance that becomes the new primary keeps it so, the other holds it replica-side disabled,
    # as replication makes it. (One of an account holding SYSTEM_USER, root's, keeps its status
    # everywhere: the restore account, which does not hold it, may not name its definer.)
    sql(
        source,
        "CREATE DEFINER = 'reporting'@'%' EVENT shop.tick ON SCHEDULE EVERY 1 HOUR ENABLE DO SET @x = 1",
    )
    s3 = s3cfg(s3server, s3server.create_bucket("bk-mysql-physical-restore"))
    shared = shared_as_job_user
    ca = str(shared / "ca.crt")
    req = backup_request(s3, shared, source, "p2", METHOD_PHYSICAL)
    m = run_backup(req, creds(s3server), mysql.admin_password)
    restore_pw, operator_pw = "the-new-clusters-restore-pw", "the-new-clusters-operator-pw"
    for t in targets:  # as the new cluster's init step leaves them
        sql(
            t,
            "SET GLOBAL super_read_only = OFF",
            "SET SESSION sql_log_bin = 0",
            "CREATE DATABASE app",
            f"ALTER USER '{OPERATOR_USER}'@'127.0.0.1' IDENTIFIED BY '{operator_pw}'",
            f"CREATE USER 'restorer'@'%' IDENTIFIED BY '{restore_pw}'",
            *restorer_grants(),
            # a proxy grant (root@localhost has one by default): only a holder of its grant
            # option may make it, which the copy's unchecked session is not (nor this admin:
            # written into the grant table)
            "CREATE USER 'proxier'@'%' IDENTIFIED BY 'proxier-pw'",
            "INSERT INTO mysql.proxies_priv (Host, User, Proxied_host, Proxied_user, With_grant, Grantor)"
            " VALUES ('%', 'proxier', '%', 'proxied`x', 0, 'admin@127.0.0.1')",
            "FLUSH PRIVILEGES",
            "SET GLOBAL super_read_only = ON",
        )

    with restarted_when_down(targets) as starts:
        result = restore_all(
            {
                t.name: Target(HOST, t.port, "restorer", restore_pw, tls_ca=ca, tools_dir=str(shared))
                for t in targets
            },
            Source(s3, "c1/p2"),
            creds(s3server),
            "app",
            drop_account=True,
            donor=donor_with_certificate(mysql, pki, shared),
            # the user's checks, on the primary restarted on the copy (read-only: they only read)
            checks=user_checks.parse(
                {"orders.sql": "SELECT COUNT(*) FROM shop.orders", "orders.expected": "5000\n"}, "checks"
            ),
        )

    assert result["ok"], result["message"]
    assert result["checksPassed"] == ["orders"], result
    assert starts == {t.name: 1 for t in targets}  # each restarted once, on the copy
    assert result["gtidPosition"] == m.gtid_position
    for t in targets:
        assert checksums(t) == checksums(source)
        assert MySQLGtidSet.parse(
            t.query("SELECT @@gtid_executed")[0][0].replace("\n", "")
        ) == MySQLGtidSet.parse(m.gtid_position)
        assert sql(t, "CALL shop.count_orders()") == ((5000,),)
        assert t.query("SELECT @@super_read_only")[0][0] == 1
        users = {u for (u,) in t.query("SELECT user FROM mysql.user")}
        assert "reporting" in users and "restorer" not in users
        assert t.query(
            "SELECT Host, User, Proxied_host, Proxied_user FROM mysql.proxies_priv WHERE User = 'proxier'"
        ) == [("%", "proxier", "%", "proxied`x")]
        assert t.query("SELECT COUNT(*) FROM mysql.proxies_priv WHERE Host = ''")[0][0] == 0  # no helper left
        assert verified_instance(HOST, t.port, OPERATOR_USER, operator_pw, ca).scalar("SELECT 1") == 1
        with pytest.raises(InstanceError, match="1045"):
            verified_instance(HOST, t.port, OPERATOR_USER, mysql.admin_password, ca).scalar("SELECT 1")
    assert sorted(p.name for p in shared.iterdir() if p.name.startswith("clone")) == []
    assert [t.query("SELECT STATUS FROM information_schema.EVENTS")[0][0] for t in targets] == [
        "ENABLED",
        "REPLICA_SIDE_DISABLED",
    ]

    # again into the same, now restored, instances: refused before anything is replaced
    t = targets[0]
    sql(t, "SET GLOBAL super_read_only = OFF", f"CREATE USER 'restorer'@'%' IDENTIFIED BY '{restore_pw}'")
    sql(t, *restorer_grants())
    sql(t, "SET GLOBAL super_read_only = ON")
    again = restore_all(
        {t.name: Target(HOST, t.port, "restorer", restore_pw, tls_ca=ca, tools_dir=str(shared))},
        Source(s3, "c1/p2"),
        creds(s3server),
        "app",
        drop_account=True,
        donor=Donor("127.0.0.1", free_port()),
    )
    assert not again["ok"] and "already has databases (app, shop)" in again["message"], again
    assert checksums(t) == checksums(source)


def test_a_restore_jobs_server_whose_certificate_another_ca_signed_is_refused_by_the_instances(
    mysql, pki, shared_as_job_user, s3server, tmp_path
):
    """Someone else serving the copy (a certificate the cluster's CA did not sign): every instance
    refuses to clone it, the restore fails saying so (never a password), and the instance keeps
    its data."""
    (source, target) = tls_servers(mysql, pki, 2, "physx")
    load(source)
    s3 = s3cfg(s3server, s3server.create_bucket("bk-mysql-physical-mitm"))
    shared = shared_as_job_user
    ca = str(shared / "ca.crt")
    run_backup(backup_request(s3, shared, source, "p3", "physical"), creds(s3server), mysql.admin_password)
    restore_pw = "the-new-clusters-restore-pw"
    sql(
        target,
        "SET GLOBAL super_read_only = OFF",
        "SET SESSION sql_log_bin = 0",
        f"CREATE USER 'restorer'@'%' IDENTIFIED BY '{restore_pw}'",
        *restorer_grants(),
        "SET GLOBAL super_read_only = ON",
    )
    before = target.query("SELECT @@gtid_executed")
    impostor = new_pki(tmp_path / "impostor", [HOST], "someone-else")

    with restarted_when_down([target]) as starts:
        result = restore_all(
            {
                target.name: Target(
                    HOST, target.port, "restorer", restore_pw, tls_ca=ca, tools_dir=str(shared)
                )
            },
            Source(s3, "c1/p3"),
            creds(s3server),
            None,
            drop_account=True,
            donor=donor_with_certificate(mysql, pki, shared, certificate_of=impostor),
        )

    assert not result["ok"] and "clone" in result["message"].lower(), result
    assert "SSL" in result["message"] or "certificate" in result["message"], result
    assert restore_pw not in result["message"] and mysql.admin_password not in result["message"]
    assert starts == {target.name: 0} and target.query("SELECT @@gtid_executed") == before
    assert sorted(p.name for p in shared.iterdir() if p.name.startswith("clone")) == []


def test_a_shell_escape_in_a_mysql_dump_runs_nothing_and_fails_the_restore(mysql, pki, shared, s3server):
    """A tenant's dump with the client's shell commands (`\\!`, `system`) and `source`: MySQL's
    client runs with --commands=OFF (and --binary-mode), so none runs in the sidecar: the lines go
    to the server, which refuses them as SQL, and the restore fails saying where."""
    (target,) = tls_servers(mysql, pki, 1, "shell")
    s3 = s3cfg(s3server, s3server.create_bucket("bk-mysql-shell"))
    marker = shared / "pwned"
    script = shared / "more.sql"
    script.write_text("CREATE TABLE loot.sourced (v INT);\n")
    dump = (
        f"CREATE DATABASE loot;\n\\! touch {marker}\nsystem touch {marker}\n\\. {script}\n"
        f"source {script}\nCREATE TABLE loot.t (v INT);\n"
    ).encode()
    _store_dump(s3server, s3, dump)
    e = _refused_restore(target, mysql, shared, s3server, s3)
    assert not marker.exists()
    assert "mysql failed loading the backup" in str(e) and "at line 2" in str(e), str(e)
    assert sql(target, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'loot'") == (
        (0,),
    )


def test_mysql_objects_of_root_and_of_the_app_user_restore_with_the_app_user_as_definer(
    mysql, pki, shared, s3server
):
    """test_restore_definers.py on MySQL 9.7 through the image's tools: before, root's routines,
    trigger and event failed the restore with ERROR 1227 (SYSTEM_USER) once tables and views were
    loaded (issue 53)."""
    from tests.support.definers import check_restored, load_source, prepare_target, restore

    source, target = tls_servers(mysql, pki, 2, "defs")
    root = "root@localhost"
    for server in (source, target):  # as in a cluster: root holds every privilege, SYSTEM_USER too
        sql(
            server,
            "SET GLOBAL super_read_only = OFF",
            "SET GLOBAL read_only = OFF",
            "SET SESSION sql_log_bin = 0",
            "CREATE USER root@localhost IDENTIFIED BY 'root-Pw-31f0'",
            "GRANT ALL ON *.* TO root@localhost WITH GRANT OPTION",
        )
    load_source(source, root)
    s3 = s3cfg(s3server, s3server.create_bucket("bk-mysql-definers"))
    run_backup(backup_request(s3, shared, source, "defs"), creds(s3server), mysql.admin_password)
    prepare_target(target, Flavor.MYSQL)

    result = restore(
        s3server, s3, "c1/defs", HOST, target.port, tls_ca=str(shared / "ca.crt"), tools_dir=str(shared)
    )

    assert result["ok"], result["message"]
    assert target.query("SELECT @@super_read_only")[0][0] == 1
    check_restored(source, target, Flavor.MYSQL, root)


# Issue 49, the check a restore drill makes, for a MySQL physical backup: the backup records each
# table's rows from the copy itself (the image's mysqldump dumps the server started on the copy,
# over its socket, through the table digests; the dump goes nowhere else), the same digests as a
# logical backup of the same data records; a physical restore asked to check compares the primary
# restarted on the copy with them, names each table that differs, and reads them from the sealed
# fields of an encrypted backup with its key.

# what the source holds, table by table (named as the digests name them): the rows each must have
PTC_TABLES = {"app.small": 4, "app.no_key": 3, "app.empty": 0, "shop.orders": 3000, "shop.odd`name": 2}
PTC_RESTORE_PW = "the-new-clusters-restore-pw"


def quoted_table(table: str) -> str:
    return ".".join(f"`{part.replace('`', '``')}`" for part in table.split(".", 1))


def load_tables(server) -> None:
    sql(
        server,
        "SET GLOBAL super_read_only = OFF",
        "CREATE DATABASE app CHARACTER SET utf8mb4",
        "CREATE DATABASE shop CHARACTER SET utf8mb4",
        "CREATE TABLE app.small (id INT PRIMARY KEY, name VARCHAR(32), note TEXT, b BLOB)",
        # quotes, a row separator inside a string, a newline, NULL, binary
        "INSERT INTO app.small VALUES (1, 'ünïcode ✓', NULL, NULL), (2, 'quote''s', 'a\\nb', 0x00FF), "
        "(3, '),(', '(x)', ''), (4, '\\\\', ';', 0x27)",
        "CREATE TABLE app.no_key (v INT) ENGINE=InnoDB",  # no primary key
        "INSERT INTO app.no_key VALUES (3), (1), (2)",
        "CREATE TABLE app.empty (id INT PRIMARY KEY)",
        "CREATE TABLE shop.orders (id INT PRIMARY KEY, total DECIMAL(10,2), at DATETIME, f DOUBLE)",
        "SET SESSION cte_max_recursion_depth = 10000",
        "INSERT INTO shop.orders WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s "
        "WHERE n < 3000) SELECT n, n * 1.25, '2025-01-01' + INTERVAL n MINUTE, n / 7 FROM s",
        f"CREATE TABLE {quoted_table('shop.odd`name')} (id INT PRIMARY KEY, v VARCHAR(8))",
        f"INSERT INTO {quoted_table('shop.odd`name')} VALUES (1, 'a'), (2, 'b')",
        "CREATE VIEW shop.expensive AS SELECT * FROM shop.orders WHERE total > 100",
    )


@pytest.fixture(scope="module")
def tc_source(mysql, pki):
    (server,) = tls_servers(mysql, pki, 1, "ptc")
    load_tables(server)
    return server


def new_instance(mysql, pki):
    """One instance of a new cluster as its init step leaves it: the restore account, fenced."""
    (t,) = tls_servers(mysql, pki, 1, "ptr")
    sql(
        t,
        "SET GLOBAL super_read_only = OFF",
        "SET SESSION sql_log_bin = 0",
        f"CREATE USER 'restorer'@'%' IDENTIFIED BY '{PTC_RESTORE_PW}'",
        *restorer_grants(),
        "SET GLOBAL super_read_only = ON",
    )
    return t


def restore_checked(mysql, pki, shared, s3server, s3, folder: str, key: Key | None = None) -> dict:
    """restore_all of the physical backup `folder` into one new instance, tables checked (as a
    drill restores)."""
    t = new_instance(mysql, pki)
    with restarted_when_down([t]):
        return restore_all(
            {
                t.name: Target(
                    HOST,
                    t.port,
                    "restorer",
                    PTC_RESTORE_PW,
                    tls_ca=str(shared / "ca.crt"),
                    tools_dir=str(shared),
                )
            },
            Source(s3, folder, key=key),
            creds(s3server),
            None,
            drop_account=True,
            donor=donor_with_certificate(mysql, pki, shared),
            check_tables=True,
        )


def test_a_physical_backup_records_the_copys_tables_as_a_logical_one_records_the_same_data(
    mysql,
    pki,
    shared_as_job_user,
    s3server,
    tc_source,
):
    """Each table with its rows - the empty one, the one without a primary key, the odd name -
    and the same digests as the logical backup of the same data: what a restore's check dumps
    the restored server with gives them back. Nothing of the copy is left in the folder shared
    with the sidecar."""
    shared = shared_as_job_user
    s3 = s3cfg(s3server, s3server.create_bucket("ptc-record"))
    physical = run_backup(
        backup_request(s3, shared, tc_source, "p1", METHOD_PHYSICAL, copy_digests=True),
        creds(s3server),
        mysql.admin_password,
    )
    logical = run_backup(backup_request(s3, shared, tc_source, "l1"), creds(s3server), mysql.admin_password)

    assert physical.method == "physical" and physical.tables_note is None
    assert {name: t["rows"] for name, t in (physical.tables or {}).items()} == PTC_TABLES
    assert physical.tables == logical.tables
    assert sorted(p.name for p in shared.iterdir() if p.name.startswith("clone")) == []


def test_a_physical_restore_checks_the_tables_and_names_one_that_differs(
    mysql,
    pki,
    shared_as_job_user,
    s3server,
    tc_source,
):
    """The restored primary's tables equal what the backup recorded: tablesChecked, the check's
    time among the phases. Then a backup whose manifest records tables that are not its copy's:
    those of a backup taken before a row of shop.orders was deleted and one of app.small changed
    (its own copy and GTIDs untouched, so only the check can tell) - the restore fails naming
    both tables and nothing else."""
    shared = shared_as_job_user
    s3 = s3cfg(s3server, s3server.create_bucket("ptc-check"))
    before = run_backup(
        backup_request(s3, shared, tc_source, "p1", METHOD_PHYSICAL, copy_digests=True),
        creds(s3server),
        mysql.admin_password,
    )

    result = restore_checked(mysql, pki, shared, s3server, s3, "c1/p1")

    assert result["ok"], result["message"]
    assert result["tablesChecked"] == {"tables": len(PTC_TABLES), "rows": sum(PTC_TABLES.values())}
    assert list(result["phases"]) == ["unpack", "clone", "checkTables"], result["phases"]

    sql(
        tc_source,
        "DELETE FROM shop.orders WHERE id = 1234",
        "UPDATE app.small SET note = 'changed' WHERE id = 3",
    )
    try:
        after = run_backup(
            backup_request(s3, shared, tc_source, "p2", METHOD_PHYSICAL, copy_digests=True),
            creds(s3server),
            mysql.admin_password,
        )
    finally:
        sql(
            tc_source,
            "INSERT INTO shop.orders VALUES (1234, 1234 * 1.25, '2025-01-01' + INTERVAL 1234 MINUTE, 1234 / 7)",
            "UPDATE app.small SET note = '(x)' WHERE id = 3",
        )
    assert after.tables != before.tables
    swapped = dataclasses.replace(after, tables=before.tables)
    key = f"{s3.prefix}/c1/p2/manifest.json"
    s3server.client().put_object(Bucket=s3.bucket, Key=key, Body=swapped.to_json())

    result = restore_checked(mysql, pki, shared, s3server, s3, "c1/p2")

    assert not result["ok"]
    message = result["message"]
    assert "the restored tables differ from those the backup recorded" in message, message
    assert "shop.orders: 2999 rows restored, the backup has 3000" in message, message
    assert "app.small: 4 rows as in the backup, but other values" in message, message
    assert not any(other in message for other in ("app.no_key", "app.empty", "odd`name")), message


def test_an_encrypted_physical_backup_seals_its_tables_and_is_checked_with_its_key(
    mysql,
    pki,
    shared_as_job_user,
    s3server,
    tc_source,
):
    shared = shared_as_job_user
    s3 = s3cfg(s3server, s3server.create_bucket("ptc-sealed"))
    key = Key(os.urandom(32))
    req = dataclasses.replace(
        backup_request(s3, shared, tc_source, "p1", METHOD_PHYSICAL, copy_digests=True), key=key
    )

    m = run_backup(req, creds(s3server), mysql.admin_password)

    stored = (
        s3server.client().get_object(Bucket=s3.bucket, Key=f"{s3.prefix}/c1/p1/manifest.json")["Body"].read()
    )
    assert m.tables is None and m.sealed and b"odd`name" not in stored and b"orders" not in stored
    assert Manifest.from_json(stored).tables is None
    recorded = recorded_tables(m, key)
    assert recorded is not None and {n: t.rows for n, t in recorded.items()} == PTC_TABLES

    result = restore_checked(mysql, pki, shared, s3server, s3, "c1/p1", key=key)

    assert result["ok"], result["message"]
    assert result["tablesChecked"] == {"tables": len(PTC_TABLES), "rows": sum(PTC_TABLES.values())}
