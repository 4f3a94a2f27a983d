"""The chart as users get it: `helm package`, then `helm push` to the OCI registry beside the local
cluster (tests/support/registry.py), installed from there with `helm upgrade --install
oci://...`. Used by the e2e tests' operator install and by `make demo`.

    ref, version, flags = publish(registry, helm, env)   # oci://10.244.0.1:5000/charts/mysql-operator
    helm upgrade --install mysql-operator <ref> --version <version> *flags ...
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "mysql-operator"


def chart_version(chart: Path = CHART) -> str:
    return str(yaml.safe_load((chart / "Chart.yaml").read_text())["version"])


def _helm(helm: str, env: dict, *args: str, stdin: str | None = None) -> str:
    r = subprocess.run([helm, *args], input=stdin, capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"helm {args[0]} {args[1] if len(args) > 1 else ''} failed: {r.stderr[-2000:]}")
    return r.stdout


def publish(registry, helm: str, env: dict, chart: Path = CHART) -> tuple[str, str, list[str]]:
    """Package the chart (this checkout's unless told) and push it; (oci:// reference, version,
    the flags a helm command that reads it needs: the registry's CA)."""
    ca = ["--ca-file", str(registry.ca_file)]
    _helm(
        helm,
        env,
        "registry",
        "login",
        registry.address,
        "--username",
        registry.username,
        "--password-stdin",
        *ca,
        stdin=registry.password,
    )
    with tempfile.TemporaryDirectory() as d:
        _helm(helm, env, "package", str(chart), "--destination", d)
        (archive,) = Path(d).glob("mysql-operator-*.tgz")
        _helm(helm, env, "push", str(archive), f"oci://{registry.address}/charts", *ca)
    return f"oci://{registry.address}/charts/mysql-operator", chart_version(chart), ca
