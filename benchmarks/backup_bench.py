"""Backup/restore benchmark: ours vs the raw pipeline, and the backup process's peak RSS at two sizes.

    .venv/bin/python -m benchmarks.backup_bench [--small-mb 250] [--large-mb 1100] [--pairs 3]

Starts MinIO and MariaDB servers on loopback (tests/support), generates a database, then:
- backup: ours (`run_backup` in a new Python process: dump | zstd -> S3 multipart + sha256, manifest)
  vs `mariadb-dump … | zstd > /dev/null` with the same dump and compressor options;
- restore: ours (`restore_into`: verify the sha256, then S3 -> zstd -d -> mariadb) vs
  `zstd -d -c local-file | mariadb` (same client options), each into a fresh server with the same
  settings;
- peak RSS of the backup process (Python, excluding the dump tool and compressor) at two sizes.
The machine is shared and noisy: ours and raw run in pairs, alternating which goes first, after a
sync (no write-back of the previous run competing); a restored server is killed once checked, so
its background flushing does not either. Each pair gives a ratio; the table shows their median.
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import commands, storage
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.pipeline import option_file
from mysql_operator.backup.restore import restore_into
from mysql_operator.backup.restore_types import Source, Target
from mysql_operator.db.flavor import Flavor, ServerVersion
from tests.support import s3 as s3support
from tests.support.mariadb import ADMIN_USER, MariaDBFactory

FAST = {"innodb_buffer_pool_size": "1G", "innodb_log_file_size": "512M", "max_allowed_packet": "256M"}

CHILD = r"""
import json, os, resource, sys, time
from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import storage
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.crypto import Key
from mysql_operator.backup.backup_types import BackupRequest, Candidate
from mysql_operator.backup.run import run_backup
a = json.loads(sys.argv[1])
s3 = S3(bucket=a["bucket"], credentials_secret=SecretKeys("x"), prefix="bench", endpoint=a["endpoint"],
        force_path_style=True)
req = BackupRequest(cluster="bench", namespace="bench", backup=a["name"], s3=s3, part_size=a["part"],
                    candidates=(Candidate("src", Endpoint("127.0.0.1", a["port"], a["user"])),),
                    key=Key(bytes.fromhex(os.environ["KEY"])) if os.environ.get("KEY") else None)
t = time.monotonic()
m = run_backup(req, storage.Credentials(a["ak"], os.environ["SK"]), os.environ["PW"])
print(json.dumps({"inside_s": time.monotonic() - t, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
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
    sql(
        server,
        "CREATE DATABASE IF NOT EXISTS bench",
        "CREATE TABLE IF NOT EXISTS bench.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, k INT, "
        "h CHAR(64), txt VARCHAR(600), n DOUBLE) ENGINE=InnoDB",
    )

    def size():
        return int(
            sql(
                server,
                "SELECT COALESCE(SUM(data_length),0) FROM information_schema.tables "
                "WHERE table_schema='bench'",
            )[0][0]
        )

    while size() < mb * 1024 * 1024:
        # ~ 700 bytes per row, half compressible text, half hashes
        sql(
            server,
            "INSERT INTO bench.t (k, h, txt, n) SELECT FLOOR(RAND()*1e6), SHA2(RAND(), 256), "
            "CONCAT(REPEAT('lorem ipsum dolor ', 12), SHA2(RAND(), 512), SHA2(RAND(), 512), "
            "SHA2(RAND(), 512)), RAND() FROM mysql.seq_1_to_200000",
            "ANALYZE TABLE bench.t",
        )
    return size()


def backup_ours(server, s3srv, bucket, name, password, part, key_hex: str = "") -> tuple[float, dict]:
    """run_backup in a new Python process; with `key_hex`, encrypted with that key."""
    args = {
        "bucket": bucket,
        "endpoint": s3srv.endpoint,
        "name": name,
        "part": part,
        "port": server.port,
        "user": ADMIN_USER,
        "ak": s3srv.access_key,
    }
    env = {**os.environ, "SK": s3srv.secret_key, "PW": password, "KEY": key_hex}
    t = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)], env=env, check=True, capture_output=True, text=True
    )
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


def piped(local: Path, argv: list[str]) -> float:
    """Seconds of `zstd -d -c local | argv` (the decompressor's options ours uses); raises if
    either fails."""
    _, decompress, _ = commands.compressor("zstd")
    t = time.monotonic()
    z = subprocess.Popen([*decompress, str(local)], stdout=subprocess.PIPE)
    cli = subprocess.Popen(argv, stdin=z.stdout)
    z.stdout.close()
    rc = (cli.wait(), z.wait())
    if rc != (0, 0):
        raise RuntimeError(f"zstd -d | {argv[0]}: exit statuses {rc[1]}, {rc[0]}")
    return time.monotonic() - t


def restore_raw(
    server, password, local: Path, version=VERSION, host="127.0.0.1", tls_ca=None, root=None, folder=None
) -> float:
    """`zstd -d -c local | <the client>` into `server` as the admin account, with the client options
    ours uses for `version` (to `host`, over TLS verified with `tls_ca` when given); `root`: the
    client of that image root, run with chroot, its option file in `folder` (a folder at the same
    path inside the root)."""
    with option_file(ADMIN_USER, password, folder) as opts:
        argv = commands.client_command(version, Endpoint(host, server.port, ADMIN_USER), opts, tls_ca)
        return piped(local, ["chroot", str(root), *argv] if root else argv)


def fresh_server(factory, prefix):
    (t,) = factory.create(1, prefix=prefix, start=False)
    t.extra.update(FAST)
    t.start()
    sql(t, "SET GLOBAL read_only=OFF")
    return t


def pairs(n, raw, ours):
    """n (raw, ours) timings, alternating which runs first; sync before each run."""
    out = []
    for i in range(n):
        got = {}
        for name in ("raw", "ours") if i % 2 == 0 else ("ours", "raw"):
            os.sync()
            got[name] = raw() if name == "raw" else ours()
        out.append((got["raw"], got["ours"]))
    return out


def ratios(timings):
    return [o / r for r, o in timings]


def fmt(xs, f="{:.2f}"):
    return " ".join(f.format(x) for x in xs)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small-mb", type=int, default=250)
    ap.add_argument("--large-mb", type=int, default=1100)
    ap.add_argument("--part-mib", type=int, default=16)
    ap.add_argument("--pairs", type=int, default=3, help="ours/raw pairs per measure")
    ap.add_argument("--backup-only", action="store_true", help="skip the restore comparison")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="backup-bench-"))
    s3srv = s3support.S3Server(root=work / "s3").start()
    factory = MariaDBFactory(work / "db")
    try:
        bucket = s3srv.create_bucket("bench")
        src = fresh_server(factory, "src")
        pw, part = factory.admin_password, a.part_mib * 1024 * 1024
        backups = {}
        for label, mb in (("small", a.small_mb), ("large", a.large_mb)):
            t0 = time.monotonic()
            data = grow_to(src, mb)
            print(
                f"[bench] {label}: {data / 2**20:.0f} MiB of rows in {time.monotonic() - t0:.0f}s",
                file=sys.stderr,
            )
            infos = []

            def ours():
                t, info = backup_ours(src, s3srv, bucket, f"b-{label}", pw, part)
                infos.append(info)
                return t

            timings = pairs(a.pairs, lambda: backup_raw(src, pw), ours)
            backups[label] = (data, timings, infos)
            print(
                f"[bench] {label} backup (raw, ours): {fmt([x for p in timings for x in p], '{:.1f}')} "
                f"ratios {fmt(ratios(timings))}; {infos}",
                file=sys.stderr,
            )

        restores = []
        same = None
        if not a.backup_only:
            s3 = S3(
                bucket=bucket,
                credentials_secret=SecretKeys("x"),
                prefix="bench",
                endpoint=s3srv.endpoint,
                force_path_style=True,
            )
            local = work / "large.sql.zst"
            with open(local, "wb") as f:
                s3srv.client().download_fileobj(bucket, "bench/bench/b-large/backup.sql.zst", f)
            expected = sql(src, "CHECKSUM TABLE bench.t")
            same = True
            runs = [0]

            def measured(load):
                nonlocal same
                runs[0] += 1
                target = fresh_server(factory, f"dst{runs[0]}")
                t = time.monotonic()
                load(target)
                took = time.monotonic() - t
                same = same and sql(target, "CHECKSUM TABLE bench.t") == expected
                target.kill9()  # no background flushing during the next run
                shutil.rmtree(target.root, ignore_errors=True)
                return took

            def ours_restore(target):
                restore_into(
                    Target("127.0.0.1", target.port, ADMIN_USER, pw),
                    Source(s3, "bench/b-large"),
                    storage.Credentials(s3srv.access_key, s3srv.secret_key),
                )

            restores = pairs(
                a.pairs, lambda: measured(lambda t: restore_raw(t, pw, local)), lambda: measured(ours_restore)
            )
            print(
                f"[bench] restore (raw, ours): {fmt([x for p in restores for x in p], '{:.1f}')} "
                f"ratios {fmt(ratios(restores))}",
                file=sys.stderr,
            )

        data, timings, infos = backups["large"]
        print()
        print(
            f"database: {data / 2**20:.0f} MiB of InnoDB row data; dump {infos[0]['uncompressed'] / 2**20:.0f} MiB, "
            f"zstd -3 {infos[0]['compressed'] / 2**20:.0f} MiB; part size {a.part_mib} MiB; {a.pairs} pairs per "
            f"measure; restored tables equal: {same}"
        )
        print(f"{'measure':<34}{'ours':>8}{'raw':>8}{'ratio':>7}   per-pair ratios")
        for label in ("small", "large"):
            d, t, inf = backups[label]
            inside = [(r, i["inside_s"]) for (r, _), i in zip(t, inf)]
            for name, tt in (
                (f"backup time, {label} ({d / 2**20:.0f} MiB) (s)", inside),
                ("  same, with Python start+imports", t),
            ):
                print(
                    f"{name:<34}{statistics.median(o for _, o in tt):>8.1f}{statistics.median(r for r, _ in tt):>8.1f}"
                    f"{statistics.median(ratios(tt)):>7.2f}   {fmt(ratios(tt))}"
                )
        if restores:
            print(
                f"{'restore time, large (s)':<34}{statistics.median(o for _, o in restores):>8.1f}"
                f"{statistics.median(r for r, _ in restores):>8.1f}{statistics.median(ratios(restores)):>7.2f}"
                f"   {fmt(ratios(restores))}"
            )
        for label in ("small", "large"):
            d, _, inf = backups[label]
            name = f"backup peak RSS, {label} ({d / 2**20:.0f} MiB)"
            print(
                f"{name:<34}{max(i['rss_kib'] for i in inf) / 1024:>7.0f}M{'':>15}   "
                f"(max of {len(inf)} runs; dump+zstd children peak {max(i['children_rss_kib'] for i in inf) / 1024:.0f}M)"
            )
        print(
            "backup time: the run_backup call in its own process (restore_into is timed the same way); "
            "'same, with\nPython start+imports' adds starting that process and importing the operator "
            "(kubernetes client, boto3)"
        )
    finally:
        factory.close()
        s3srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
