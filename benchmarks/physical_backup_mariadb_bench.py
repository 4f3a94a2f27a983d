"""MariaDB physical backup benchmark (not a test): the backup Job's copy (mariadb-backup streamed by
the server's seed-donor sidecar, sh/seed.sh donate) -> zstd -> S3, against a raw `tar | zstd` of
the same data directory and the logical backup; then both restored into a new server.

    .venv/bin/python -m benchmarks.physical_backup_mariadb_bench [--gib 1]

A real MariaDB server (Debian's mariadbd, tests/support/mariadb.py) holding --gib GiB of
incompressible rows, TLS with a certificate for `localhost`, its `seed.sh serve` sidecar; MinIO on
loopback. After a sync and a dropped page cache each: `run_backup(method=physical)`; `tar -cf -
<data directory without logs> | zstd > /dev/null` with our compressor's options (the floor for
moving those bytes through the compressor); `run_backup(method=logical)`. Then into a fresh
server: `restore_all` of the dump (mariadb loads it), and of the copy: the restore Job's copy
server streams it from the bucket to `seed.sh receive` (what the new Pod's init container runs),
which prepares it, and the server starts on it with its GTID state and accounts (--init-file, as
start.sh gives it). Printed: seconds and MiB/s of the data directory, the ratios physical/raw (of
throughput) and logical/physical (of time). Root only (drops the page cache).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.operator_scale import print_table
from benchmarks.reseed_bench import DB, MIB, drop_caches, fill
from benchmarks.reseed_mariadb_bench import LOGS, SEED_SH, Seeder, data_bytes
from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import commands, storage
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.restore_types import Donor, Source, Target
from mysql_operator.backup.restore_job import restore_all
from mysql_operator.backup.restore_mariadb_physical import SEED_TOKEN_ENV
from mysql_operator.backup.run import BackupRequest, Candidate, run_backup
from tests.support import s3 as s3support
from tests.support.mariadb import ADMIN_USER, MariaDBFactory, missing_binaries
from tests.support.ports import free_port
from tests.support.pki import new_pki
from tests.support.wait import wait_for

HOST = "localhost"  # in the certificate; the servers listen on 127.0.0.1


def raw_seconds(datadir: Path) -> float:
    comp, _, _ = commands.compressor("zstd")
    excludes = [f"--exclude={p}*" for p in LOGS]
    started = time.monotonic()
    tar = subprocess.Popen(
        ["tar", *excludes, "-C", str(datadir), "-cf", "-", "."],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    subprocess.run(comp, stdin=tar.stdout, stdout=subprocess.DEVNULL, check=True)
    if tar.wait() not in (0, 1):  # 1: a file changed while read (the server's, live)
        raise RuntimeError("tar failed")
    return time.monotonic() - started


def timed(f):
    drop_caches()
    started = time.monotonic()
    out = f()
    return out, time.monotonic() - started


def fresh(factory: MariaDBFactory, server) -> None:
    """`server` as a new cluster's instance: a new data directory, started."""
    server.stop()
    subprocess.run(["rm", "-rf", str(server.datadir)], check=True)
    factory.copy_pristine(server.datadir)
    server.extra.pop("init_file", None)
    server.start()
    server.query("SET GLOBAL read_only = OFF")
    server.query(f"CREATE DATABASE IF NOT EXISTS {DB}")


def restore_physical(seeder: Seeder, target, s3: S3, creds, password: str, tls_dir: Path) -> dict:
    """The restore Job (restore_all, in a thread) and what the operator and the new Pod do: the
    request, the server stopped, `seed.sh receive` from the Job, the server started on the copy."""
    port = free_port()
    result: dict = {}
    # the restore Job serves the copy only to a requester sending this (the Pod's seed token)
    os.environ[SEED_TOKEN_ENV] = seeder.token.read_text()
    job = threading.Thread(
        target=lambda: result.update(
            restore_all(
                {
                    target.name: Target(
                        HOST, target.port, ADMIN_USER, password, tls_ca=str(tls_dir / "ca.crt")
                    )
                },
                Source(s3, "c/b-physical"),
                creds,
                DB,
                donor=Donor(HOST, port, tls_dir=str(tls_dir)),
            )
        )
    )
    job.start()
    wait_for(lambda: result or _answers(port), 3600, "the restore Job serving the copy")
    (seeder.root / "reseed" / target.name).write_text(f"{HOST} {time.time_ns()} restore\n")
    target.stop()
    env = seeder.env(target, MYSQL_OPERATOR_SEED_PORT=str(port), MYSQL_OPERATOR_SEED_ADDRESS="127.0.0.1")
    r = subprocess.run(["/bin/bash", str(SEED_SH), "receive"], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"seed.sh receive: {r.stderr[-2000:]}")
    init, given = target.root / "reseed-init.sql", target.root / "reseed-init.given.sql"
    init.rename(given)
    target.restart(init_file=given)
    job.join()
    if not result.get("ok"):
        raise RuntimeError(f"the physical restore failed: {result.get('message')}")
    return result


def count(server) -> int:
    conn = server.connect(timeout=3600)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {DB}.big")
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def _answers(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), 1).close()
        return True
    except OSError:
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=1.0, help="GiB of rows in the server")
    args = ap.parse_args()
    missing = missing_binaries() + [
        b for b in ("socat", "mariadb-backup", "mbstream", "zstd") if not _which(b)
    ]
    if missing or os.geteuid() != 0 or s3support.missing():
        raise SystemExit(
            f"needs root, MinIO and: {', '.join(missing) or '-'} ({s3support.missing() or 'MinIO ok'})"
        )
    factory = MariaDBFactory()
    root = Path(tempfile.mkdtemp(prefix="pbm-", dir=factory.workdir))
    pki = new_pki(root / "pki", ["*.bench", HOST], "bench")
    tls = {"ssl_ca": pki / "ca.crt", "ssl_cert": pki / "tls.crt", "ssl_key": pki / "tls.key"}
    s3server = s3support.S3Server(root=root / "s3").start()
    source, target = factory.create(2, prefix="pb", **tls)
    seeder = None
    try:
        for s in (source, target):
            s.restart(innodb_buffer_pool_size="512M", innodb_log_file_size="256M")
        source.query("SET GLOBAL read_only = OFF")
        source.query(f"CREATE DATABASE IF NOT EXISTS {DB}")
        fill(source, args.gib, user=ADMIN_USER, password=factory.admin_password)
        seeder = Seeder(root / "seed", [source], factory.admin_password, tls_dir=pki)
        size = data_bytes(source.datadir)
        s3 = S3(
            bucket=s3server.create_bucket("bench"),
            credentials_secret=SecretKeys("unused"),
            prefix="b",
            endpoint=s3server.endpoint,
            force_path_style=True,
        )
        creds = storage.Credentials(s3server.access_key, s3server.secret_key)

        def backup(method: str):
            req = BackupRequest(
                cluster="c",
                namespace="ns",
                backup=f"b-{method}",
                s3=s3,
                tls_ca=str(pki / "ca.crt"),
                candidates=(Candidate(source.name, Endpoint(HOST, source.port, ADMIN_USER)),),
                method=method,
                seed_port=seeder.ports[source.name],
            )
            return run_backup(req, creds, factory.admin_password)

        physical, t_physical = timed(lambda: backup("physical"))
        _, t_raw = timed(lambda: raw_seconds(source.datadir))
        logical, t_logical = timed(lambda: backup("logical"))

        fresh(factory, target)
        target.name = "pb-new"
        loaded, r_logical = timed(
            lambda: restore_all(
                {
                    target.name: Target(
                        HOST, target.port, ADMIN_USER, factory.admin_password, tls_ca=str(pki / "ca.crt")
                    )
                },
                Source(s3, "c/b-logical"),
                creds,
                DB,
            )
        )
        if not loaded.get("ok"):
            raise RuntimeError(f"the logical restore failed: {loaded.get('message')}")
        rows = count(target)
        fresh(factory, target)
        _, r_physical = timed(
            lambda: restore_physical(seeder, target, s3, creds, factory.admin_password, pki)
        )
        assert count(target) == rows == count(source), "the restored servers lack rows"
        mib = size / MIB
        print_table(
            [
                ("data directory (without logs), MiB", f"{mib:.0f} ({rows} rows)"),
                (
                    "physical backup s (mariadb-backup -> zstd -> S3)",
                    f"{t_physical:.1f} ({mib / t_physical:.0f} MiB/s)",
                ),
                ("raw tar | zstd s", f"{t_raw:.1f} ({mib / t_raw:.0f} MiB/s)"),
                (
                    "logical backup s (mariadb-dump -> zstd -> S3)",
                    f"{t_logical:.1f} ({mib / t_logical:.0f} MiB/s)",
                ),
                (
                    "stored MiB physical / logical",
                    f"{physical.compressed_size / MIB:.0f} / {logical.compressed_size / MIB:.0f}",
                ),
                ("physical restore s (stream -> receive -> prepare -> start)", f"{r_physical:.1f}"),
                ("logical restore s (the dump loaded)", f"{r_logical:.1f}"),
                ("physical/raw throughput", f"{t_raw / t_physical:.2f}"),
                ("logical/physical time, backup", f"{t_logical / t_physical:.2f}"),
                ("logical/physical time, restore", f"{r_logical / r_physical:.2f}"),
            ]
        )
    finally:
        if seeder is not None:
            seeder.close()
        s3server.stop()
        factory.close()


def _which(b: str) -> bool:
    import shutil

    return shutil.which(b) is not None


if __name__ == "__main__":
    main()
