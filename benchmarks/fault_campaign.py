"""Fault campaign (a benchmark, not a test): seeded schedules of one to three overlapping faults
on three real servers run by the operator's own engine; see tests/support/campaign.py for the
faults, the writer, the monitor and the checker.

Each schedule runs on new servers and prints one line; its result is appended, as one JSON
line, to benchmarks/campaign/<flavor>.jsonl (kept in the repository: seeds and outcomes). The
table at the end sums the runs of this invocation: schedules, how many with three faults,
acknowledged writes lost, two-writable samples, -rw misrouted samples, schedules that did not
reach full strength, and write unavailability p50/p99 per fault kind (over the schedules that
had that kind). --summary includes benchmarks.k8s_campaign's results (k8s-<flavor>.jsonl: the
operator and chart on the local cluster) as their own rows, flavor "<flavor> (k8s)". Exit 1 if any schedule failed a check. Replay one schedule: --seed N --count 1. --summary prints
the tables over every result kept in benchmarks/campaign/. --volumes draws from VOLUME_KINDS (a
replica's volume filling up too; replay such a row, which records its kinds, with --volumes).

    .venv/bin/python -m benchmarks.fault_campaign [--flavor mariadb|mysql] [--seed 1] [--count 20] [--volumes]
    .venv/bin/python -m benchmarks.fault_campaign --summary
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.failover_bench import percentile
from tests.support.campaign import KINDS, VOLUME_KINDS, Result, Run
from tests.support.mariadb import MariaDBFactory, missing_binaries
from tests.support.mysql import MySQLFactory, mysql_unavailable

OUT = Path(__file__).resolve().parent / "campaign"


def table(rows: list[dict]) -> None:
    """The campaign's tables over result rows (Result as dicts: a run's, or benchmarks/campaign/)."""
    print(
        "| flavor | schedules | with 3 faults | acknowledged writes | lost | two-writable samples | "
        "misrouted samples | not at full strength | held out (no re-seed on this host) | failed a check |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for flavor in sorted({r["flavor"] for r in rows}):
        mine = [r for r in rows if r["flavor"] == flavor]
        print(
            f"| {flavor} | {len(mine)} | {sum(len(r['faults']) == 3 for r in mine)} "
            f"| {sum(r['acked'] for r in mine)} | {sum(r['lost'] for r in mine)} "
            f"| {sum(r['two_writable'] for r in mine)} | {sum(r['misrouted'] for r in mine)} "
            f"| {sum(not r['converged'] and not r['held_out'] for r in mine)} "
            f"| {sum(bool(r['held_out']) for r in mine)} | {sum(not r['ok'] for r in mine)} |"
        )
    print()
    print("| flavor | fault kind | schedules with it | longest write gap p50 | p99 |")
    print("|---|---|---:|---:|---:|")
    # the host campaign's kinds first, then those of benchmarks.k8s_campaign
    kinds = dict.fromkeys([*KINDS, *sorted({f.split("(")[0] for r in rows for f in r["faults"]})])
    for flavor in sorted({r["flavor"] for r in rows}):
        for kind in kinds:
            gaps = [
                r["unavailable_seconds"]
                for r in rows
                if r["flavor"] == flavor and any(f.startswith(kind + "(") for f in r["faults"])
            ]
            if gaps:
                print(
                    f"| {flavor} | {kind} | {len(gaps)} | {percentile(gaps, 50):.1f} s | {percentile(gaps, 99):.1f} s |"
                )


def operator_commit() -> str:
    """The commit whose operator ran the schedules ("+changes": with uncommitted changes to it)."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True).stdout.strip()

    return git("rev-parse", "--short=10", "HEAD") + (
        "+changes" if git("status", "--porcelain", "mysql_operator") else ""
    )


def _row(path: Path, row: dict) -> dict:
    """A kept result; those of benchmarks.k8s_campaign (k8s-<flavor>.jsonl) as flavor "<flavor> (k8s)",
    those of an earlier operator or harness (earlier/<flavor>-<what differed>.jsonl) as
    "<flavor>, <what differed>"."""
    if path.parent.name == "earlier":
        return {**row, "flavor": f"{row['flavor']}, {path.stem.split('-', 1)[1].replace('-', ' ')}"}
    return {**row, "flavor": f"{row['flavor']} (k8s)"} if path.name.startswith("k8s-") else row


def report(r: Result) -> str:
    """One schedule's outcome in two lines (what the campaigns print as they go)."""
    outcome = "ok" if r.ok else f"FAILED: {r.error or 'see the counts'}"
    return (
        f"seed {r.seed}: {' + '.join(r.faults)} -> lost {r.lost}/{r.acked}, two writable {r.two_writable}, "
        f"misrouted {r.misrouted} of {r.samples} samples, full strength "
        + (f"in {r.converge_seconds:.1f}s" if r.converge_seconds is not None else "never")
        + (f" ({r.held_out})" if r.held_out else "")
        + f", longest write gap {r.unavailable_seconds:.1f}s, failovers {r.failovers}: {outcome}"
        + "\n  applied: "
        + "; ".join(r.applied)
    )


def arguments(doc: str, flavor: str, count: int, converge: float) -> argparse.ArgumentParser:
    """The options both campaigns take (this one's and benchmarks.k8s_campaign's)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--flavor", choices=("mariadb", "mysql"), default=flavor)
    ap.add_argument("--seed", type=int, default=1, help="the first schedule's seed")
    ap.add_argument("--count", type=int, default=count, help="schedules: seeds seed .. seed+count-1")
    ap.add_argument(
        "--converge", type=float, default=converge, help="seconds to full strength after the last fault"
    )
    ap.add_argument("--no-record", action="store_true", help="do not append to benchmarks/campaign/")
    return ap


def main() -> int:
    ap = arguments(__doc__, "mariadb", 20, 180.0)
    ap.add_argument(
        "--summary",
        action="store_true",
        help="only the tables over benchmarks/campaign/ (earlier/: rows of an earlier operator or harness)",
    )
    ap.add_argument(
        "--volumes",
        action="store_true",
        help="draw from the kinds with a replica's volume filling up too (data directories on tmpfs: root)",
    )
    args = ap.parse_args()
    if args.summary:
        table(
            [
                _row(f, json.loads(line))
                for f in sorted(OUT.glob("*.jsonl")) + sorted(OUT.glob("earlier/*.jsonl"))
                for line in f.read_text().splitlines()
            ]
        )
        return 0
    why = mysql_unavailable() if args.flavor == "mysql" else None
    if args.flavor == "mariadb" and missing_binaries():
        why = f"MariaDB server binaries missing ({', '.join(missing_binaries())}): run hack/install-deps.sh"
    if why:
        print(f"cannot run {args.flavor} servers: {why}", file=sys.stderr)
        return 2
    factory = MySQLFactory() if args.flavor == "mysql" else MariaDBFactory()
    results = []
    started = time.monotonic()
    try:
        for seed in range(args.seed, args.seed + args.count):
            r = Run(
                factory, args.flavor, seed, args.converge, VOLUME_KINDS if args.volumes else KINDS
            ).execute()
            results.append(r)
            print(report(r), flush=True)
            if not r.ok:
                print(factory.logs_report(15), file=sys.stderr)
            if not args.no_record:
                OUT.mkdir(exist_ok=True)
                with open(OUT / f"{args.flavor}.jsonl", "a") as f:
                    f.write(
                        json.dumps(
                            {
                                **dataclasses.asdict(r),
                                "ok": r.ok,
                                "at": time.strftime("%Y-%m-%d"),
                                "commit": operator_commit(),
                            }
                        )
                        + "\n"
                    )
    finally:
        factory.close()

    print()
    table([{**dataclasses.asdict(r), "ok": r.ok} for r in results])
    print(f"\nwall time {time.monotonic() - started:.0f} s")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
