"""The local cluster's NetworkPolicy enforcer (kube-router): where it answers, or a skip."""

from __future__ import annotations

import json
import os
import urllib.request

import pytest

from tests.support import cluster as cluster_mod


def enforcer_health() -> str:
    """The /healthz URL of the cluster's NetworkPolicy enforcer; skip (fail in CI) without one."""
    state_file = cluster_mod.state_dir() / "state.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    why = None
    netpol = state.get("network_policy")
    if not netpol:
        why = (
            "the running local cluster was started without a NetworkPolicy enforcer "
            "(by `make demo`, or before kube-router was added): `make cluster-down && make cluster-up`"
        )
    else:
        try:
            with urllib.request.urlopen(netpol["health"], timeout=3) as r:
                if r.status != 200:
                    why = f"kube-router is unhealthy ({netpol['health']} answered {r.status})"
        except OSError as e:
            why = f"kube-router does not answer at {netpol['health']}: {e}"
    if why:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(reason=why)
    return netpol["health"]
