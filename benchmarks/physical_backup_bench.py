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
Then, each round, the last backup of each method is restored into a new server (as a new
cluster's instance: its own accounts, the restore account): `restore_all` of the dump (the image's
client loads it) and of the copy (unpacked by tar in the sidecar, served by a throwaway server
there, cloned by the new server, which restarts on it).
Printed: median seconds and MiB/s (of the data directory's size), the ratios physical/raw (of
throughput) and logical/physical (of time, for backups and for restores).
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

from benchmarks.operator_scale import print_table
from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import commands, storage
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.physical import METHOD_LOGICAL, METHOD_PHYSICAL
from mysql_operator.backup.restore_types import Donor, Source, Target
from mysql_operator.backup.restore_job import restore_all
from mysql_operator.backup.run import BackupRequest, Candidate, run_backup
from mysql_operator.db.accounts import restore_grants
from mysql_operator.db.flavor import Flavor
from tests.support import s3 as s3support
from tests.support.pki import new_pki
from tests.support.ports import free_port
from tests.support.mysql import (
    BACKUP_USER,
    MySQLFactory,
    client_tools_sidecar,
    mysql_unavailable,
    restarted_when_down,
)

HOST = "localhost"  # the name in the server's certificate
MIB = 1024 * 1024


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


def tls_server(factory, keys: Path, prefix: str):
    """A new server requiring TLS, with the certificate in `keys` (as a cluster's instance)."""
    (server,) = factory.create(
        1,
        prefix=prefix,
        ssl_ca=keys / "ca.crt",
        ssl_cert=keys / "tls.crt",
        ssl_key=keys / "tls.key",
        require_secure_transport=True,
    )
    return server


def restore(factory, keys: Path, shared: Path, s3: S3, creds, backup: str) -> float:
    """Seconds `restore_all` takes to restore `backup` into a new server (then stopped)."""
    target = tls_server(factory, keys, "restore")
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
            {target.name: Target(HOST, target.port, "restorer", pw, str(shared / "ca.crt"), str(shared))},
            Source(s3, f"bench/{backup}"),
            creds,
            None,
            drop_account=True,
            donor=Donor("127.0.0.1", free_port()),
        )
    seconds = time.monotonic() - t
    assert result["ok"], result["message"]
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
        shutil.copy(keys / "ca.crt", shared / "ca.crt")
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
        last: dict[str, str] = {}

        def ours(method: str) -> float:
            n[0] += 1
            last[method] = f"b{n[0]}"
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
            run_backup(req, creds, factory.admin_password)
            return time.monotonic() - t

        runs = {
            "physical": lambda: ours(METHOD_PHYSICAL),
            "raw": lambda: raw(source.datadir),
            "logical": lambda: ours(METHOD_LOGICAL),
        }
        times: dict[str, list[float]] = {k: [] for k in runs}
        with client_tools_sidecar(factory.rootfs, shared):
            for i in range(args.rounds):
                order = list(runs) if i % 2 == 0 else list(reversed(runs))
                for name in order:
                    os.sync()
                    times[name].append(runs[name]())
            restores = {
                "restore physical": lambda: restore(factory, keys, shared, s3, creds, last[METHOD_PHYSICAL]),
                "restore logical": lambda: restore(factory, keys, shared, s3, creds, last[METHOD_LOGICAL]),
            }
            times.update({k: [] for k in restores})
            for i in range(args.rounds):
                order = list(restores) if i % 2 == 0 else list(reversed(restores))
                for name in order:
                    os.sync()
                    times[name].append(restores[name]())
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
                "restore: logical time / physical time",
                f"{med['restore logical'] / med['restore physical']:.2f}",
            )
        )
        print_table(table)
        return 0
    finally:
        s3srv.stop()
        factory.close()
        shutil.rmtree(shared, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
