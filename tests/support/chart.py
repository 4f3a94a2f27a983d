"""The Helm chart rendered for tests: its path, helm or a skip, `helm template` and its objects."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "mysql-operator"
KUBE_VERSION = "1.34.0"
RELEASE, RELEASE_NS = "rel", "ops"


def helm_or_skip() -> str:
    from tests.support.controlplane import binary

    try:
        return str(binary("helm"))
    except FileNotFoundError as e:
        if os.environ.get("CI"):
            pytest.fail(f"helm missing in CI: {e}")
        pytest.skip(reason=f"helm is not built: {e}")


class RenderError(Exception):
    pass


def helm_template(values: dict | None = None, *extra: str, namespace: str = RELEASE_NS) -> str:
    """`helm template` of the chart; RenderError carries helm's stderr."""
    helm = helm_or_skip()
    return _helm_template(helm, json.dumps(values or {}, sort_keys=True), extra, namespace)


@functools.lru_cache(maxsize=None)
def _helm_template(helm: str, values_json: str, extra: tuple[str, ...], namespace: str) -> str:
    """One run per distinct input in a test session (the chart does not change meanwhile)."""
    values = json.loads(values_json)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump(values or {}, f)
        f.flush()
        r = subprocess.run(
            [
                helm,
                "template",
                RELEASE,
                str(CHART),
                "--namespace",
                namespace,
                "--kube-version",
                KUBE_VERSION,
                "-f",
                f.name,
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    if r.returncode != 0:
        raise RenderError(r.stderr)
    return r.stdout


# a cluster with the Prometheus Operator's CRDs, as `helm template` is told (it knows no cluster)
MONITORING_APIS = tuple(
    arg
    for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule")
    for arg in ("--api-versions", f"monitoring.coreos.com/v1/{kind}")
)


def render(values: dict | None = None, *extra: str, namespace: str = RELEASE_NS) -> list[dict]:
    """The rendered objects (CRDs included) as dicts."""
    out = helm_template(values, "--include-crds", *extra, namespace=namespace)
    # libyaml's loader: the CRDs make the output large, the pure-Python one takes ~8 times longer
    return [d for d in yaml.load_all(out, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]


def of_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict], kind: str) -> dict:
    found = of_kind(objs, kind)
    assert len(found) == 1, f"expected one {kind}, got {[o['metadata']['name'] for o in found]}"
    return found[0]
