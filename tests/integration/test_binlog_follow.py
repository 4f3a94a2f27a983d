"""The binary log archiver that follows the primary (backup/binlog_stream.Follower), on a real
3-server MariaDB cluster run by the operator's replication engine and a real S3 server (MinIO):
the primary is killed -9 under acknowledged writes, the engine fails over, the archive goes on from
the new primary without a gap, and every acknowledged write is in an archived binary log."""

from __future__ import annotations

import threading
import time

from mysql_operator import topology as t
from mysql_operator.backup import pitr, storage
from mysql_operator.backup.binlog_stream import Follower, Server
from mysql_operator.backup.binlog_archive import Store
from mysql_operator.db.gtid import MariaDBGtids
from tests.integration.helpers_replication import make_cluster, writer_for
from tests.support.backups import creds, s3cfg
from tests.support.binlogs import archived_ids, stream_launch
from tests.support.mariadb import OPERATOR_USER
from tests.support.wait import wait_for


def test_the_archive_follows_a_failover_and_holds_every_acknowledged_write(factory, s3server, tmp_path):
    c = make_cluster(factory, 3, semisync=True, delay=1.0, prefix="fol")
    s3 = s3cfg(s3server, s3server.create_bucket("bk-follow"))
    client = storage.make_client(s3, creds(s3server))
    follower = Follower(
        tuple(Server(s.name, s.host, s.port) for s in c.servers),
        OPERATOR_USER,
        factory.admin_password,
        tmp_path / "spool",
        Store(client, s3, "c1"),
        max_delay=1.0,
        launch=stream_launch,
        options_dir=str(tmp_path),
    )
    stop = threading.Event()
    errors: list[BaseException] = []
    last: list = []

    def follow() -> None:
        while not stop.is_set():
            try:
                last.append(follower.step(time.monotonic()))
            except BaseException as e:  # noqa: BLE001 - reported by the test
                errors.append(e)
                return
            time.sleep(0.2)

    thread = threading.Thread(target=follow)
    thread.start()
    writer = writer_for(c)
    try:
        writer.start()
        wait_for(lambda: len(writer.acked) >= 50, 20, "50 acknowledged writes")
        old = c.primary
        wait_for(
            lambda: (
                errors or any(seg.server == str(old.server_id) for seg in Store(client, s3, "c1").segments())
            ),
            20,
            f"a binary log of {old.name} archived",
        )
        old.kill9()
        c.converge(until=t.Failover, timeout=30)
        c.converge(timeout=30)
        new = c.primary
        wait_for(
            lambda: sum(1 for _, s, _ in writer.acked if s == new.name) >= 30,
            20,
            "30 writes on the new primary",
        )
        writer.stop()
        everything = MariaDBGtids.parse(new.query("SELECT @@gtid_binlog_pos")[0][0])
        wait_for(
            lambda: errors or (follower.archiver and follower.archiver.archived.contains(everything)),
            30,
            "the archive to hold every transaction of the new primary",
            describe=lambda: (
                "; ".join(follower.events[-6:])
                + f"; spool {sorted(p.name for p in (tmp_path / 'spool').glob('*'))}"
                + f"; archived {follower.archiver and follower.archiver.archived}; server {everything}"
                + f"; {len(last)} steps, last {last[-3:]}"
            ),
        )
    finally:
        writer.stop()
        stop.set()
        thread.join()
        follower.close()
    assert not errors, errors
    print("\n" + "\n".join(follower.events))
    assert any(f"of {old.name} from" in e for e in follower.events)
    assert any(f"of {new.name} from" in e for e in follower.events)

    segments = Store(client, s3, "c1").segments()
    chain = pitr.plan(segments, "", 0, pitr.Stop(), MariaDBGtids.parse)  # no gap, from the first file
    assert {s.server for s in chain} >= {str(new.server_id)}
    acked = {n for n, _, _ in writer.acked}
    missing = acked - archived_ids(client, s3, chain)
    assert not missing, f"acknowledged writes not archived: {sorted(missing)[:10]}"
