"""The e2e timing table: cluster creation to Ready, failover (Pod deleted / container killed) to
the first accepted write, switchover, backup and restore durations, rows lost.

    .venv/bin/python benchmarks/e2e_timings.py            # runs e2e/test_scenarios_*.py, then prints
    .venv/bin/python benchmarks/e2e_timings.py --print    # prints the table of the last run

The scenarios record their numbers (e2e/helpers.py: record) and the session writes them to
artifacts/e2e/timings.json. Numbers only: never part of pass/fail.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from e2e.helpers import TIMINGS_FILE, format_table  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--print", action="store_true", help="only print the table of the last run")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (e.g. -k failover)")
    args = ap.parse_args()
    rc = 0
    if not args.print:
        files = sorted(str(p.relative_to(REPO)) for p in (REPO / "e2e").glob("test_scenarios_*.py"))
        rc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", *files, *args.pytest_args], cwd=REPO
        ).returncode
    if not TIMINGS_FILE.exists():
        print(f"no timings at {TIMINGS_FILE}: run the scenarios first", file=sys.stderr)
        return rc or 1
    print(format_table(json.loads(TIMINGS_FILE.read_text())))
    return rc


if __name__ == "__main__":
    sys.exit(main())
