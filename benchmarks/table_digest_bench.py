"""What the table digests cost (issue 49): a logical backup with them against the same backup
without them (the operator's tree before they came, `--before-tree`, a checkout of that commit),
against the raw `mariadb-dump | zstd`; and a restore that checks its tables against one that
does not.

    git worktree add /tmp/before <commit before the digests>
    .venv/bin/python -m benchmarks.table_digest_bench --before-tree /tmp/before [--mb 500] [--rounds 3]

Starts MinIO and MariaDB servers on loopback (tests/support), grows a database (backup_bench's
table: about 700 bytes a row, half text, half hashes), then in rounds, the order of the variants
rotating each round, after a sync: the backup with digests (this tree), without (the before tree,
its package put first on the Python path), and raw; then restores of the backup into fresh
servers with and without `check_tables`. The machine is shared and noisy: each round gives ratios
to the round's own baseline, and the table shows their medians. Not part of the test suite.
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

from benchmarks.backup_bench import backup_ours, backup_raw, fresh_server, grow_to, sql
from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import storage
from mysql_operator.backup.restore import restore_into
from mysql_operator.backup.restore_types import Source, Target
from tests.support import s3 as s3support
from tests.support.mariadb import ADMIN_USER, MariaDBFactory


def rounds(n: int, variants: dict) -> dict[str, list[float]]:
    """Each variant timed once a round, the order rotating; a sync before each run."""
    names = list(variants)
    out: dict[str, list[float]] = {k: [] for k in names}
    for i in range(n):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            os.sync()
            out[name].append(variants[name]())
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before-tree", required=True, help="a checkout of the commit before the digests")
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    before = str(Path(a.before_tree).resolve())
    work = Path(tempfile.mkdtemp(prefix="digest-bench-"))
    s3srv = s3support.S3Server(root=work / "s3").start()
    factory = MariaDBFactory(work / "db")
    try:
        bucket = s3srv.create_bucket("bench")
        src = fresh_server(factory, "src")
        pw, part = factory.admin_password, 16 * 1024 * 1024
        data = grow_to(src, a.mb)
        rows = sql(src, "SELECT COUNT(*) FROM bench.t")[0][0]
        print(f"[bench] {data / 2**20:.0f} MiB of rows ({rows} rows)", file=sys.stderr)
        infos: list[dict] = []

        def ours(name: str, tree: str | None):
            def run() -> float:
                saved = os.environ.get("PYTHONPATH")
                if tree:
                    os.environ["PYTHONPATH"] = tree
                try:
                    t, info = backup_ours(src, s3srv, bucket, name, pw, part)
                finally:
                    if saved is None:
                        os.environ.pop("PYTHONPATH", None)
                    else:
                        os.environ["PYTHONPATH"] = saved
                infos.append({name: info})
                return t

            return run

        backups = rounds(
            a.rounds,
            {
                "with digests": ours("digests", None),
                "without (before)": ours("before", before),
                "raw dump | zstd": lambda: backup_raw(src, pw),
            },
        )
        s3 = S3(
            bucket=bucket,
            credentials_secret=SecretKeys("x"),
            prefix="bench",
            endpoint=s3srv.endpoint,
            force_path_style=True,
        )
        runs = [0]
        checked_rows = []

        def restore(check: bool):
            def run() -> float:
                runs[0] += 1
                target = fresh_server(factory, f"dst{runs[0]}")
                t = time.monotonic()
                r = restore_into(
                    Target("127.0.0.1", target.port, ADMIN_USER, pw),
                    Source(s3, "bench/digests"),
                    storage.Credentials(s3srv.access_key, s3srv.secret_key),
                    check_tables=check,
                )
                took = time.monotonic() - t
                if check:
                    assert r.table_check is not None and r.table_check.passed
                    checked_rows.append(r.table_check.rows)
                target.kill9()
                shutil.rmtree(target.root, ignore_errors=True)
                return took

            return run

        restores = rounds(a.rounds, {"restore, tables checked": restore(True), "restore": restore(False)})
    finally:
        factory.close()
        s3srv.stop()
        shutil.rmtree(work, ignore_errors=True)

    mib = data / 2**20
    print(f"\n{mib:.0f} MiB of rows, {rows} rows; {a.rounds} rounds; medians\n")
    print(f"| {'run':<26} | {'seconds':>8} | {'MiB/s':>7} | {'ratio':>26} |")
    print(f"|{'-' * 28}|{'-' * 10}|{'-' * 9}|{'-' * 28}|")
    base = backups["without (before)"]
    for name, ts in backups.items():
        ratio = statistics.median(t / b for t, b in zip(ts, base))
        print(f"| backup {name:<19} | {statistics.median(ts):8.1f} | {mib / statistics.median(ts):7.1f} | "
              f"{ratio:10.2f} x without (before) |")  # fmt: skip
    rbase = restores["restore"]
    for name, ts in restores.items():
        ratio = statistics.median(t / b for t, b in zip(ts, rbase))
        print(f"| {name:<26} | {statistics.median(ts):8.1f} | {mib / statistics.median(ts):7.1f} | "
              f"{ratio:10.2f} x restore unchecked |")  # fmt: skip
    print(f"\nrows checked per checked restore: {sorted(set(checked_rows))}")
    print(
        f"backup sizes: {[(k, v['compressed'], v['uncompressed']) for i in infos for k, v in i.items()][:3]}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
