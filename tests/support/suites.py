"""`make test` runs the two suites side by side (hack/test-suites.sh): `tests` (unit, and
integration against its own control plane and servers on loopback) and `e2e` (the local cluster).
They share nothing but the machine. The one test that reads both, e2e/test_permissions_used.py,
learns what the `tests` session did from a record it leaves in $MYSQLOP_SUITE_DIR: what it ran,
how many tests failed, and a copy of its control plane's audit log (the control plane's folder is
removed when the session ends).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

ENV = "MYSQLOP_SUITE_DIR"
RECORD = "tests.json"


def folder() -> Path | None:
    """Where the side-by-side run keeps the `tests` session's record (None: one session runs all)."""
    value = os.environ.get(ENV)
    return Path(value) if value else None


def keep_audit_log(log: Path) -> None:
    """A copy of a control plane's audit log for the e2e session, when running side by side."""
    d = folder()
    if d is not None and log.exists():
        shutil.copyfile(log, d / f"audit-{len(list(d.glob('audit-*.log')))}.log")


def write_record(args: list[str], selection: bool, failed: int) -> None:
    d = folder()
    if d is not None:
        record = {"args": args, "selection": selection, "failed": failed}
        (d / f"{RECORD}.tmp").write_text(json.dumps(record))
        (d / f"{RECORD}.tmp").rename(d / RECORD)  # whole, or not there


def read_record() -> dict | None:
    """The `tests` session's record with the audit logs it kept, or None while it runs."""
    d = folder()
    if d is None or not (d / RECORD).exists():
        return None
    return {**json.loads((d / RECORD).read_text()), "audit_logs": sorted(d.glob("audit-*.log"))}
