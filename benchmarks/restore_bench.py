"""Logical restore throughput (not a test; issue 49): ours in one session, ours in pieces
(backup/restore_pieces.py, several sessions at once), and the raw tools, on the same backup.

    .venv/bin/python -m benchmarks.restore_bench [--gib 1 5] [--tables 8] [--rounds 3] [--workers 4]

MinIO and MariaDB servers on loopback (tests/support). For each size: a database of --tables
tables of about equal size (rows of ~700 bytes, half compressible), one backup (`run_backup`:
mariadb-dump | zstd -> S3), its object downloaded once for the raw run. Each round, in an order
that rotates, into a fresh server with the same settings (killed once checked, so that its
background flushing does not slow the next run), after a sync:
- raw: `zstd -d -c file | mariadb` (the client options ours uses), from the local file;
- one session: `restore_into` as the restore Job runs it with --load-workers 1 (S3 -> verify the
  sha256 -> S3 again -> zstd -d -> DumpFilter -> mariadb);
- pieces: the same with --load-workers N (the dump cut into pieces, spooled, loaded at once).
Every restored server's tables are compared with the source's (CHECKSUM TABLE).
Printed: median seconds and MiB/s of the dump (uncompressed) per size and way, the ratios of
throughput to raw (median of the per-round ratios). The machine is shared and noisy: read the
ratios, measured in one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.backup_bench import FAST, restore_raw, sql
from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import storage
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.restore import restore_into
from mysql_operator.backup.restore_types import Source, Target
from mysql_operator.backup.backup_types import BackupRequest, Candidate
from mysql_operator.backup.run import run_backup
from tests.support import s3 as s3support
from tests.support.mariadb import ADMIN_USER, MariaDBFactory

ROW = (
    "SELECT FLOOR(RAND()*1e6), SHA2(RAND(), 256), CONCAT(REPEAT('lorem ipsum dolor ', 12), "
    "SHA2(RAND(), 512), SHA2(RAND(), 512), SHA2(RAND(), 512)), RAND() FROM mysql.seq_1_to_{n}"
)


def fresh(factory: MariaDBFactory, prefix: str):
    (t,) = factory.create(1, prefix=prefix, start=False)
    t.extra.update(FAST)
    t.start()
    sql(t, "SET GLOBAL read_only=OFF")
    return t


def fill(server, database: str, tables: int, gib: float) -> None:
    """`tables` tables of about gib/tables GiB each (~700 bytes a row)."""
    rows = int(gib * 2**30 / 700 / tables)
    sql(server, f"CREATE DATABASE {database}")
    for i in range(tables):
        sql(
            server,
            f"CREATE TABLE {database}.t{i} (id BIGINT AUTO_INCREMENT PRIMARY KEY, k INT, h CHAR(64), "
            "txt VARCHAR(600), n DOUBLE) ENGINE=InnoDB",
        )
        left = rows
        while left > 0:
            n = min(left, 200_000)
            sql(server, f"INSERT INTO {database}.t{i} (k, h, txt, n) " + ROW.format(n=n))
            left -= n


def checksums(server, database: str) -> list:
    tables = [r[0] for r in sql(server, f"SHOW TABLES FROM {database}")]
    return [sql(server, f"CHECKSUM TABLE {database}.{t}")[0] for t in sorted(tables)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, nargs="+", default=[1.0])
    ap.add_argument("--tables", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="restore-bench-", dir="/var/tmp"))
    s3srv = s3support.S3Server(root=work / "s3").start()
    factory = MariaDBFactory(work / "db")
    spool = work / "spool"
    spool.mkdir()
    rows_out = []
    try:
        bucket = s3srv.create_bucket("bench")
        s3 = S3(
            bucket=bucket,
            credentials_secret=SecretKeys("x"),
            prefix="bench",
            endpoint=s3srv.endpoint,
            force_path_style=True,
        )
        creds = storage.Credentials(s3srv.access_key, s3srv.secret_key)
        pw = factory.admin_password
        src = fresh(factory, "src")
        for gib in a.gib:
            database = f"d{str(gib).replace('.', '_')}"
            t0 = time.monotonic()
            fill(src, database, a.tables, gib)
            print(f"[bench] {gib} GiB in {a.tables} tables: {time.monotonic() - t0:.0f}s", file=sys.stderr)
            name = f"b-{database}"
            m = run_backup(
                BackupRequest(
                    cluster="bench",
                    namespace="bench",
                    backup=name,
                    s3=s3,
                    candidates=(Candidate("src", Endpoint("127.0.0.1", src.port, ADMIN_USER)),),
                ),
                creds,
                pw,
            )
            local = work / f"{name}.sql.zst"
            with open(local, "wb") as f:
                s3srv.client().download_fileobj(bucket, m.data_key, f)
            expected = checksums(src, database)
            runs = {"raw": [], "one session": [], f"pieces ({a.workers})": []}
            same = True
            count = [0]

            def measured(load) -> float:
                nonlocal same
                count[0] += 1
                target = fresh(factory, f"r{count[0]}")
                os.sync()
                t = time.monotonic()
                load(target)
                took = time.monotonic() - t
                same = same and checksums(target, database) == expected
                target.kill9()
                shutil.rmtree(target.root, ignore_errors=True)
                return took

            def ours(workers: int):
                def load(target):
                    restore_into(
                        Target(
                            "127.0.0.1", target.port, ADMIN_USER, pw, load_workers=workers, spool=str(spool)
                        ),
                        Source(s3, f"bench/{name}"),
                        creds,
                    )

                return load

            ways = {
                "raw": lambda t: restore_raw(t, pw, local),
                "one session": ours(1),
                f"pieces ({a.workers})": ours(a.workers),
            }
            names = list(ways)
            for r in range(a.rounds):
                for way in names[r % 3 :] + names[: r % 3]:
                    runs[way].append(measured(ways[way]))
                    print(f"[bench] {gib} GiB {way}: {runs[way][-1]:.1f}s", file=sys.stderr)
            rows_out.append((gib, m.uncompressed_size, m.compressed_size, runs, same))
            sql(src, f"DROP DATABASE {database}")  # the next size's backup holds its own only
            local.unlink()
    finally:
        factory.close()
        s3srv.stop()
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(
        f"{a.tables} tables per database; {a.rounds} rounds per size, order rotating; MariaDB, loopback MinIO"
    )
    print(
        f"{'size':>6} {'dump MiB':>9} {'way':<14}{'median s':>9}{'MiB/s':>8}{'vs raw':>8}   per-round ratios"
    )
    for gib, size, _compressed, runs, same in rows_out:
        raw = runs["raw"]
        for way, times in runs.items():
            ratios = [r / t for r, t in zip(raw, times)]  # throughput ratio: raw time / this time
            print(
                f"{gib:>5}G {size / 2**20:>9.0f} {way:<14}{statistics.median(times):>9.1f}"
                f"{size / 2**20 / statistics.median(times):>8.1f}{statistics.median(ratios):>8.2f}   "
                + " ".join(f"{x:.2f}" for x in ratios)
            )
        print(f"{'':>16}restored tables equal to the source's: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
