"""Streaming multipart upload: ours (`upload.upload_stream`) vs boto3's transfer manager.

    .venv/bin/python -m benchmarks.upload_bench [--mib 512] [--part-mib 16] [--in-flight 2] [--pairs 3]

Starts MinIO on loopback (tests/support/s3.py) and uploads the same stream of --mib MiB with:
- ours: `upload.upload_stream` (a fixed pool of in_flight+1 part buffers filled straight from the
  pipe, one uploader thread, sha256 while reading);
- tm: `client.upload_fileobj` with TransferConfig(multipart_chunksize=part, multipart_threshold=part,
  max_concurrency=in_flight) and its other settings as shipped (it keeps up to 10 parts in memory),
  reading a file object whose read() hashes sha256 too;
- tm-bounded: the same with max_in_memory_upload_chunks=in_flight+1, the memory bound ours has.
Each upload runs in its own Python process (its peak RSS is that process's ru_maxrss) reading from a
pipe (enlarged as the backup enlarges it) that another process fills with one 1 MiB block of
random bytes repeated (incompressible; the producer costs a memcpy). Both use
`storage.make_client`, so both send the same requests (no per-part checksums). The variants run in
rounds, rotating which goes first, after a sync; each round gives each variant's time over ours,
and the table shows medians. Every upload's size and sha256 are checked. Not part of the test suite.
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
from pathlib import Path

from tests.support import s3 as s3support

VARIANTS = ("ours", "tm", "tm-bounded")

PRODUCER = r"""
import os, random, sys
block, left = memoryview(random.Random(16).randbytes(1 << 20)), int(sys.argv[1])
while left:
    left -= os.write(1, block[: min(left, len(block))])
"""

CHILD = r"""
import hashlib, json, os, resource, subprocess, sys, time
from boto3.s3.transfer import TransferConfig
from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import storage
from mysql_operator.backup import upload
from mysql_operator.backup.pipeline import enlarge_pipes

a = json.loads(sys.argv[1])
s3 = S3(bucket=a["bucket"], credentials_secret=SecretKeys("x"), endpoint=a["endpoint"], force_path_style=True)
client = storage.make_client(s3, storage.Credentials(a["ak"], os.environ["SK"]))
client.list_objects_v2(Bucket=a["bucket"], MaxKeys=1)  # connect and sign once before timing
part, in_flight = a["part"], a["in_flight"]


def rss_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])


class HashingReader:
    # the file object upload_fileobj reads: what we would pass it, since we need the sha256
    def __init__(self, f):
        self.f, self.digest, self.size, self.parts = f, hashlib.sha256(), 0, 0

    def read(self, n=-1):
        data = self.f.read(n)
        self.digest.update(data)
        self.size += len(data)
        self.parts += bool(data)
        return data


before = rss_kib()
producer = subprocess.Popen([sys.executable, "-c", a["producer"], str(a["size"])], stdout=subprocess.PIPE)
enlarge_pipes(producer.stdout)
fd = producer.stdout.fileno()
t = time.monotonic()
if a["variant"] == "ours":
    up = upload.upload_stream(client, s3, a["key"], lambda view: os.readv(fd, [view]), part_size=part,
                               in_flight=in_flight)
    size, sha, parts = up.size, up.sha256, up.parts
else:
    config = TransferConfig(multipart_threshold=part, multipart_chunksize=part, max_concurrency=in_flight,
                            use_threads=True)
    if a["variant"] == "tm-bounded":  # s3transfer's setting, not in boto3's TransferConfig.__init__
        config.max_in_memory_upload_chunks = in_flight + 1
    reader = HashingReader(producer.stdout)
    client.upload_fileobj(reader, a["bucket"], a["key"], Config=config)
    size, sha, parts = reader.size, reader.digest.hexdigest(), reader.parts
took = time.monotonic() - t
assert producer.wait() == 0
print(json.dumps({"s": took, "size": size, "sha256": sha, "parts": parts, "rss_before_kib": before,
                  "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def run(variant: str, a, s3srv, bucket: str) -> dict:
    key = f"bench-{variant}"
    args = {
        "variant": variant,
        "bucket": bucket,
        "endpoint": s3srv.endpoint,
        "ak": s3srv.access_key,
        "key": key,
        "size": a.mib * 2**20,
        "part": a.part_mib * 2**20,
        "in_flight": a.in_flight,
        "producer": PRODUCER,
    }
    os.sync()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)],
        env={**os.environ, "SK": s3srv.secret_key},
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise RuntimeError(f"{variant} failed:\n{out.stderr}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    stored = s3srv.client().head_object(Bucket=bucket, Key=key)["ContentLength"]
    assert r["size"] == stored == args["size"], (variant, r["size"], stored)
    s3srv.client().delete_object(Bucket=bucket, Key=key)
    return r


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=512, help="stream length")
    ap.add_argument("--part-mib", type=int, default=16)
    ap.add_argument(
        "--in-flight", type=int, default=2, help="upload_stream's in_flight; tm's max_concurrency"
    )
    ap.add_argument("--pairs", type=int, default=3, help="rounds of every variant")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="upload-bench-"))
    s3srv = s3support.S3Server(root=work / "s3").start()
    try:
        bucket = s3srv.create_bucket("bench")
        runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
        for i in range(a.pairs):
            order = VARIANTS[i % len(VARIANTS) :] + VARIANTS[: i % len(VARIANTS)]
            for v in order:
                r = run(v, a, s3srv, bucket)
                runs[v].append(r)
                print(
                    f"[bench] round {i + 1} {v}: {r['s']:.2f}s, peak RSS {r['peak_rss_kib'] / 1024:.0f} MiB",
                    file=sys.stderr,
                )
        digests = {r["sha256"] for rs in runs.values() for r in rs}
        assert len(digests) == 1, digests
        print()
        print(
            f"{a.mib} MiB stream from a pipe, part size {a.part_mib} MiB, in_flight/max_concurrency "
            f"{a.in_flight}, {a.pairs} rounds; sizes and sha256 equal in every run: True"
        )
        print(
            f"{'variant':<12}{'time (s)':>10}{'MiB/s':>8}{'peak RSS':>10}{'RSS before':>12}"
            f"{'parts':>7}{'time/ours':>11}   per-round time/ours"
        )
        for v in VARIANTS:
            rs = runs[v]
            t = statistics.median(r["s"] for r in rs)
            ratios = [r["s"] / o["s"] for r, o in zip(rs, runs["ours"])]
            print(
                f"{v:<12}{t:>10.2f}{a.mib / t:>8.0f}{max(r['peak_rss_kib'] for r in rs) / 1024:>9.0f}M"
                f"{statistics.median(r['rss_before_kib'] for r in rs) / 1024:>11.0f}M{rs[0]['parts']:>7}"
                f"{statistics.median(ratios):>11.2f}   {' '.join(f'{x:.2f}' for x in ratios)}"
            )
        print(
            "time: the upload call alone (median); peak RSS: max over the rounds of the uploading "
            "process's ru_maxrss;\nRSS before: that process after imports, before the upload"
        )
    finally:
        s3srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
