"""The operator as a process on this host (`mysql-operator run`), for tests and benchmarks that
watch it against a real API server: one way to start it, so they all run what ships.

    proc = start(namespace, kubeconfig, log_path, "--loop-seconds", "1")
    ...
    controlplane.stop_group(proc, 20)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def start(
    namespace: str,
    kubeconfig: str | Path,
    log_path: str | Path,
    *options: str,
    env: dict[str, str] | None = None,
    cwd: str | Path = REPO,
) -> subprocess.Popen:
    """`mysql-operator run --namespace NS --kubeconfig K [options]` in a process group of its own
    (stop it with controlplane.stop_group), its output appended to `log_path`. The kubeconfig
    given is the only one it sees: KUBECONFIG and the in-cluster variables are left out of its
    environment; `env` adds to it. `cwd`: the checkout whose operator runs."""
    environment = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    environment.update(env or {})
    argv = [
        sys.executable,
        "-m",
        "mysql_operator.cli",
        "run",
        "--namespace",
        namespace,
        "--kubeconfig",
        str(kubeconfig),
        *options,
    ]
    with open(log_path, "ab") as out:  # the child keeps its own descriptor
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=environment, cwd=cwd, start_new_session=True
        )
