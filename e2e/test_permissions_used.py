"""The operator's RBAC is exactly what it uses, over the whole suite, both ways.

From the audit logs of the API servers of this session (the integration control plane and the
local cluster, tests/support/audit.py): no request of the operator's ServiceAccount was refused
by RBAC for a permission the chart does not grant (in the integration tests and in every e2e
scenario, where the operator runs as that account), and every verb declared in mysql_operator/k8s/rbac.py was asked for at least once - a
declared verb never used is a grant the operator does not need, or a path no test takes. It runs last (e2e/conftest.py orders it) and only over the whole suite: a
selection would leave permissions unused that the rest of the suite uses (it skips, saying so).
`make test` (hack/test.sh) runs it on its own after `pytest tests` and `pytest e2e`, over the
audit logs both wrote to one directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mysql_operator.k8s import rbac
from tests.support import audit
from tests.support import cluster as cluster_mod

pytestmark = pytest.mark.cluster
# set by hack/test.sh for this check, after `pytest tests` and `pytest e2e` ran whole: their exit statuses
SUITE_RAN_VARIABLE = "MYSQLOP_SUITE_RAN"
REPO = Path(__file__).resolve().parents[1]

# Declared for a configuration the suite runs only to see it refused or rendered: kopf's peering
# objects (the chart's `peering.enabled`, not the default leader election).
NOT_EXERCISED = audit.declared(rbac.PEERING_RULES_NAMESPACED + rbac.PEERING_RULES_CLUSTER)


def whole_suite(config) -> str | None:
    """None when this session runs every test of `tests` and `e2e`, or is the last step of
    hack/test.sh (which ran both whole, side by side); else why not."""
    if os.environ.get(SUITE_RAN_VARIABLE):
        return None
    if {Path(a).resolve() for a in config.args} != {REPO / "tests", REPO / "e2e"}:
        return f"this session selected {config.args}, not `tests e2e`"
    if config.option.keyword or config.option.markexpr or config.option.deselect:
        return "this session runs a selection (-k, -m or --deselect)"
    return None


def failed_before(in_this_session: int) -> str:
    """What failed before this check ran: tests of this session, or runs of hack/test.sh (its
    SUITE_RAN_VARIABLE is each run's exit status, e.g. `tests=0 e2e=1`)."""
    if in_this_session:
        return f"{in_this_session} tests"
    ran = dict(part.split("=", 1) for part in os.environ.get(SUITE_RAN_VARIABLE, "").split())
    return " and ".join(f"tests of `pytest {run}`" for run, status in ran.items() if status != "0")


def test_every_declared_permission_was_used(request):
    why = whole_suite(request.config)
    if why:
        pytest.skip(reason=f"needs the whole suite (`make test`): {why}")
    logs = set(audit.STARTED) | set(audit.suite_logs())
    if cluster_mod.running_state() is not None:
        logs.add(cluster_mod.state_dir() / "control-plane" / "logs" / "audit.log")
    missing = sorted(str(p) for p in logs if not p.exists())
    assert len(logs) == 2 and not missing, (
        f"audit logs expected from the two API servers of the suite, have {sorted(map(str, logs))}, "
        f"missing {missing}: a local cluster started before audit logging existed? `make cluster-down`"
    )
    used, denied = audit.permissions(logs)
    every = audit.declared(rbac.namespaced_rules() + rbac.CLUSTER_SCOPE_RULES + rbac.LEADER_ELECTION_RULES)
    # a refusal of a declared verb is a binding not there yet or gone already (a chart installed
    # or uninstalled around a running operator Pod); one of an undeclared verb is a missing grant
    ungranted = denied - every - NOT_EXERCISED
    assert not ungranted, f"RBAC refused the operator what the chart does not grant: {sorted(ungranted)}"
    unused = "\n".join(
        f"  {group or 'core'} {resource} {verb}"
        for group, resource, verb in sorted(every - used - NOT_EXERCISED)
    )
    earlier = failed_before(request.session.testsfailed)
    if unused and earlier:  # still a failure, but say what may explain it
        unused += f"\n({earlier} failed before this one: a path they did not finish may use these)"
    assert not unused, "declared, never used:\n" + unused
    print(f"\n{len(every)} declared permissions, all used, none missing ({len(logs)} audit logs)")
