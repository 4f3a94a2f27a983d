"""MariaDB physical backup benchmark (not a test): the backup Job's copy (mariadb-backup streamed by
the server's seed-donor sidecar, sh/seed.sh donate) -> zstd -> S3, against a raw `tar | zstd` of
the same data directory and the logical backup; then both restored into a new server, against
the raw tools.

    .venv/bin/python -m benchmarks.physical_backup_mariadb_bench [--gib 1] [--rounds 3]

A real MariaDB server (Debian's mariadbd, tests/support/mariadb.py) holding --gib GiB of
incompressible rows, TLS with a certificate for `localhost`, its `seed.sh serve` sidecar; MinIO on
loopback. After a sync and a dropped page cache each: `run_backup(method=physical)`; `tar -cf -
<data directory without logs> | zstd > /dev/null` with our compressor's options (the floor for
moving those bytes through the compressor); `run_backup(method=logical)`, once each.

Then restores (issue 49: restore throughput, before and after the speed work, against the raw
tools in the same run). Both backups' objects are downloaded once to local files (untimed). Each
of --rounds rounds runs the rows below in an order that rotates by one, each after a sync and a
dropped page cache; those that restore into a server first make the target a new server again
(untimed; as a new cluster's instance: an empty `app`) and then compare its tables with the
source's (CHECKSUM TABLE; a difference stops the benchmark):
- restore physical raw: `zstd -d -c FILE | mbstream -x -p 2 -C <a new empty folder>` (the
  object is zstd of mariadb-backup's xbstream; seed.sh receive's extraction, host tools): the
  floor for moving those bytes, not a usable server (not prepared, no server started on it);
- restore physical: `restore_all` of the copy: the restore Job's copy server streams it from the
  bucket to `seed.sh receive` (what the new Pod's init container runs), which prepares it, and
  the server starts on it with its GTID state and accounts (--init-file, as start.sh gives it);
- restore logical raw: `zstd -d -c FILE | mariadb` as the admin account, with the client options
  ours uses (TLS verified);
- restore logical, 1 session: `restore_all` of the dump with load_workers 1 (before the speed
  work: S3 -> verify -> S3 -> zstd -d -> DumpFilter -> mariadb);
- restore logical, 4 sessions: the same with load_workers 4 (the restore Job's LOAD_WORKERS) and a
  spool folder (after: the dump cut into pieces, loaded by 4 sessions at once).
Printed: seconds and MiB/s of the data directory, the ratios physical/raw (of backup
throughput) and logical/physical (of time), and, as medians of the per-round ratios, the restore
throughput of each of ours against its raw row and of 4 sessions against 1. Root only (drops the
page cache).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.backup_bench import restore_raw
from benchmarks.operator_scale import print_table
from benchmarks.physical_backup_bench import (
    MANY,
    ONE,
    PHYSICAL,
    RAW_LOGICAL,
    RAW_PHYSICAL,
    restore_rows,
    rotated,
    same_tables,
    unpack_raw,
)
from benchmarks.restore_bench import checksums
from benchmarks.reseed_bench import DB, MIB, drop_caches, fill
from benchmarks.reseed_mariadb_bench import LOGS, SEED_SH, Seeder, data_bytes
from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import commands, storage
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.restore_types import Donor, Source, Target
from mysql_operator.backup.restore_job import restore_all
from mysql_operator.backup.restore_mariadb_physical import SEED_TOKEN_ENV
from mysql_operator.backup.backup_types import BackupRequest, Candidate
from mysql_operator.backup.run import run_backup
from mysql_operator.db.flavor import detect
from mysql_operator.manifests.restore_jobs import LOAD_WORKERS
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


def mbstream_x(folder: Path) -> list[str]:
    """An xbstream on stdin unpacked into `folder`, as sh/seed.sh receive does."""
    return ["mbstream", "-x", "-p", "2", "-C", str(folder)]


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
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the restores")
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

        target.name = "pb-new"
        pw, ca = factory.admin_password, str(pki / "ca.crt")
        expected = checksums(source, DB)
        local = {}
        for m in (physical, logical):  # downloaded once, for the raw rows
            local[m.method] = root / f"{m.method}.zst"
            with open(local[m.method], "wb") as f:
                s3server.client().download_fileobj(s3.bucket, m.data_key, f)
        spool = root / "spool"
        spool.mkdir()
        version = detect(*source.query("SELECT VERSION(), @@version_comment")[0])

        def into_new(load) -> float:
            """Seconds of `load()` into the target made new (untimed), its tables then checked."""
            fresh(factory, target)
            started = time.monotonic()
            load()
            seconds = time.monotonic() - started
            same_tables(target, DB, expected)
            return seconds

        def logical_restore(workers: int) -> None:
            t = Target(HOST, target.port, ADMIN_USER, pw, tls_ca=ca, load_workers=workers, spool=str(spool))
            result = restore_all({target.name: t}, Source(s3, "c/b-logical"), creds, DB)
            if not result.get("ok"):
                raise RuntimeError(f"the logical restore failed: {result.get('message')}")

        restores = {
            RAW_PHYSICAL: lambda: unpack_raw(local["physical"], root, mbstream_x),
            PHYSICAL: lambda: into_new(lambda: restore_physical(seeder, target, s3, creds, pw, pki)),
            RAW_LOGICAL: lambda: into_new(
                lambda: restore_raw(target, pw, local["logical"], version, HOST, ca)
            ),
            ONE: lambda: into_new(lambda: logical_restore(1)),
            MANY: lambda: into_new(lambda: logical_restore(LOAD_WORKERS)),
        }
        times = rotated(restores, args.rounds, drop_caches)
        med = {k: statistics.median(v) for k, v in times.items()}
        mib = size / MIB
        print_table(
            [
                ("data directory (without logs), MiB", f"{mib:.0f} ({count(source)} rows)"),
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
                *(
                    (
                        f"{k} s, median (runs)",
                        f"{med[k]:.1f} ({' '.join(f'{x:.1f}' for x in v)}; {mib / med[k]:.0f} MiB/s)",
                    )
                    for k, v in times.items()
                ),
                ("physical/raw throughput, backup", f"{t_raw / t_physical:.2f}"),
                ("logical/physical time, backup", f"{t_logical / t_physical:.2f}"),
                (
                    f"logical ({LOAD_WORKERS} sessions)/physical time, restore",
                    f"{med[MANY] / med[PHYSICAL]:.2f}",
                ),
                *restore_rows(times),
                ("restored tables equal to the source's (CHECKSUM TABLE)", "yes, after every restore"),
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
