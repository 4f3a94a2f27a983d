"""RPO of the binary log archive: the primary killed -9 at a random instant under load.

    .venv/bin/python -m benchmarks.pitr_rpo_bench [--rounds 20] [--max-delay 10]

Three MariaDB servers in semi-sync on loopback run by the operator's replication engine (as the
integration tests do), one writer inserting rows through the primary, a MinIO, and the archiver
that follows the primary (backup/binlog_stream.Follower, stepping every 0.2 s). Each round waits a
random max_delay+2 .. 2*max_delay+4 s (a random instant of steady state), kills the primary with SIGKILL, lets the engine fail over, restarts the old primary
(it rejoins as a replica) and goes on. At each kill it notes:

- lag at the kill: the time from the newest transaction the archive held at that instant to the
  newest acknowledged one (what a loss of the whole cluster at that instant would cost);
- after the failover: whether every acknowledged transaction reached the archive (the new
  primary's binary logs hold what the old one could not upload).

Rows and GTIDs: one writer and nothing else writing, so the n-th transaction after the start is
the n-th acknowledged row (MariaDB sequence numbers of domain 0). Prints p50/p99/max of the lag and
the count of acknowledged rows missing from the archive at the end (decoded with mariadb-binlog).
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from mysql_operator import topology as t
from mysql_operator.backup import pitr, storage
from mysql_operator.backup.binlog_archive import Store
from mysql_operator.backup.binlog_stream import Follower, Server
from mysql_operator.db.gtid import MariaDBGtids
from tests.integration.helpers_replication import make_cluster, writer_for
from tests.support import s3 as s3support
from tests.support.backups import creds, s3cfg
from tests.support.binlogs import archived_ids, stream_launch
from tests.support.mariadb import OPERATOR_USER, MariaDBFactory
from tests.support.wait import wait_for


def top_seq(gtids: MariaDBGtids) -> int:
    return max((n for d, _, n in gtids.entries if d == 0), default=0)


def quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--max-delay", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    work = Path(tempfile.mkdtemp(prefix="rpo-bench-"))
    s3srv = s3support.S3Server(root=work / "s3").start()
    factory = MariaDBFactory(work / "db")
    try:
        c = make_cluster(factory, 3, semisync=True, delay=1.0, prefix="rpo")
        s3 = s3cfg(s3srv, s3srv.create_bucket("rpo"))
        client = storage.make_client(s3, creds(s3srv))
        follower = Follower(
            tuple(Server(s.name, s.host, s.port) for s in c.servers),
            OPERATOR_USER,
            factory.admin_password,
            work / "spool",
            Store(client, s3, "c1"),
            max_delay=a.max_delay,
            launch=stream_launch,
            options_dir=str(work),
        )
        stop = threading.Event()

        def follow() -> None:
            while not stop.is_set():
                follower.step(time.monotonic())
                time.sleep(0.2)

        threading.Thread(target=follow, daemon=True).start()
        seq0 = top_seq(MariaDBGtids.parse(c.primary.query("SELECT @@gtid_binlog_pos")[0][0]))
        writer = writer_for(c)
        started = time.monotonic()
        writer.start()
        lags, rows = [], []
        for r in range(a.rounds):
            # a random instant of steady state: the archive of the previous primary's successor
            # had max_delay to close its first file since the last failover
            time.sleep(rng.uniform(a.max_delay + 2, 2 * a.max_delay + 4))
            old = c.primary
            archived = follower.archiver.archived if follower.archiver else MariaDBGtids.parse("")
            killed = time.monotonic()
            old.kill9()
            acked = list(writer.acked)
            newest_acked = max((x.at for x in acked if x.at <= killed), default=killed)
            n_archived = max(0, top_seq(archived) - seq0)  # transactions of the writer in the archive
            # none of the writer's yet: the archive's newest is from before the writer started
            newest_archived = acked[n_archived - 1].at if n_archived else started
            lag = newest_acked - newest_archived
            lags.append(lag)
            c.converge(until=t.Failover, timeout=60)
            c.converge(timeout=60)
            old.restart()
            c.converge(until=(t.Healthy,), timeout=60)
            rows.append(
                f"round {r + 1:>2}: killed {old.name}, archive {n_archived} of {len(acked)} rows, lag {lag:.2f}s"
            )
            print(rows[-1], file=sys.stderr)
        writer.stop()
        everything = MariaDBGtids.parse(c.primary.query("SELECT @@gtid_binlog_pos")[0][0])
        wait_for(
            lambda: follower.archiver and follower.archiver.archived.contains(everything),
            120,
            "archive caught up",
        )
        stop.set()
        segments = Store(client, s3, "c1").segments()
        chain = pitr.plan(segments, "", 0, pitr.Stop(), MariaDBGtids.parse)
        missing = {x.id for x in writer.acked} - archived_ids(client, s3, chain)
        ok = lags
        print()
        print(f"{a.rounds} kills of the primary under load; archiver max_delay {a.max_delay:g}s, step 0.2s; "
              f"{len(writer.acked)} acknowledged rows; {len(segments)} archived files")  # fmt: skip
        print(f"{'archive lag at the kill (s)':<34}{'p50':>7}{'p99':>7}{'max':>7}")
        print(f"{'':<34}{statistics.median(ok):>7.2f}{quantile(ok, 0.99):>7.2f}{max(ok):>7.2f}")
        print(f"acknowledged rows missing from the archive after the failovers: {len(missing)}")
        follower.close()
    finally:
        factory.close()
        s3srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
