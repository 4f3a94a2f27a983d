"""What the operator's ServiceAccount actually asked the API server, from the server's audit log.

Every control plane the tests start (tests/support/controlplane.py) writes an audit log of the
requests ServiceAccounts make outside kube-system to `<workdir>/logs/audit.log` (POLICY): their
creates, updates and patches with their bodies (what the operator wrote, readable back after the
namespace is gone; on its custom resources and Events the answer's too: the status each patch
left), except on Secrets and ServiceAccount tokens (metadata only: who, verb, resource; never a
Secret's value or a token in a log); every other request of theirs as metadata.
`permissions()` turns those logs into (apiGroup, resource[/subresource], verb) triples for the
operator's ServiceAccount, which `e2e/test_permissions_used.py` compares with the declared rules of
mysql_operator/k8s/rbac.py; `operator_requests()` reads its requests on some namespaces back (the
evidence of a failed e2e test, e2e/evidence.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

OPERATOR_SERVICE_ACCOUNT = "mysql-operator"  # every test and the chart's default release name

# the operator's writes are the ones worth reading back; their verbs
WRITES = ["create", "update", "patch"]
# never a body: a Secret's values, a token (a TokenRequest's answer), a review's credentials;
# the Lease a leader renews every 2 s says nothing a test needs and would be most of the log
BODILESS = [
    {"group": "", "resources": ["secrets", "serviceaccounts/token"]},
    {"group": "authentication.k8s.io", "resources": ["tokenreviews"]},
    {"group": "authorization.k8s.io"},
    {"group": "coordination.k8s.io", "resources": ["leases"]},
]

POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        # the controllers (use-service-account-credentials) and CoreDNS: not ours, and most of it
        {"level": "None", "userGroups": ["system:serviceaccounts:kube-system"]},
        {"level": "Metadata", "userGroups": ["system:serviceaccounts"], "resources": BODILESS},
        # The writes of ServiceAccounts with their bodies. An audit policy names users exactly,
        # and the operator's account is `mysql-operator` in namespaces no policy can list in advance
        # (the chart's, each host_operator test's, each integration test's): the rules name the
        # group. In the clusters the tests start, the operator's are the only ServiceAccounts
        # outside kube-system that write (its Jobs and the servers run without a token; the node's
        # helpers, cert-manager and Prometheus authenticate with certificates, not as accounts).
        # Its custom resources and Events with the answer too (the status a patch left, the name
        # an Event got); its other writes with the request alone (the answer repeats the object:
        # a ConfigMap of scripts, a StatefulSet, tens of KB each).
        {
            "level": "RequestResponse",
            "userGroups": ["system:serviceaccounts"],
            "verbs": WRITES,
            "resources": [{"group": "mysql.operator.dev"}, {"group": "", "resources": ["events"]}],
            "omitManagedFields": True,
        },
        {
            "level": "Request",
            "userGroups": ["system:serviceaccounts"],
            "verbs": WRITES,
            "omitManagedFields": True,
        },
        {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
        {"level": "None"},
    ],
}

STARTED: list[Path] = []  # the audit logs of the control planes this process started

# hack/test.sh runs `pytest tests` and `pytest e2e` side by side, then the permissions check on
# its own: each control plane of those runs writes its audit log here, where the check finds it
SUITE_DIR_VARIABLE = "MYSQLOP_SUITE_AUDIT_DIR"


def log_path(logs_dir: Path, name: str) -> Path:
    """Where a control plane named `name` writes its audit log."""
    suite = os.environ.get(SUITE_DIR_VARIABLE)
    return Path(suite) / f"{name}.log" if suite else logs_dir / "audit.log"


def suite_logs() -> list[Path]:
    """The audit logs the runs of this `make test` wrote (none outside it)."""
    suite = os.environ.get(SUITE_DIR_VARIABLE)
    return sorted(Path(suite).glob("*.log")) if suite else []


Permission = tuple[str, str, str]  # (apiGroup, resource or resource/subresource, verb)


def apiserver_args(policy_file: Path, log_file: Path) -> list[str]:
    return [
        f"--audit-policy-file={policy_file}",
        f"--audit-log-path={log_file}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",  # written before the response: complete when a test reads it
    ]


def with_rotated(log: Path) -> list[Path]:
    """An audit log and the files the API server rotated it into (`audit-<time>.log`, when it
    reached its size limit: a local cluster reused across runs gets there within one suite), oldest
    first."""
    return [*sorted(log.parent.glob(f"{log.stem}-*{log.suffix}")), log]


def permissions(
    logs: Iterable[Path], account: str = OPERATOR_SERVICE_ACCOUNT
) -> tuple[set[Permission], set[Permission]]:
    """What ServiceAccounts named `account` (in any namespace) asked for, and what RBAC refused
    them (403 "... cannot ..."; other 403s are admission refusals), as logged. A server-side
    apply that created its object (a PATCH answered 201) used `create` as well: the API server
    authorizes both, and logs the patch."""
    used: set[Permission] = set()
    denied: set[Permission] = set()
    suffix = f":{account}"
    for path in (p for log in logs for p in with_rotated(log)):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if f'{suffix}"' not in line:  # most lines are other accounts': skip the parse
                    continue
                event = json.loads(line)
                user = event.get("user", {}).get("username", "")
                ref = event.get("objectRef")
                if ref is None or not (user.startswith("system:serviceaccount:") and user.endswith(suffix)):
                    continue
                resource = ref.get("resource", "")
                if ref.get("subresource"):
                    resource += "/" + ref["subresource"]
                group, verb = ref.get("apiGroup", ""), event["verb"]
                used.add((group, resource, verb))
                response = event.get("responseStatus", {})
                if verb == "patch" and response.get("code") == 201:
                    used.add((group, resource, "create"))
                if response.get("code") == 403 and " cannot " in response.get("message", ""):
                    denied.add((group, resource, verb))
    return used, denied


def declared(rules: Iterable[dict]) -> set[Permission]:
    """The (apiGroup, resource, verb) triples RBAC rules grant."""
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
