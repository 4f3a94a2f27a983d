"""Backup/restore benchmark: ours vs the raw pipeline, and the backup process's peak RSS at two sizes.

    .venv/bin/python -m benchmarks.backup_bench [--small-mb 250] [--large-mb 1100]

Starts MinIO and MariaDB servers on loopback (tests/support), generates a database, then:
- backup: ours (`run_backup`: dump | zstd -> S3 multipart + sha256) vs `mariadb-dump … | zstd > /dev/null`;
- restore: ours (`restore_into`: verify sha256 by reading the object, then S3 -> zstd -d -> mariadb)
  vs `zstd -d -c local-file | mariadb` (same client options) into a fresh server;
- peak RSS of the backup process (Python, excluding the dump tool and compressor) at two sizes.
Not part of the test suite. Prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import commands, storage
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.pipeline import option_file
from mysql_operator.backup.restore import Source, Target, restore_into
from mysql_operator.db.flavor import Flavor, ServerVersion
from tests.support import s3 as s3support
from tests.support.mariadb import ADMIN_USER, MariaDBFactory

FAST = {"innodb_buffer_pool_size": "1G", "innodb_log_file_size": "512M", "max_allowed_packet": "256M"}

CHILD = r"""
import json, os, resource, sys
from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import storage
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.run import BackupRequest, Candidate, run_backup
a = json.loads(sys.argv[1])
s3 = S3(bucket=a["bucket"], credentials_secret=SecretKeys("x"), prefix="bench", endpoint=a["endpoint"],
        force_path_style=True)
req = BackupRequest(cluster="bench", namespace="bench", backup=a["name"], s3=s3, part_size=a["part"],
                    candidates=(Candidate("src", Endpoint("127.0.0.1", a["port"], a["user"])),))
m = run_backup(req, storage.Credentials(a["ak"], os.environ["SK"]), os.environ["PW"])
print(json.dumps({"rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "children_rss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "compressed": m.compressed_size, "uncompressed": m.uncompressed_size}))
"""


def sql(server, *stmts):
    conn = server.connect(timeout=3600)
    try:
        with conn.cursor() as cur:
            for s in stmts:
                cur.execute(s)
            return cur.fetchall()
    finally:
        conn.close()


def grow_to(server, mb: int) -> int:
    """Add rows to bench.t until the table holds about `mb` MiB of row data. Returns bytes."""
    sql(server, "CREATE DATABASE IF NOT EXISTS bench",
        "CREATE TABLE IF NOT EXISTS bench.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, k INT, "
        "h CHAR(64), txt VARCHAR(600), n DOUBLE) ENGINE=InnoDB")
    def size():
        return int(sql(server, "SELECT COALESCE(SUM(data_length),0) FROM information_schema.tables "
                               "WHERE table_schema='bench'")[0][0])
    while size() < mb * 1024 * 1024:
        # ~ 700 bytes per row, half compressible text, half hashes
        sql(server, "INSERT INTO bench.t (k, h, txt, n) SELECT FLOOR(RAND()*1e6), SHA2(RAND(), 256), "
                    "CONCAT(REPEAT('lorem ipsum dolor ', 12), SHA2(RAND(), 512), SHA2(RAND(), 512), "
                    "SHA2(RAND(), 512)), RAND() FROM mysql.seq_1_to_200000",
            "ANALYZE TABLE bench.t")
    return size()


def backup_ours(server, s3srv, bucket, name, password, part) -> tuple[float, dict]:
    args = {"bucket": bucket, "endpoint": s3srv.endpoint, "name": name, "part": part, "port": server.port,
            "user": ADMIN_USER, "ak": s3srv.access_key}
    env = {**os.environ, "SK": s3srv.secret_key, "PW": password}
    t = time.monotonic()
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], env=env, check=True,
                         capture_output=True, text=True)
    return time.monotonic() - t, json.loads(out.stdout.strip().splitlines()[-1])


VERSION = ServerVersion(Flavor.MARIADB, 10, 11, 0)


def backup_raw(server, password) -> float:
    with option_file(ADMIN_USER, password) as opts:
        argv = commands.dump_command(VERSION, Endpoint("127.0.0.1", server.port, ADMIN_USER), opts, ["bench"])
        comp, _, _ = commands.compressor("zstd")
        t = time.monotonic()
        dump = subprocess.Popen(argv, stdout=subprocess.PIPE)
        z = subprocess.Popen(comp, stdin=dump.stdout, stdout=subprocess.DEVNULL)
        dump.stdout.close()
        assert z.wait() == 0 and dump.wait() == 0
        return time.monotonic() - t


def restore_raw(server, password, local: Path) -> float:
    with option_file(ADMIN_USER, password) as opts:
        argv = commands.client_command(VERSION, Endpoint("127.0.0.1", server.port, ADMIN_USER), opts)
        t = time.monotonic()
        z = subprocess.Popen(["zstd", "-q", "-d", "-c", str(local)], stdout=subprocess.PIPE)
        cli = subprocess.Popen(argv, stdin=z.stdout)
        z.stdout.close()
        assert cli.wait() == 0 and z.wait() == 0
        return time.monotonic() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small-mb", type=int, default=250)
    ap.add_argument("--large-mb", type=int, default=1100)
    ap.add_argument("--part-mib", type=int, default=16)
    ap.add_argument("--backup-only", action="store_true", help="skip the restore comparison")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="backup-bench-"))
    s3srv = s3support.S3Server(root=work / "s3").start()
    factory = MariaDBFactory(work / "db")
    rows = []
    try:
        bucket = s3srv.create_bucket("bench")
        (src,) = factory.create(1, prefix="src", start=False)
        src.extra.update(FAST)
        src.start()
        sql(src, "SET GLOBAL read_only=OFF")
        pw, part = factory.admin_password, a.part_mib * 1024 * 1024
        results = {}
        for label, mb in (("small", a.small_mb), ("large", a.large_mb)):
            t0 = time.monotonic()
            data = grow_to(src, mb)
            print(f"[bench] {label}: {data / 2**20:.0f} MiB of rows in {time.monotonic() - t0:.0f}s", file=sys.stderr)
            raw = backup_raw(src, pw)
            ours, info = backup_ours(src, s3srv, bucket, f"b-{label}", pw, part)
            results[label] = (data, raw, ours, info)
            print(f"[bench] {label}: raw {raw:.1f}s ours {ours:.1f}s {info}", file=sys.stderr)
        data, raw_b, ours_b, info = results["large"]
        if a.backup_only:
            print(f"backup ours {ours_b:.1f}s raw {raw_b:.1f}s ratio {ours_b / raw_b:.2f}")
            for label in ("small", "large"):
                d, _, _, inf = results[label]
                print(f"backup peak RSS {label} ({d / 2**20:.0f} MiB): {inf['rss_kib'] / 1024:.0f}M")
            return 0
        # restore the large backup: ours vs raw, each into a fresh server
        t1, t2 = factory.create(2, prefix="dst", start=False)
        for t in (t1, t2):
            t.extra.update(FAST)
            t.start()
            sql(t, "SET GLOBAL read_only=OFF")
        s3 = S3(bucket=bucket, credentials_secret=SecretKeys("x"), prefix="bench", endpoint=s3srv.endpoint,
                force_path_style=True)
        local = work / "large.sql.zst"
        with open(local, "wb") as f:
            s3srv.client().download_fileobj(bucket, "bench/bench/b-large/backup.sql.zst", f)
        raw_r = restore_raw(t2, pw, local)
        t = time.monotonic()
        restore_into(Target("127.0.0.1", t1.port, ADMIN_USER, pw), Source(s3, "bench/b-large"),
                     storage.Credentials(s3srv.access_key, s3srv.secret_key))
        ours_r = time.monotonic() - t
        same = sql(t1, "CHECKSUM TABLE bench.t") == sql(t2, "CHECKSUM TABLE bench.t") == sql(src, "CHECKSUM TABLE bench.t")

        print()
        print(f"database: {data / 2**20:.0f} MiB of InnoDB row data; dump {info['uncompressed'] / 2**20:.0f} MiB, "
              f"zstd -3 {info['compressed'] / 2**20:.0f} MiB; part size {a.part_mib} MiB; restored tables equal: {same}")
        print(f"{'measure':<34}{'ours':>10}{'raw':>10}{'ratio':>8}")
        print(f"{'backup time (s)':<34}{ours_b:>10.1f}{raw_b:>10.1f}{ours_b / raw_b:>8.2f}")
        print(f"{'restore time (s)':<34}{ours_r:>10.1f}{raw_r:>10.1f}{ours_r / raw_r:>8.2f}")
        for label in ("small", "large"):
            d, _, _, inf = results[label]
            print(f"{'backup peak RSS, ' + label + f' ({d / 2**20:.0f} MiB)':<34}{inf['rss_kib'] / 1024:>9.0f}M"
                  f"{'':>10}   (dump+zstd children peak {inf['children_rss_kib'] / 1024:.0f}M)")
    finally:
        factory.close()
        s3srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
