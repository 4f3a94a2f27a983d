"""Physical backup benchmark (not a test): MySQL CLONE -> tar | zstd -> S3, against a raw
`tar | zstd` of the same data directory and against the logical backup of the same server.

    .venv/bin/python -m benchmarks.physical_backup_bench [--mb 1024] [--rounds 3]

A real MySQL 9.7 server (tests/support/mysql.py: the image's root, chroot; root only) holding
--mb MiB of rows, requiring TLS verified against its CA as in a cluster; MinIO on loopback; and
the backup Job's client-tools sidecar serving a shared folder (the image's root, chroot). Each
round, after a sync, in an order that alternates:
- physical: `run_backup(method=physical)`: CLONE over TLS into the sidecar's throwaway server, a
  server started on the copy (its GTID set), then tar | zstd -> S3 multipart with sha256;
- raw: `tar -cf - <the server's data directory, without its binary logs> | zstd > /dev/null`, the
  compressor's options ours uses: the floor for moving those bytes through the compressor (of
  the live directory: not a consistent copy);
- logical: `run_backup(method=logical)`: mysqldump | zstd -> S3.
Then restores (issue 49: restore throughput, before and after the speed work, against the raw
tools in the same run). The last backup of each method is downloaded once to a local file
(untimed). Each round, in an order that rotates by one, after a sync:
- restore physical raw: `zstd -d -c FILE | tar -xf - -C <a new empty folder>` (the decompressor's
  and tar's options ours uses; host tools, into the folder shared with the sidecar): the floor for
  moving those bytes, not a usable server (no server starts on it, nothing is cloned);
- restore physical: `restore_all` of the copy into a new server (as a new cluster's instance: its
  own accounts, the restore account): unpacked by tar in the sidecar, served by a throwaway
  server there, cloned by the new server, which restarts on it;
- restore logical raw: `zstd -d -c FILE | mysql` into a new server, as the admin account, with
  the client options ours uses (TLS verified), the client of the sidecar's image run with chroot
  (the binary ours runs); the server first made writable with an empty GTID history, untimed;
- restore logical, 1 session: `restore_all` of the dump with load_workers 1 (before the speed
  work: S3 -> verify -> S3 -> zstd -d -> DumpFilter -> the sidecar's mysql);
- restore logical, 4 sessions: the same with load_workers 4 (the restore Job's LOAD_WORKERS) and
  a spool folder (after: the dump cut into pieces, loaded by 4 sessions at once).
After every restore into a server, its tables are compared with the source's (CHECKSUM TABLE of
bench's tables): a difference stops the benchmark.
Printed: median seconds and MiB/s (of the data directory's size) of every row, the ratios
physical/raw (of backup throughput) and logical/physical (of time, for backups and for restores),
and, as medians of the per-round ratios, the restore throughput of each of ours against its raw
row and of 4 sessions against 1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from benchmarks.backup_bench import piped, restore_raw, sql
from benchmarks.operator_scale import print_table
from benchmarks.restore_bench import checksums
from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import commands, copy_server, storage
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.physical import METHOD_LOGICAL, METHOD_PHYSICAL
from mysql_operator.backup.restore_types import Donor, Source, Target
from mysql_operator.backup.restore_job import restore_all
from mysql_operator.backup.backup_types import BackupRequest, Candidate
from mysql_operator.backup.run import run_backup
from mysql_operator.db.accounts import restore_grants
from mysql_operator.db.flavor import Flavor, detect
from mysql_operator.manifests.restore_jobs import LOAD_WORKERS
from tests.support import s3 as s3support
from tests.support.pki import new_pki
from tests.support.ports import free_port
from tests.support.mysql import (
    BACKUP_USER,
    MySQLFactory,
    client_tools_sidecar,
    mysql_rootfs,
    mysql_unavailable,
    restarted_when_down,
)

HOST = "localhost"  # the name in the server's certificate
MIB = 1024 * 1024
# what a restore's new server gets: the sizes benchmarks/backup_bench.FAST gives restore_bench's
# MariaDB servers (tests/support/mysql.py's are 32M and 16M)
TARGET = {"innodb_buffer_pool_size": "1G", "innodb_redo_log_capacity": "512M", "max_allowed_packet": "256M"}
# the restore rows (physical_backup_mariadb_bench.py has the same)
RAW_PHYSICAL, PHYSICAL = "restore physical raw", "restore physical"
RAW_LOGICAL, ONE, MANY = (
    "restore logical raw",
    "restore logical, 1 session",
    f"restore logical, {LOAD_WORKERS} sessions",
)


def grow_to(server, mb: int) -> int:
    """Rows in bench.t until its data is about `mb` MiB (half compressible text, half hashes)."""
    server.query("SET GLOBAL super_read_only = OFF")
    conn = server.connect(timeout=3600)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS bench")
            cur.execute(
                "CREATE TABLE IF NOT EXISTS bench.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, k INT, "
                "h CHAR(64), txt VARCHAR(600), n DOUBLE)"
            )
            cur.execute("SET SESSION cte_max_recursion_depth = 200000")
            while True:
                cur.execute(
                    "SELECT COALESCE(SUM(data_length), 0) FROM information_schema.tables "
                    "WHERE table_schema = 'bench'"
                )
                size = int(cur.fetchone()[0])
                if size >= mb * MIB:
                    return size
                cur.execute(
                    "INSERT INTO bench.t (k, h, txt, n) WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL "
                    "SELECT i + 1 FROM s WHERE i < 100000) SELECT FLOOR(RAND() * 1e6), SHA2(RAND(), 256), "
                    "CONCAT(REPEAT('lorem ipsum dolor ', 12), SHA2(RAND(), 512), SHA2(RAND(), 512), "
                    "SHA2(RAND(), 512)), RAND() FROM s"
                )
                conn.commit()
                cur.execute("ANALYZE TABLE bench.t")
    finally:
        conn.close()


def data_bytes(datadir: Path) -> int:
    return sum(
        f.stat().st_size for f in datadir.rglob("*") if f.is_file() and not f.name.startswith("binlog.")
    )


def raw(datadir: Path) -> float:
    comp, _, _ = commands.compressor("zstd")
    t = time.monotonic()
    tar = subprocess.Popen(
        ["tar", "--exclude=./binlog.*", "-C", str(datadir), "-cf", "-", "."],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # "file changed as we read it": a live directory
    )
    z = subprocess.Popen(comp, stdin=tar.stdout, stdout=subprocess.DEVNULL)
    tar.stdout.close()
    assert z.wait() == 0 and tar.wait() in (0, 1)
    return time.monotonic() - t


def tls_server(factory, keys: Path, prefix: str, **extra):
    """A new server requiring TLS, with the certificate in `keys` (as a cluster's instance);
    `extra`: more server options."""
    (server,) = factory.create(
        1,
        prefix=prefix,
        start=False,
        ssl_ca=keys / "ca.crt",
        ssl_cert=keys / "tls.crt",
        ssl_key=keys / "tls.key",
        require_secure_transport=True,
    )
    server.extra.update(extra)
    return server.start()


def same_tables(server, database: str, expected: list) -> None:
    """Raises unless `server`'s tables of `database` have the `expected` checksums."""
    got = checksums(server, database)
    if got != expected:
        raise RuntimeError(
            f"{server.name}: the restored tables differ from the source's: {got} != {expected}"
        )


def rotated(
    runs: dict[str, Callable[[], float]], rounds: int, before: Callable[[], object] = os.sync
) -> dict:
    """Seconds of each of `runs`, once a round, in an order that rotates by one each round,
    `before()` ahead of each."""
    times: dict[str, list[float]] = {k: [] for k in runs}
    names = list(runs)
    for i in range(rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            before()
            times[name].append(runs[name]())
    return times


def restore_rows(times: dict[str, list[float]]) -> list[tuple[str, str]]:
    """The restore ratios: throughput of each of ours against its raw row, and of several
    sessions against one (medians of the per-round ratios, then each round's)."""
    rows = []
    for ours, base in ((PHYSICAL, RAW_PHYSICAL), (ONE, RAW_LOGICAL), (MANY, RAW_LOGICAL), (MANY, ONE)):
        ratios = [b / o for b, o in zip(times[base], times[ours])]
        rows.append(
            (
                f"throughput {ours} / {base}",
                f"{statistics.median(ratios):.2f} ({' '.join(f'{r:.2f}' for r in ratios)})",
            )
        )
    return rows


def unpack_raw(local: Path, under: Path, unpack=copy_server.untar_command) -> float:
    """Seconds of `zstd -d -c local | <unpack(a new empty folder under `under`)>` (by default
    `tar -xf - -C <folder>`, as ours unpacks a MySQL copy)."""
    dest = Path(tempfile.mkdtemp(prefix="raw-unpack-", dir=under))
    try:
        return piped(local, unpack(dest))
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def load_raw(factory, keys: Path, shared: Path, local: Path, expected: list) -> float:
    """Seconds of `zstd -d -c local | mysql` into a new server (restore_raw: the sidecar image's
    client, chrooted; its option file in `shared`), its tables then checked (then stopped)."""
    target = tls_server(factory, keys, "raw", **TARGET)
    sql(
        target,
        "SET GLOBAL super_read_only = OFF",
        "SET GLOBAL read_only = OFF",
        "RESET BINARY LOGS AND GTIDS",
    )
    version = detect(*sql(target, "SELECT VERSION(), @@version_comment")[0])
    tools = mysql_rootfs("mysql-tools")
    seconds = restore_raw(
        target, factory.admin_password, local, version, HOST, str(shared / "ca.crt"), tools, str(shared)
    )
    same_tables(target, "bench", expected)
    target.stop()
    shutil.rmtree(target.root, ignore_errors=True)
    return seconds


def restore(
    factory, keys: Path, shared: Path, s3: S3, creds, backup: str, expected: list, workers: int = 1
) -> float:
    """Seconds `restore_all` takes to restore `backup` into a new server, a dump by `workers`
    sessions (its pieces spooled in shared/spool); its tables then checked (then stopped)."""
    target = tls_server(factory, keys, "restore", **TARGET)
    pw = factory.admin_password
    conn = target.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL super_read_only = OFF")
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("CREATE USER 'restorer'@'%%' IDENTIFIED BY %s", (pw,))
            for g in restore_grants(Flavor.MYSQL):
                cur.execute(g.grant_sql(), ("restorer", "%"))
            cur.execute("SET GLOBAL super_read_only = ON")
    finally:
        conn.close()
    t = time.monotonic()
    with restarted_when_down([target]):
        result = restore_all(
            {
                target.name: Target(
                    HOST,
                    target.port,
                    "restorer",
                    pw,
                    str(shared / "ca.crt"),
                    str(shared),
                    load_workers=workers,
                    spool=str(shared / "spool"),
                )
            },
            Source(s3, f"bench/{backup}"),
            creds,
            None,
            drop_account=True,
            donor=Donor("127.0.0.1", free_port()),
        )
    seconds = time.monotonic() - t
    if not result["ok"]:
        raise RuntimeError(f"restore of {backup}: {result['message']}")
    same_tables(target, "bench", expected)
    target.stop()
    shutil.rmtree(target.root, ignore_errors=True)
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024, help="MiB of rows in the server")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    why = mysql_unavailable()
    if why:
        print(f"no MySQL 9.7 server here: {why}")
        return 1
    factory = MySQLFactory()
    s3srv = s3support.S3Server(root=Path(factory.workdir) / "s3").start()
    # as a Pod's emptyDir: bind-mounted into the image's root at the same path, reachable there
    shared = Path(tempfile.mkdtemp(prefix="physical-bench-", dir="/var/tmp"))
    try:
        keys = new_pki(Path(factory.workdir) / "pki", [HOST], "physical-bench")
        source = tls_server(factory, keys, "src")
        rows = grow_to(source, args.mb)
        size = data_bytes(source.datadir)
        expected = checksums(source, "bench")
        shutil.copy(keys / "ca.crt", shared / "ca.crt")
        (shared / "spool").mkdir()
        shared.chmod(0o777)  # the throwaway server runs as the image's mysql user
        bucket = s3srv.create_bucket("bench-physical")
        s3 = S3(
            bucket=bucket,
            credentials_secret=SecretKeys("x"),
            prefix="bench",
            endpoint=s3srv.endpoint,
            force_path_style=True,
        )
        creds = storage.Credentials(s3srv.access_key, s3srv.secret_key)
        n = [0]
        last: dict = {}  # method: the manifest of its last backup

        def ours(method: str) -> float:
            n[0] += 1
            req = BackupRequest(
                cluster="bench",
                namespace="bench",
                backup=f"b{n[0]}",
                s3=s3,
                tls_ca=str(shared / "ca.crt"),
                tools_dir=str(shared),
                candidates=(Candidate("src", Endpoint(HOST, source.port, BACKUP_USER)),),
                method=method,
            )
            t = time.monotonic()
            last[method] = run_backup(req, creds, factory.admin_password)
            return time.monotonic() - t

        runs = {
            "physical": lambda: ours(METHOD_PHYSICAL),
            "raw": lambda: raw(source.datadir),
            "logical": lambda: ours(METHOD_LOGICAL),
        }
        times: dict[str, list[float]] = {k: [] for k in runs}
        with client_tools_sidecar(shared):
            for i in range(args.rounds):
                order = list(runs) if i % 2 == 0 else list(reversed(runs))
                for name in order:
                    os.sync()
                    times[name].append(runs[name]())
            local = {}
            for method, m in last.items():  # downloaded once, for the raw rows
                local[method] = Path(factory.workdir) / f"{method}.zst"
                with open(local[method], "wb") as f:
                    s3srv.client().download_fileobj(bucket, m.data_key, f)

            def ours_restore(method: str, workers: int = 1) -> float:
                return restore(factory, keys, shared, s3, creds, last[method].backup, expected, workers)

            restores = {
                RAW_PHYSICAL: lambda: unpack_raw(local[METHOD_PHYSICAL], shared),
                PHYSICAL: lambda: ours_restore(METHOD_PHYSICAL),
                RAW_LOGICAL: lambda: load_raw(factory, keys, shared, local[METHOD_LOGICAL], expected),
                ONE: lambda: ours_restore(METHOD_LOGICAL, 1),
                MANY: lambda: ours_restore(METHOD_LOGICAL, LOAD_WORKERS),
            }
            times.update(rotated(restores, args.rounds))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(
            f"\nMySQL 9.7: {rows / MIB:.0f} MiB of rows, data directory {size / MIB:.0f} MiB, {args.rounds} rounds"
        )
        table = []
        for k, v in times.items():
            table.append((f"{k}: median s (runs)", f"{med[k]:.1f} ({' '.join(f'{x:.1f}' for x in v)})"))
            table.append((f"{k}: MiB/s of the data directory", f"{size / MIB / med[k]:.0f}"))
        table.append(("physical throughput / raw tar | zstd", f"{med['raw'] / med['physical']:.2f}"))
        table.append(("logical time / physical time", f"{med['logical'] / med['physical']:.2f}"))
        table.append(
            (
                f"restore: logical ({LOAD_WORKERS} sessions) time / physical time",
                f"{med[MANY] / med[PHYSICAL]:.2f}",
            )
        )
        table += restore_rows(times)
        table.append(("restored tables equal to the source's (CHECKSUM TABLE)", "yes, after every restore"))
        print_table(table)
        return 0
    finally:
        s3srv.stop()
        factory.close()
        shutil.rmtree(shared, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
