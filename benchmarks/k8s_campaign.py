"""Fault campaign through the shipped operator and chart on the local cluster (a benchmark, not a
test): seeded schedules of one to three overlapping faults on one 3-instance MySQLCluster, reused
from schedule to schedule; see e2e/campaign_k8s.py for the faults, the monitor and the checker.

Each schedule prints one line; its result is appended, as one JSON line, to
benchmarks/campaign/k8s-<flavor>.jsonl (`benchmarks.fault_campaign --summary` shows them as
"<flavor> (k8s)"). Exit 1 if any schedule failed a check. Replay one schedule: --seed N --count 1
(with the same --kinds). The cluster (namespace campaign-<flavor>) is deleted at the end unless
--keep. Needs the local cluster (`make cluster-up`) and root (ctr, nsenter, iptables).

    .venv/bin/python -m benchmarks.k8s_campaign [--flavor mysql|mariadb] [--seed 1] [--count 10]
    .venv/bin/python -m benchmarks.k8s_campaign --flavor mysql --kinds apiserver,isolate --count 1
    .venv/bin/python -m benchmarks.k8s_campaign --faults 3 --operator-replicas 2 --seed 200 --count 8
    .venv/bin/python -m benchmarks.k8s_campaign --kinds pod-delete --faults 1 --role primary --count 10
        (a deleted primary Pod, ten times: the write gap's p50 and p99 in the second table)
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.fault_campaign import OUT, arguments, report, table
from e2e.campaign_k8s import CLUSTER_WIDE, KINDS, Campaign, k8s_schedule
from tests.support import cluster as cluster_mod


def e2e_sessions() -> list[int]:
    """The pytest processes of this machine running e2e tests (on the same local cluster)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            proc.name.isdigit()
            and b"pytest" in b" ".join(argv[:3])
            and any(a.startswith(b"e2e") for a in argv)
        ):
            pids.append(int(proc.name))
    return pids


def chosen_seeds(
    first: int, count: int, kinds: tuple[str, ...], faults: int | None, role: str | None = None
) -> list[int]:
    """`count` seeds from `first` on: every one, or those whose schedule has `faults` faults (and
    with `role`, only faults on that role)."""
    out, seed = [], first
    while len(out) < count:
        drawn = k8s_schedule(seed, kinds)
        if (faults is None or len(drawn) == faults) and (role is None or all(f.role == role for f in drawn)):
            out.append(seed)
        seed += 1
    return out


def head_commit() -> str:
    """The commit the schedules ran at (with "+" when the working tree differs from it, the
    campaign's own results aside)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent
        ).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + (
        "+"
        if git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks/campaign")
        else ""
    )


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")  # the finally clauses resume what is stopped


def main() -> int:
    ap = arguments(__doc__, "mysql", 10, 300.0)
    ap.add_argument(
        "--kinds",
        help=f"the fault kinds drawn from, comma-separated (default: all: {','.join(KINDS)}; without "
        f"{' and '.join(CLUSTER_WIDE)}, which disturb every namespace on the cluster, while an e2e "
        "session runs on this machine)",
    )
    ap.add_argument(
        "--faults",
        type=int,
        choices=(1, 2, 3),
        help="only schedules of this many faults: the seeds from --seed on whose schedule has another "
        "number are passed over until --count schedules are found (their rows say which seeds ran)",
    )
    ap.add_argument(
        "--role",
        help="only schedules whose faults all hit this role (primary, replica, any), as --faults "
        "passes seeds over: with --kinds pod-delete --faults 1 --role primary, the write gap of a "
        "deleted primary Pod, round after round",
    )
    ap.add_argument(
        "--operator-replicas",
        type=int,
        default=1,
        help="the chart's replicas (default 1; with 2 the fault 'operator' deletes the leader and the "
        "standby takes the Lease over)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the cluster and its namespace at the end")
    ap.add_argument("--dry-run", action="store_true", help="print the schedules only")
    args = ap.parse_args()
    kinds = KINDS
    if args.kinds is not None:
        kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    elif e2e_sessions() and not args.dry_run:
        kinds = tuple(k for k in KINDS if k not in CLUSTER_WIDE)
        print(f"an e2e session runs here (pids {e2e_sessions()}): kinds {','.join(kinds)}", flush=True)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        ap.error(f"--kinds: unknown {unknown or 'nothing given'}; choose from {','.join(KINDS)}")
    seeds = chosen_seeds(args.seed, args.count, kinds, args.faults, args.role)
    if args.dry_run:
        for seed in seeds:
            print(f"seed {seed}: {' + '.join(str(f) for f in k8s_schedule(seed, kinds))}")
        return 0
    state = cluster_mod.running_state()
    if state is None:
        print("no local cluster runs: `make cluster-up` first", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    commit = head_commit()
    campaign = Campaign(state, args.flavor, args.converge, kinds, args.operator_replicas)
    results = []
    try:
        campaign.setup()
        print(f"cluster {campaign.namespace}/{campaign.c.name} ready", flush=True)
        for seed in seeds:
            r = campaign.run(seed)
            results.append(r)
            print(report(r), flush=True)
            if not args.no_record:
                OUT.mkdir(exist_ok=True)
                with open(OUT / f"k8s-{args.flavor}.jsonl", "a") as f:
                    row = {
                        **dataclasses.asdict(r),
                        "ok": r.ok,
                        "kinds": list(kinds),
                        "operator_replicas": args.operator_replicas,
                        "at": time.strftime("%Y-%m-%d"),
                        "commit": commit,
                    }
                    f.write(json.dumps(row) + "\n")
    finally:
        campaign.node.resume_apiserver()
        if not args.keep:
            campaign.delete()
    if results:
        print()
        table([{**dataclasses.asdict(r), "ok": r.ok, "flavor": f"{r.flavor} (k8s)"} for r in results])
    print(f"\nwall time {time.monotonic() - started:.0f} s")
    return 0 if results and all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
