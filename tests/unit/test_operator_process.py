"""The operator process never holds an S3 client: every S3 call (backups, restores, retention,
the binary-log archive) runs in a Job or the archiver's Pod, which carry no ServiceAccount token.
A tripwire: everything `mysql-operator run` loads (its handlers included) leaves boto3 unloaded,
so an S3 call slipped into the operator fails here before it ships."""

from __future__ import annotations

import subprocess
import sys

OPERATOR_MODULES = (
    "mysql_operator.cli",
    "mysql_operator.operator",
    "mysql_operator.handlers.cluster",
    "mysql_operator.handlers.backups",
    "mysql_operator.handlers.sql",
)


def test_the_operator_process_loads_no_s3_client():
    code = (
        "import importlib, sys\n"
        f"for m in {OPERATOR_MODULES!r}: importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 's3transfer')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"the operator process imports an S3 client: {out.strip()[:300]}"
