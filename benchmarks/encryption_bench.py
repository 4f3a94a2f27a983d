"""What client-side encryption costs: backup and restore with and without it, in pairs.

    .venv/bin/python -m benchmarks.encryption_bench [--mb 400] [--pairs 3]

Starts MinIO and a MariaDB server on loopback (tests/support), fills a table of about --mb MiB,
then times (each pair alternating which goes first, after a sync):
- backup: `run_backup` in a new process (dump | zstd -> [encrypt] -> S3), plain vs encrypted;
- restore: `restore_into` a fresh server (verify [and authenticate] the object, then load), plain
  vs encrypted; the restored table's CHECKSUM TABLE is compared with the source's;
- the cipher alone: MiB/s of Encryptor and Decryptor over 256 MiB in memory (one core).
Prints a table of medians and the ratio encrypted/plain. Not part of the test suite.
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

from benchmarks.backup_bench import backup_ours, fmt, fresh_server, grow_to, sql
from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import crypto, storage
from mysql_operator.backup.restore import restore_into
from mysql_operator.backup.restore_types import Source, Target
from tests.support import s3 as s3support
from tests.support.mariadb import ADMIN_USER, MariaDBFactory


def cipher_rates(mib: int = 256) -> tuple[float, float]:
    """MiB/s of encrypting and decrypting `mib` MiB held in memory."""
    key = crypto.Key(os.urandom(32))
    block = memoryview(os.urandom(crypto.RECORD_PLAIN))
    left = [mib * 1024 * 1024]

    def source(view: memoryview) -> int:
        n = min(len(view), len(block), left[0])
        view[:n] = block[:n]
        left[0] -= n
        return n

    enc, buf, blob = crypto.Encryptor(source, key), bytearray(crypto.RECORD), []
    t = time.monotonic()
    while n := enc.readinto(memoryview(buf)):
        blob.append(bytes(buf[:n]))
    t_enc = time.monotonic() - t
    dec = crypto.Decryptor(key)
    t = time.monotonic()
    for piece in blob:
        dec.feed(piece)
    dec.finish()
    t_dec = time.monotonic() - t
    return mib / t_enc, mib / t_dec


def pairs(n: int, plain, encrypted) -> list[tuple[float, float]]:
    out = []
    for i in range(n):
        got = {}
        for name in ("plain", "enc") if i % 2 == 0 else ("enc", "plain"):
            os.sync()
            got[name] = plain() if name == "plain" else encrypted()
        out.append((got["plain"], got["enc"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=400, help="MiB of InnoDB row data")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--part-mib", type=int, default=16)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="encryption-bench-"))
    s3srv = s3support.S3Server(root=work / "s3").start()
    factory = MariaDBFactory(work / "db")
    key = crypto.Key(os.urandom(32))
    try:
        bucket = s3srv.create_bucket("bench")
        src = fresh_server(factory, "src")
        pw, part = factory.admin_password, a.part_mib * 1024 * 1024
        data = grow_to(src, a.mb)
        expected = sql(src, "CHECKSUM TABLE bench.t")
        info: dict[str, dict] = {}

        def backup(name: str, key_hex: str):
            def run() -> float:
                _, got = backup_ours(src, s3srv, bucket, name, pw, part, key_hex)
                info[name] = got
                return got["inside_s"]

            return run

        backups = pairs(a.pairs, backup("plain", ""), backup("enc", key.secret.hex()))
        print(f"[bench] backup (plain, enc): {backups}", file=sys.stderr)

        s3 = S3(bucket=bucket, credentials_secret=SecretKeys("x"), prefix="bench", endpoint=s3srv.endpoint,
                force_path_style=True)  # fmt: skip
        creds = storage.Credentials(s3srv.access_key, s3srv.secret_key)
        same, runs = [True], [0]

        def restore(name: str, with_key: crypto.Key | None):
            def run() -> float:
                runs[0] += 1
                target = fresh_server(factory, f"dst{runs[0]}")
                t = time.monotonic()
                restore_into(
                    Target("127.0.0.1", target.port, ADMIN_USER, pw),
                    Source(s3, f"bench/{name}", with_key),
                    creds,
                )
                took = time.monotonic() - t
                same[0] = same[0] and sql(target, "CHECKSUM TABLE bench.t") == expected
                target.kill9()
                shutil.rmtree(target.root, ignore_errors=True)
                return took

            return run

        restores = pairs(a.pairs, restore("plain", None), restore("enc", key))
        print(f"[bench] restore (plain, enc): {restores}", file=sys.stderr)
        enc_rate, dec_rate = cipher_rates()

        print()
        print(
            f"database: {data / 2**20:.0f} MiB of row data; dump {info['plain']['uncompressed'] / 2**20:.0f} MiB, "
            f"stored {info['plain']['compressed'] / 2**20:.0f} MiB plain / {info['enc']['compressed'] / 2**20:.0f} "
            f"MiB encrypted; {a.pairs} pairs; restored tables equal: {same[0]}"
        )
        print(f"{'measure':<30}{'plain':>8}{'enc':>8}{'ratio':>7}   per-pair ratios")
        for name, tt in (("backup time (s)", backups), ("restore time (s)", restores)):
            rs = [e / p for p, e in tt]
            print(
                f"{name:<30}{statistics.median(p for p, _ in tt):>8.1f}{statistics.median(e for _, e in tt):>8.1f}"
                f"{statistics.median(rs):>7.2f}   {fmt(rs)}"
            )
        print(
            f"{'backup peak RSS (MiB)':<30}{info['plain']['rss_kib'] / 1024:>8.0f}{info['enc']['rss_kib'] / 1024:>8.0f}"
        )
        print(f"cipher alone, one core: encrypt {enc_rate:.0f} MiB/s, decrypt {dec_rate:.0f} MiB/s")
    finally:
        factory.close()
        s3srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
