"""What recording a MySQL physical backup's table digests costs (issue 49; not a test): the same
`run_backup(method=physical)` with and without the digest step (copy_digests;
backup_producer.copy_digests: the sidecar's mysqldump of the server started on the copy, read
through the table digests, before the tar).

    .venv/bin/python -m benchmarks.physical_digest_bench [--mb 1024] [--rounds 3]

The server, its data (bench.t, half compressible text, half hashes), MinIO and the client-tools
sidecar as benchmarks/physical_backup_bench.py has them. Each round, after a sync, both variants
in an order that alternates. Printed: the median seconds of each, their ratio, and the tables
and rows the digests recorded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.physical_backup_bench import HOST, MIB, data_bytes, grow_to, tls_server
from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import storage
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.physical import METHOD_PHYSICAL
from mysql_operator.backup.backup_types import BackupRequest, Candidate
from mysql_operator.backup.run import run_backup
from tests.support import s3 as s3support
from tests.support.mysql import BACKUP_USER, MySQLFactory, client_tools_sidecar, mysql_unavailable
from tests.support.pki import new_pki


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
    shared = Path(tempfile.mkdtemp(prefix="physical-digest-bench-", dir="/var/tmp"))
    try:
        keys = new_pki(Path(factory.workdir) / "pki", [HOST], "physical-digest-bench")
        source = tls_server(factory, keys, "src")
        grow_to(source, args.mb)
        size = data_bytes(source.datadir)
        shutil.copy(keys / "ca.crt", shared / "ca.crt")
        shared.chmod(0o777)  # the throwaway server runs as the image's mysql user
        s3 = S3(
            bucket=s3srv.create_bucket("bench-digest"),
            credentials_secret=SecretKeys("x"),
            prefix="bench",
            endpoint=s3srv.endpoint,
            force_path_style=True,
        )
        creds = storage.Credentials(s3srv.access_key, s3srv.secret_key)
        times: dict[str, list[float]] = {"with digests": [], "without": []}
        n = [0]
        recorded: dict = {}

        def backup(digests: bool) -> float:
            n[0] += 1
            req = BackupRequest(
                cluster="bench",
                namespace="bench",
                backup=f"b{n[0]}",
                s3=s3,
                tls_ca=str(shared / "ca.crt"),
                tools_dir=str(shared),
                candidates=(Candidate("src", Endpoint(HOST, source.port, BACKUP_USER)),),
                method=METHOD_PHYSICAL,
                copy_digests=digests,
            )
            os.sync()
            t = time.monotonic()
            m = run_backup(req, creds, factory.admin_password)
            seconds = time.monotonic() - t
            if digests:
                assert m.tables is not None, m.tables_note
                recorded.update(m.tables)
            else:
                assert m.tables is None
            return seconds

        with client_tools_sidecar(shared):
            for r in range(args.rounds):
                order = (True, False) if r % 2 == 0 else (False, True)
                for digests in order:
                    s = backup(digests)
                    times["with digests" if digests else "without"].append(s)
                    print(f"round {r + 1}: {'with digests' if digests else 'without'}: {s:.1f}s", flush=True)
        a, b = statistics.median(times["with digests"]), statistics.median(times["without"])
        print(f"data directory: {size / MIB:.0f} MiB (binary logs left out)")
        print(
            f"physical backup, median of {args.rounds}: with digests {a:.1f}s, without {b:.1f}s, ratio {a / b:.2f}"
        )
        print(f"recorded: {len(recorded)} tables, {sum(t['rows'] for t in recorded.values())} rows")
        return 0
    finally:
        s3srv.stop()
        factory.close()
        shutil.rmtree(shared, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
