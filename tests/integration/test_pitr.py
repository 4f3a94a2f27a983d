"""Point-in-time recovery on real servers of both flavors (MariaDB; MySQL 9.7 from its image's
root) and a real S3 server (MinIO): rows written continuously, a base backup, more rows, a
destructive statement, more rows; every binary log archived (backup/binlog_archive.py); restored to
a time T and to a GTID, the target holds exactly the rows committed up to that point, nothing after.

MySQL's tools (mysqldump, mysqlbinlog, mysql) are not on the host (its are MariaDB's): as in the
backup and restore Jobs, they run in the client-tools sidecar (`tests/support/mysql.py`), which
reads and writes a shared folder; the option file with the password goes there too."""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from mysql_operator.backup import pitr, storage
from mysql_operator.backup.binlog_archive import Archiver, Store, prune
from mysql_operator.backup.restore_types import Source, Target
from mysql_operator.backup.restore_job import restore_all
from mysql_operator.backup.run import run_backup
from mysql_operator.db.gtid import MariaDBGtids, MySQLGtidSet
from mysql_operator.db.instance import Instance
from tests.support.backups import creds, request_for, s3cfg, sql
from tests.support.binlogs import binlog_dir
from tests.support.flavor_servers import HOST, tls_servers
from tests.support.mariadb import ADMIN_USER, OPERATOR_USER
from tests.support.mysql import MySQLFactory, client_tools_sidecar, mysql_unavailable
from tests.support.mysql_container import rsa_unavailable
from tests.support.pki import new_pki
from tests.support.wait import wait_for


EARLIER_ORIGIN = 4000  # MariaDB: a server id no test server has


@dataclasses.dataclass(frozen=True)
class Flavor:
    name: str  # "mariadb" or "mysql"
    factory: Any
    tools_dir: str | None = None  # the folder the client-tools sidecar serves (MySQL)
    pki: Path | None = None  # MySQL: the restore targets' certificates, as a cluster's (TLS verified)

    def new_target(self, prefix: str):
        """A new server to restore into: MySQL's serves TLS and is reached by its certificate's
        name, as the restore Job reaches an instance (the load account it makes logs in over it)."""
        if self.pki is None:
            return self.factory.create(1, prefix=prefix)[0]
        return tls_servers(self.factory, self.pki, 1, prefix)[0]

    def target(self, server) -> Target:
        """`server` as the restore Job's target, logged in as the test's admin account."""
        password = self.factory.admin_password
        if self.pki is None:
            return Target(server.host, server.port, ADMIN_USER, password, tools_dir=self.tools_dir)
        ca = str(Path(self.tools_dir or "") / "ca.crt")
        return Target(HOST, server.port, ADMIN_USER, password, tls_ca=ca, tools_dir=self.tools_dir)

    @property
    def parse(self) -> Callable[[str], Any]:
        return MySQLGtidSet.parse if self.name == "mysql" else MariaDBGtids.parse

    @property
    def executed_sql(self) -> str:
        """The server's GTID history: what a replay must make equal to the source's."""
        return "SELECT @@gtid_executed" if self.name == "mysql" else "SELECT @@gtid_binlog_pos"

    def executed(self, server):
        return self.parse(str(sql(server, self.executed_sql)[0][0] or "").replace("\n", ""))

    def writable(self, server):
        if self.name == "mysql":
            sql(server, "SET GLOBAL super_read_only=OFF")
        sql(server, "SET GLOBAL read_only=OFF")
        return server

    def launch(self):
        """Where the binlog tool and the client run: MySQL's in the sidecar, MariaDB's here."""
        return pitr.sidecar_launch(self.tools_dir) if self.tools_dir else pitr.local_launch


@pytest.fixture(scope="module", params=["mariadb", "mysql"])
def flavor(request, tmp_path_factory):
    if request.param == "mariadb":
        yield Flavor("mariadb", request.getfixturevalue("factory"))
        return
    why = mysql_unavailable() or rsa_unavailable()
    if why:
        print(f"\nPITR on MySQL skipped: {why}")
        pytest.skip(reason=f"no MySQL 9.7 server: {why}")
    f = MySQLFactory()
    shared = tmp_path_factory.mktemp("pitr-tools")
    pki = new_pki(f.workdir / "pki", [HOST], "pitr-test")
    shutil.copy(pki / "ca.crt", shared / "ca.crt")
    try:
        with client_tools_sidecar(shared):
            yield Flavor("mysql", f, str(shared), pki)
    finally:
        f.close()


def archiver_of(flavor, source, s3, s3server, cluster: str) -> Archiver:
    """The binlog archiver of `source` into <prefix>/<cluster>/binlogs, as the operator runs it."""
    inst = Instance(source.host, source.port, OPERATOR_USER, flavor.factory.admin_password, name=source.name)
    store = Store(storage.make_client(s3, creds(s3server)), s3, cluster)
    logs = Path(source.datadir) if flavor.name == "mariadb" else binlog_dir(source, inst)
    return Archiver(inst, logs, store, max_delay=1.0)


def archive_everything(flavor, source, archiver: Archiver) -> None:
    """Step the archiver until it holds every transaction `source` has executed."""
    everything = flavor.executed(source)
    wait_for(
        lambda: archiver.step(time.monotonic()) and archiver.archived.contains(everything),
        30,
        "every transaction archived",
    )


@pytest.fixture(scope="module")
def history(flavor, s3server):
    """(source, s3, manifest, segments, rows, deleted_at, cut): rows = [(id, gtid, unix second)]
    as committed, the second before the one the table was emptied in by a DELETE, and a second
    after the base backup that no write spans (restore-to-a-time's T, see below)."""
    factory = flavor.factory
    (source,) = factory.create(1, prefix="pitr")
    flavor.writable(source)
    sql(
        source,
        "CREATE USER 'acct'@'%' IDENTIFIED BY 'before'",
        "CREATE DATABASE app",
        "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(32), at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
    )
    bucket = s3server.create_bucket(f"bk-pitr-{flavor.name}")
    s3 = s3cfg(s3server, bucket)
    archiver = archiver_of(flavor, source, s3, s3server, "c1")
    rows: list[tuple[int, str, int]] = []
    stop, delete_now, deleted = threading.Event(), threading.Event(), threading.Event()
    own_origin, new_origin = threading.Event(), threading.Event()
    # T for a restore to a time: the writer held across its end (`Writer.second_without_commits`)
    hold, held, go = threading.Event(), threading.Event(), threading.Event()

    def writer() -> None:
        """The only session that writes from here on, the DELETE included: MySQL has no
        @@last_gtid, and its @@gtid_executed read right after this session's COMMIT is then
        exactly the history up to this transaction (no other transaction can commit in between;
        the archiver's FLUSH BINARY LOGS and the dump add none). That set is this row's GTID stop
        on MySQL (a GTID set there); MariaDB gives the transaction's own GTID (a position)."""
        conn = source.connect(database="app", timeout=30)
        gtid_sql = "SELECT @@gtid_executed" if flavor.name == "mysql" else "SELECT @@last_gtid"
        try:
            with conn.cursor() as cur:
                n = 0
                if flavor.name == "mariadb":
                    # MariaDB: the first rows come from another origin, as on a primary that had
                    # been a replica (after a re-seed, failovers): its files closed before the base
                    # backup name both servers, while the backup records one GTID per domain.
                    # Such a file was replayed from the base's position and mariadb-binlog failed
                    cur.execute("SET SESSION server_id = %s", (EARLIER_ORIGIN,))
                while not stop.is_set():
                    if hold.is_set() and not go.is_set():
                        held.set()
                        go.wait(30)
                    if own_origin.is_set() and flavor.name == "mariadb" and not new_origin.is_set():
                        cur.execute("SET SESSION server_id = %s", (source.server_id,))
                    if new_origin.is_set() and flavor.name == "mariadb":
                        # MariaDB: what a failover does to the binary logs, a new origin (server
                        # id) in the domain; the binary log state then names both, one GTID each
                        cur.execute("SET SESSION server_id = 2")
                    if delete_now.is_set() and not deleted.is_set():
                        # a database the base backup never had: the replay's load account
                        # gets it when the replay reaches its CREATE (load_account.py)
                        cur.execute("CREATE DATABASE late")
                        cur.execute("CREATE TABLE late.t (v INT PRIMARY KEY)")
                        cur.execute("INSERT INTO late.t VALUES (7)")
                        # an account changed on the source: never replayed into a restored cluster
                        cur.execute("ALTER USER 'acct'@'%' IDENTIFIED BY 'after'")
                        cur.execute("DELETE FROM t")  # the destructive statement
                        conn.commit()
                        deleted.set()
                    n += 1
                    cur.execute("INSERT INTO t (id, v) VALUES (%s, %s)", (n, f"row-{n}"))
                    cur.execute(
                        "SELECT UNIX_TIMESTAMP(at) FROM t WHERE id = %s", (n,)
                    )  # before the DELETE can
                    (at,) = cur.fetchone()
                    conn.commit()
                    cur.execute(gtid_sql)
                    rows.append((n, str(cur.fetchone()[0]).replace("\n", ""), int(at)))
                    time.sleep(0.02)
        finally:
            conn.close()

    def archive_for(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            archiver.step(time.monotonic())
            time.sleep(0.2)

    t = threading.Thread(target=writer)
    t.start()
    try:
        archive_for(1.5)
        own_origin.set()
        archive_for(1.5)  # a file with both origins' rows closed before the base
        req = dataclasses.replace(request_for(source, s3, name="base"), tools_dir=flavor.tools_dir)
        m = run_backup(req, creds(s3server), factory.admin_password)
        archive_for(1.5)
        new_origin.set()
        archive_for(0.5)
        hold.set()
        assert held.wait(30), "the writer held"
        cut = int(time.time())
        time.sleep(max(0.0, cut + 1 - time.time()))  # until the wall clock's next second
        go.set()
        archive_for(1)
        deleted_at = int(time.time())
        while int(time.time()) == deleted_at:  # the DELETE in a second of its own... after
            time.sleep(0.05)
        delete_now.set()
        assert deleted.wait(30), "the writer ran the DELETE"
        archive_for(2)
    finally:
        stop.set()
        t.join()
    archive_everything(flavor, source, archiver)
    return source, s3, m, archiver.store.segments(), rows, deleted_at, cut


def restore_to(flavor, s3server, history, stop: pitr.Stop, prefix: str, path: str = "c1/base"):
    """What the restore Job runs (backup.restore_job.restore_all): the base backup loaded, then the
    archived binary logs replayed up to `stop`. Returns the target and the result it reports."""
    _, s3, _, _, _, _, _ = history
    target = flavor.new_target(prefix)
    flavor.writable(target)
    result = restore_all(
        {target.name: flavor.target(target)},
        Source(s3, path, stop=stop),
        creds(s3server),
        None,
    )
    assert result["ok"], result["message"]
    assert result["pointInTime"]["target"] == stop.describe()
    assert result["gtidPosition"] == str(flavor.executed(target)).replace("\n", "")
    return target, result


def ids(server) -> list[int]:
    return [r[0] for r in sql(server, "SELECT id FROM app.t ORDER BY id")]


def test_restore_to_a_time_has_exactly_the_rows_committed_up_to_it(flavor, s3server, history):
    _, _, m, segments, rows, _, t = history
    assert len(segments) >= 3 and len(rows) > 100
    earlier = {r[0] for r in rows if r[2] <= t - 2}  # T is 2 s or more after the base backup
    target, result = restore_to(flavor, s3server, history, pitr.Stop(at=t), "pitr-t")
    expected = [r[0] for r in rows if r[2] <= t]
    assert ids(target) == expected, "exactly the rows committed up to T"
    assert set(expected) > earlier and len(expected) < len(rows)
    replayed = result["pointInTime"]["binlogFilesReplayed"]
    assert replayed, "rows after the base backup came from the archive"
    print(
        f"\n{flavor.name} restored to {pitr.Stop(at=t).describe()}: {len(expected)} of {len(rows)} "
        f"rows, {replayed} segments"
    )


def test_restore_to_a_gtid_has_exactly_the_rows_up_to_it(flavor, s3server, history):
    _, _, _, _, rows, deleted_at, _ = history
    k = max(i for i, r in enumerate(rows) if r[2] < deleted_at) - 5  # before the DELETE
    n, gtid, _ = rows[k]
    target, _ = restore_to(flavor, s3server, history, pitr.Stop(gtid=gtid), "pitr-g")
    assert ids(target) == [r[0] for r in rows[: k + 1]]
    assert flavor.executed(target) == flavor.parse(gtid)
    if flavor.name == "mysql":
        # one GTID, uuid:N (as `SHOW BINLOG EVENTS` shows a transaction): everything up to it
        ((uuid, _), ivs), *_ = flavor.parse(gtid).sets
        single = f"{uuid}:{ivs[-1][1]}"
        target, _ = restore_to(flavor, s3server, history, pitr.Stop(gtid=single), "pitr-g1")
        assert ids(target) == [r[0] for r in rows[: k + 1]], f"restored to {single}"
        assert flavor.executed(target) == flavor.parse(gtid)


def test_restore_to_the_newest_is_the_source_as_it_is(flavor, s3server, history):
    source, _, _, _, rows, _, _ = history
    target, _ = restore_to(flavor, s3server, history, pitr.Stop(), "pitr-n")
    now = ids(source)
    assert ids(target) == now and now[0] > 1 and now[-1] == rows[-1][0]  # the DELETE, then more rows
    assert flavor.executed(target) == flavor.executed(source)
    assert sql(target, "SELECT v FROM late.t") == ((7,),)  # created after the base backup
    # the replay ran as the load account, which is gone after it
    assert not sql(target, "SELECT 1 FROM mysql.user WHERE user = 'mysql-operator-load'")
    # the source's ALTER USER was not replayed (the target, which never had the account, would
    # have failed it): a restored cluster keeps its own accounts
    assert not sql(target, "SELECT 1 FROM mysql.user WHERE user = 'acct'")


def test_a_time_after_the_archive_or_before_the_base_is_refused(flavor, history):
    _, _, m, segments, _, _, _ = history
    newest = max(s.last_event_at for s in segments)
    with pytest.raises(pitr.PitrError, match="holds transactions up to .* is later"):
        pitr.plan(segments, m.gtid_position, newest - 30, pitr.Stop(at=newest + 60), flavor.parse)
    with pytest.raises(pitr.PitrError, match="before the base backup completed"):
        pitr.plan(segments, m.gtid_position, newest, pitr.Stop(at=newest - 60), flavor.parse)


def test_a_restore_the_archive_cannot_reach_is_refused_before_the_target_is_touched(
    flavor, s3server, history
):
    _, s3, _, segments, _, _, _ = history
    target = flavor.new_target("pitr-r")
    newest = max(s.last_event_at for s in segments)
    later = pitr.Stop(at=newest + 3600)
    result = restore_all(
        {target.name: flavor.target(target)},
        Source(s3, "c1/base", stop=later),
        creds(s3server),
        None,
    )
    assert not result["ok"]
    assert result["message"].startswith(f"point-in-time recovery to {later.describe()}: "), result["message"]
    assert "is later: wait until the archive reaches it" in result["message"]
    assert not sql(target, "SHOW DATABASES LIKE 'app'"), "the target was not touched"


def test_from_the_clusters_folder_the_newest_suitable_backup_is_the_base(flavor, s3server, history):
    """spec.restore.s3.path naming <cluster> (not one backup): the restore picks the base itself."""
    _, s3, m, _, rows, _, t = history
    target, result = restore_to(flavor, s3server, history, pitr.Stop(at=t), "pitr-f", path="c1")
    assert result["pointInTime"]["base"].endswith("c1/base")
    assert ids(target) == [r[0] for r in rows if r[2] <= t]
    # before every backup: refused, the target untouched
    result = restore_all(
        {target.name: flavor.target(target)},
        Source(s3, "c1", stop=pitr.Stop(at=100)),
        creds(s3server),
        None,
    )
    assert not result["ok"] and "no complete backup in" in result["message"], result["message"]


def test_a_replayed_routine_of_another_definer_fails_the_restore_naming_it(flavor, s3server):
    """A binary log's CREATE keeps its definer (a replay cannot rewrite it as a dump's is): a
    routine root defined after the base backup would run as root for the application. With the
    application account as the definer (spec.database.user), the restore fails naming it: on
    MariaDB after the replay (the load account's SET USER names anyone), on MySQL at the replay
    (the load account may not name root: SYSTEM_USER, or ALLOW_NONEXISTENT_DEFINER where
    root@localhost is not an account)."""
    factory = flavor.factory
    (source,) = factory.create(1, prefix="pitr-d")
    flavor.writable(source)
    sql(
        source,
        "CREATE USER 'app'@'%' IDENTIFIED BY 'app-Pw-1'",
        "CREATE DATABASE app",
        "CREATE TABLE app.t (v INT)",
    )
    bucket = s3server.create_bucket(f"bk-pitr-definer-{flavor.name}")
    s3 = s3cfg(s3server, bucket)
    archiver = archiver_of(flavor, source, s3, s3server, "c2")
    archiver.step(time.monotonic())
    req = dataclasses.replace(request_for(source, s3, name="base", cluster="c2"), tools_dir=flavor.tools_dir)
    run_backup(req, creds(s3server), factory.admin_password)
    sql(
        source,
        "INSERT INTO app.t VALUES (1)",
        "CREATE DEFINER = 'root'@'localhost' PROCEDURE app.p() SQL SECURITY DEFINER SELECT 1",
        "INSERT INTO app.t VALUES (2)",
    )
    archive_everything(flavor, source, archiver)
    target = flavor.new_target("pitr-d")
    flavor.writable(target)
    result = restore_all(
        {target.name: dataclasses.replace(flavor.target(target), definer="app")},
        Source(s3, "c2/base", stop=pitr.Stop()),
        creds(s3server),
        None,
    )
    assert not result["ok"]
    if flavor.name == "mariadb":
        assert "the archived binary logs define routine app.p (root@localhost)" in result["message"], result
    else:  # root@localhost: SYSTEM_USER where it exists, ALLOW_NONEXISTENT_DEFINER where not
        assert "replaying" in result["message"] and "Access denied" in result["message"], result["message"]
    assert not sql(target, "SELECT 1 FROM mysql.user WHERE user = 'mysql-operator-load'")


def test_archive_retention_deletes_only_files_before_the_backup_and_the_restore_still_works(
    flavor, s3server, history
):
    """Last in the module: it deletes from the archive the other tests read."""
    source, s3, m, segments, _, _, _ = history
    client = storage.make_client(s3, creds(s3server))
    store = Store(client, s3, "c1")
    # a manifest that cannot be read: what its backup needs is not known, so nothing is deleted
    broken = storage.join_key(s3.prefix, "c1", "broken", storage.MANIFEST_NAME)
    storage.put_bytes(client, s3, broken, b"{not json")
    assert prune(store, flavor.parse) == [] and len(store.segments()) == len(segments)
    client.delete_object(Bucket=s3.bucket, Key=broken)
    gone = prune(store, flavor.parse)
    left = store.segments()
    assert {s.key for s in left} == {s.key for s in segments} - {s.key for s in gone}
    keys = set(storage.list_keys(client, s3, store.folder + "/"))
    for s in gone:  # object and index entry both deleted, and only what the backup holds
        assert s.key not in keys and not any(k.endswith(s.name + ".json") for k in keys)
        assert flavor.parse(m.gtid_position).contains(flavor.parse(s.gtids_after))
    print(f"\n{flavor.name}: {len(gone)} of {len(segments)} archived files deleted as held by the backup")
    target, _ = restore_to(flavor, s3server, history, pitr.Stop(), "pitr-p")
    assert ids(target) == ids(source), "the backup and what is left of the archive still reach the newest"


def test_an_archived_binlog_missing_from_the_bucket_fails_the_restore_naming_it_before_the_target_is_touched(
    flavor, s3server, history
):
    """Issue 49: an archived binary log whose object went from the bucket (its index entry kept,
    as a lifecycle rule would leave it) - the restore names the file, before loading anything."""
    _, s3, m, segments, _, _, _ = history
    chain = pitr.plan(segments, m.gtid_position, 0, pitr.Stop(), flavor.parse)
    assert len(chain) > 1, [s.name for s in chain]
    lost = chain[0]
    client = storage.make_client(s3, creds(s3server))
    body = client.get_object(Bucket=s3.bucket, Key=lost.key)["Body"].read()
    client.delete_object(Bucket=s3.bucket, Key=lost.key)
    try:
        target = flavor.new_target("pitr-m")
        result = restore_all(
            {target.name: flavor.target(target)},
            Source(s3, "c1/base", stop=pitr.Stop()),
            creds(s3server),
            None,
        )
    finally:
        client.put_object(Bucket=s3.bucket, Key=lost.key, Body=body)
    assert not result["ok"]
    assert lost.file in result["message"] and "missing" in result["message"], result["message"]
    assert not sql(target, "SHOW DATABASES LIKE 'app'"), "the target was not touched"
