"""The permissions check reads an audit log with the files the API server rotated it into: a local
cluster reused across runs rotated its log (100 MB) during a suite, and the check, reading only
audit.log, called three verbs the operator had used "never used" (the clean-clone run at 2c96de9)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import audit


def entry(resource: str, verb: str) -> str:
    return json.dumps(
        {
            "user": {"username": f"system:serviceaccount:mysql-operator:{audit.OPERATOR_SERVICE_ACCOUNT}"},
            "objectRef": {"resource": resource, "apiGroup": "coordination.k8s.io"},
            "verb": verb,
            "responseStatus": {"code": 201},
        }
    )


def test_a_rotated_audit_log_is_read_with_the_current_one(tmp_path: Path):
    (tmp_path / "audit-2026-12-03T19-52-28.461.log").write_text(entry("leases", "create") + "\n")
    (tmp_path / "audit.log").write_text(entry("leases", "update") + "\n")
    (tmp_path / "other.log").write_text(entry("leases", "delete") + "\n")  # another server's
    log = tmp_path / "audit.log"
    assert [p.name for p in audit.with_rotated(log)] == ["audit-2026-12-03T19-52-28.461.log", "audit.log"]
    used, denied = audit.permissions([log])
    assert used == {("coordination.k8s.io", "leases", "create"), ("coordination.k8s.io", "leases", "update")}
    assert denied == set()
