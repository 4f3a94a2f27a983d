"""Replay benchmark (not a test; issue 49, restore speed): the archived binary logs a point-in-time
restore or a drill replays, applied by ours, by the raw tools and by the server's own applier with
one and with several workers, on the same binary logs in one run.

    .venv/bin/python -m benchmarks.replay_bench [--flavor mysql|mariadb] [--mb 256] [--rounds 3]
                                                [--workers 4]

A source server (MySQL 9.7 from its image's root with chroot, as tests/support/mysql.py runs it;
MariaDB: the host's) writes --mb MiB of binary log: small transactions (10 rows of ~200 bytes into
one of 8 tables) from one client, as an application's commits arrive. Each round, in an order that
rotates by one, a new empty server (its GTID history empty) gets every one of those transactions:
- raw: `<binlog tool> FILES | <client>` as the admin account: the tools a user would pipe;
- ours: `pitr.replay_segment` of each file, in order (what `restore.roll_forward` runs after the
  download and decryption it adds): the binlog tool, this process passing its output through
  `pitr.AccountStatements` (no account statement replayed), the client with the options ours uses
  (MySQL's tools run in the client-tools sidecar, chrooted into the tool image, as in the restore
  Job; MariaDB's are the host's);
- applier 1 / applier N: the new server replicates from the source (GTID auto-position) with 1
  and with --workers parallel workers (MySQL `replica_parallel_workers`, MariaDB
  `slave_parallel_threads` in optimistic mode), timed from START to holding every transaction:
  what parallel replay could give if the binary logs were served to the restored server (they are
  not today: see the closing note of issue 49).
After each run the new server's tables are compared with the source's (CHECKSUM TABLE): a
difference stops the benchmark. Printed: median seconds and MiB/s of binary log per row, and the
medians of the per-round time ratios against raw.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.backup_bench import sql
from benchmarks.operator_scale import print_table
from benchmarks.physical_backup_bench import rotated
from benchmarks.restore_bench import checksums
from mysql_operator.backup import commands, pitr
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.pipeline import option_file
from mysql_operator.db.flavor import detect
from tests.support import mariadb as mdb
from tests.support.flavor_servers import writable
from tests.support.mysql import (
    ADMIN_USER,
    MySQLFactory,
    client_tools_sidecar,
    mysql_rootfs,
    mysql_unavailable,
)
from tests.support.wait import wait_for

MIB = 1024 * 1024
TABLES = 8
# the same for the source and every new server: a buffer pool that holds the data (the replay,
# not the disk, is measured)
SIZES = {"innodb_buffer_pool_size": "512M", "max_allowed_packet": "64M"}


def emptied(flavor: str) -> list[str]:
    """A server made writable, with an empty binary log and GTID history."""
    return [*writable(flavor), "RESET BINARY LOGS AND GTIDS" if flavor == "mysql" else "RESET MASTER"]


def write_binlog(source, flavor: str, mb: int) -> list[str]:
    """Transactions on `source` until its binary logs past the schema hold `mb` MiB; their
    file names (the history before the schema reset away: every new server starts empty)."""
    sql(source, *emptied(flavor), "CREATE DATABASE bench")
    sql(
        source,
        *(
            f"CREATE TABLE bench.t{i} (id BIGINT AUTO_INCREMENT PRIMARY KEY, k INT, pad VARCHAR(200))"
            for i in range(TABLES)
        ),
    )
    conn = source.connect(timeout=3600)
    try:
        with conn.cursor() as cur:
            n = 0
            while True:
                for _ in range(200):
                    cur.execute("BEGIN")
                    cur.executemany(
                        f"INSERT INTO bench.t{n % TABLES} (k, pad) VALUES (%s, %s)",
                        [(n * 10 + j, f"{n:012d}-{j}" * 12) for j in range(10)],
                    )
                    cur.execute("COMMIT")
                    n += 1
                cur.execute("SHOW BINARY LOGS" if flavor == "mysql" else "SHOW MASTER LOGS")
                logs = cur.fetchall()
                if sum(int(r[1]) for r in logs) >= mb * MIB:
                    cur.execute("FLUSH BINARY LOGS")
                    return [str(r[0]) for r in logs]
    finally:
        conn.close()


class Replays:
    """The four ways to apply the source's binary logs into a new server."""

    def __init__(self, flavor: str, factory, source, files: list[Path], shared: Path | None, workers: int):
        self.flavor, self.factory, self.source, self.files = flavor, factory, source, files
        self.shared, self.workers = shared, workers
        self.root = mysql_rootfs("mysql-tools") if flavor == "mysql" else None
        self.expected = checksums(source, "bench")
        self.n = 0

    def _new(self):
        self.n += 1
        (t,) = self.factory.create(1, prefix=f"r{self.n}", start=False)
        t.extra.update(SIZES)
        t.start()
        sql(t, *emptied(self.flavor))
        return t

    def _done(self, t, what: str) -> None:
        got = checksums(t, "bench")
        if got != self.expected:
            raise RuntimeError(f"{what}: the tables differ from the source's: {got} != {self.expected}")
        t.stop()
        shutil.rmtree(t.root, ignore_errors=True)

    def _tool(self, argv: list[str]) -> list[str]:
        return ["chroot", str(self.root), *argv] if self.root else argv

    def _client(self, t, options: str) -> list[str]:
        version = detect(*sql(t, "SELECT VERSION(), @@version_comment")[0])
        return commands.client_command(
            version, Endpoint("127.0.0.1", t.port, ADMIN_USER), options, None, binlogged=True
        )

    def raw(self) -> float:
        t = self._new()
        tool = "mysqlbinlog" if self.flavor == "mysql" else "mariadb-binlog"
        with option_file(
            ADMIN_USER, self.factory.admin_password, str(self.shared) if self.shared else None
        ) as o:
            client = self._client(t, o)
            began = time.monotonic()
            dec = subprocess.Popen(self._tool([tool, *map(str, self.files)]), stdout=subprocess.PIPE)
            cli = subprocess.Popen(self._tool(client), stdin=dec.stdout)
            dec.stdout.close()
            rc = (dec.wait(), cli.wait())
            seconds = time.monotonic() - began
        if rc != (0, 0):
            raise RuntimeError(f"raw: exit statuses {rc}")
        self._done(t, "raw")
        return seconds

    def ours(self) -> float:
        t = self._new()
        launch = pitr.sidecar_launch(str(self.shared)) if self.shared else pitr.local_launch
        with option_file(
            ADMIN_USER, self.factory.admin_password, str(self.shared) if self.shared else None
        ) as o:
            client = self._client(t, o)
            began = time.monotonic()
            for f in self.files:
                pitr.replay_segment(
                    _chunks(f), pitr.tool_argv(self.flavor, "", pitr.Stop()), client, launch=launch
                )
            seconds = time.monotonic() - began
        self._done(t, "ours")
        return seconds

    def applier(self, workers: int) -> float:
        t = self._new()
        src, pw = self.source, self.factory.admin_password
        if self.flavor == "mysql":
            setup = [
                f"SET GLOBAL replica_parallel_workers = {workers}",
                f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT={src.port}, "
                f"SOURCE_USER='{ADMIN_USER}', SOURCE_PASSWORD='{pw}', SOURCE_AUTO_POSITION=1, "
                "GET_SOURCE_PUBLIC_KEY=1",
            ]
            start, want = "START REPLICA", "SELECT @@GLOBAL.gtid_executed"
        else:
            setup = [
                f"SET GLOBAL slave_parallel_threads = {workers}",
                "SET GLOBAL slave_parallel_mode = 'optimistic'",
                f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={src.port}, "
                f"MASTER_USER='{ADMIN_USER}', MASTER_PASSWORD='{pw}', MASTER_USE_GTID=slave_pos",
            ]
            start, want = "START SLAVE", "SELECT @@GLOBAL.gtid_binlog_pos"
        sql(t, *setup)
        target = sql(src, want)[0][0]
        began = time.monotonic()
        sql(t, start)
        mine = "SELECT @@GLOBAL.gtid_executed" if self.flavor == "mysql" else "SELECT @@GLOBAL.gtid_slave_pos"
        wait_for(
            lambda: sql(t, mine)[0][0] == target,
            3600,
            "the new server holds every transaction",
            interval=0.05,
        )
        seconds = time.monotonic() - began
        sql(t, "STOP REPLICA" if self.flavor == "mysql" else "STOP SLAVE")
        self._done(t, f"applier {workers}")
        return seconds


def _chunks(path: Path, size: int = 1 << 20):
    with open(path, "rb") as f:
        while chunk := f.read(size):
            yield chunk


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flavor", choices=("mysql", "mariadb"), default="mysql")
    ap.add_argument("--mb", type=int, default=256, help="MiB of binary log to replay")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()
    if args.flavor == "mysql":
        why = mysql_unavailable()
        if why:
            print(f"no MySQL 9.7 server here: {why}")
            return 1
        factory = MySQLFactory()
    else:
        missing = mdb.missing_binaries()
        if missing:
            print(f"MariaDB binaries missing: {', '.join(missing)}")
            return 1
        factory = mdb.MariaDBFactory()
    # the binary logs and the option files, where the sidecar (the tool image's root) sees them too
    shared = Path(tempfile.mkdtemp(prefix="replay-bench-", dir="/var/tmp"))
    try:
        with tools(args.flavor, shared):
            (source,) = factory.create(1, prefix="src", start=False)
            source.extra.update(SIZES)
            source.start()
            names = write_binlog(source, args.flavor, args.mb)
            files = []
            for name in names:
                shutil.copy(source.datadir / name, shared / name)
                files.append(shared / name)
            size = sum(f.stat().st_size for f in files)
            r = Replays(
                args.flavor, factory, source, files, shared if args.flavor == "mysql" else None, args.workers
            )
            runs = {
                "raw": r.raw,
                "ours": r.ours,
                "applier 1": lambda: r.applier(1),
                f"applier {args.workers}": lambda: r.applier(args.workers),
            }
            print(f"{len(files)} binary logs, {size / MIB:.0f} MiB; {args.rounds} rounds", flush=True)
            times = rotated(runs, args.rounds)
    finally:
        factory.close()
        shutil.rmtree(shared, ignore_errors=True)
    rows = [("flavor", args.flavor), ("binary log replayed", f"{size / MIB:.0f} MiB, {len(files)} files")]
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append((f"{name}: seconds (median)", f"{med:.1f} ({' '.join(f'{x:.1f}' for x in ts)})"))
        rows.append((f"{name}: MiB/s", f"{size / MIB / med:.1f}"))
    for name in runs:
        if name != "raw":
            ratios = [o / b for b, o in zip(times["raw"], times[name])]
            rows.append((f"time {name} / raw (median of rounds)", f"{statistics.median(ratios):.2f}"))
    print_table(rows)
    return 0


def tools(flavor: str, shared: Path):
    """MySQL: the client-tools sidecar serving `shared`; MariaDB: nothing (the host's tools)."""
    return client_tools_sidecar(shared) if flavor == "mysql" else contextlib.nullcontext()


if __name__ == "__main__":
    raise SystemExit(main())
