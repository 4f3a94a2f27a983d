"""Documentation that is run (issue 48): every marked shell block of docs/ (`<!-- run: e2e -->`,
tests/support/docs_blocks.py) is executed on the local cluster with the operator installed by its
chart, as written, by bash -euo pipefail, so a page cannot go stale unnoticed. Each walkthrough
(docs_blocks.WALKTHROUGHS) gets a fresh namespace (the kubeconfig's context namespace, as `kubectl
config set-context --current --namespace` sets it); each of its pages runs in one shell, in a
folder of its own, which prints each command and its output. A failure names the page, the line
and the command.

What this machine cannot give the pages is provided, and only that: the examples/ they apply are
the repository's, made runnable here as e2e/examples.py makes them for e2e/test_examples.py (the
image and version of the registry beside the cluster, 1Gi of the local StorageClass, small memory
requests) and with the fewest instances the example allows (one; two for semi-synchronous
replication with one acknowledgement); a backup section's S3 location is a fresh bucket of the MinIO beside the cluster
(its endpoint, path-style addresses), reached with its key pair in AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY, the variables the pages read."""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
import yaml

from e2e.examples import runnable_here
from e2e.helpers import REPO, kubectl, kubectl_binary, record, stopwatch
from tests.support.docs_blocks import WALKTHROUGHS, marked_blocks, script, steps

pytestmark = pytest.mark.cluster

PAGE_TIMEOUT = 900  # s; every wait in the pages has a shorter --timeout of its own


@pytest.mark.parametrize("walkthrough", sorted(WALKTHROUGHS))
def test_the_marked_shell_blocks_of_the_docs_run_as_written(
    local_cluster, operator_release, scenario_namespace, s3_beside_cluster, tmp_path, walkthrough
):
    bucket = f"docs-{uuid.uuid4().hex[:10]}"
    s3_beside_cluster.create_bucket(bucket)
    kubeconfig = tmp_path / "kubeconfig"
    shutil.copyfile(local_cluster.kubeconfig, kubeconfig)
    r = kubectl(str(kubeconfig), "config", "set-context", "--current", f"--namespace={scenario_namespace}")
    assert r.returncode == 0, r.stderr
    env = {
        "PATH": os.pathsep.join(
            [
                str(Path(kubectl_binary()).parent),
                str(Path(sys.executable).parent),
                "/usr/local/bin:/usr/bin:/bin",
            ]
        ),
        "LANG": "C.UTF-8",
        "KUBECONFIG": str(kubeconfig),
        "AWS_ACCESS_KEY_ID": s3_beside_cluster.access_key,
        "AWS_SECRET_ACCESS_KEY": s3_beside_cluster.secret_key,
    }
    assert shutil.which("kubectl-mysql", path=env["PATH"]), "kubectl-mysql is not installed: pip install -e ."
    for page in WALKTHROUGHS[walkthrough]:
        folder = tmp_path / page.removesuffix(".md")
        examples_made_runnable_here(folder / "examples", s3_beside_cluster.endpoint, bucket)
        (folder / "home").mkdir()
        elapsed = stopwatch()
        count = run_page(page, folder, {**env, "HOME": str(folder / "home")}, [s3_beside_cluster.secret_key])
        record(f"docs/{page}: {count} commands run as written", elapsed())


def run_page(page: str, folder: Path, env: dict[str, str], secrets: list[str]) -> int:
    """The marked commands of docs/`page` in one bash in `folder`; fails naming the page, the line
    and the command that failed. How many commands ran."""
    todo = steps(marked_blocks(page, (REPO / "docs" / page).read_text()))
    assert todo, f"docs/{page} has no marked block: mark one or remove the page from docs_blocks.WALKTHROUGHS"
    step_file = folder / "step"
    step_file.write_text("")
    print(f"\n=== docs/{page}: {len(todo)} commands, in {folder}", flush=True)
    proc = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script(todo)],
        cwd=folder,
        env={**env, "DOCS_STEP": str(step_file)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: a timeout ends all of it
    )
    timer = threading.Timer(PAGE_TIMEOUT, _kill_group, (proc.pid,))
    timer.start()
    output = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            for s in secrets:
                line = line.replace(s, "***")
            output.append(line)
            print(line, end="", flush=True)
        rc = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:  # the test was interrupted: its commands stop too
            _kill_group(proc.pid)
    if rc != 0:
        text = step_file.read_text().strip()
        _, command = todo[int(text)] if text else todo[0]
        timed_out = f" (killed after {PAGE_TIMEOUT}s)" if rc == -signal.SIGKILL else ""
        pytest.fail(
            f"docs/{page}:{command.line}: exit {rc}{timed_out} of\n{command.text}\n"
            f"--- the page's output (last 60 lines):\n{''.join(output[-60:])}"
        )
    return len(todo)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
        os.killpg(pid, signal.SIGKILL)


def examples_made_runnable_here(folder: Path, s3_endpoint: str, bucket: str) -> None:
    """examples/ copied to `folder`, each MySQLCluster in it runnable here (the module's docstring)."""
    folder.mkdir(parents=True)
    for source in sorted((REPO / "examples").glob("*.yaml")):
        docs = list(yaml.safe_load_all(source.read_text()))
        if not any(isinstance(d, dict) and d.get("kind") == "MySQLCluster" for d in docs):
            shutil.copyfile(source, folder / source.name)
            continue
        made = [
            _runnable(d, s3_endpoint, bucket)
            if isinstance(d, dict) and d.get("kind") == "MySQLCluster"
            else d
            for d in docs
        ]
        (folder / source.name).write_text(yaml.safe_dump_all(made, sort_keys=False))


def _runnable(doc: dict, s3_endpoint: str, bucket: str) -> dict:
    backup = copy.deepcopy(doc["spec"].get("backup"))
    made = runnable_here(copy.deepcopy(doc))
    spec = made["spec"]
    replication = spec.get("replication") or {}
    fewest = 1 + (
        replication.get("semiSyncAcks", 1) if replication.get("mode", "semisync").lower() == "semisync" else 0
    )
    spec["instances"] = min(spec["instances"], fewest)
    if backup:
        backup["storage"]["s3"].update(
            bucket=bucket, endpoint=s3_endpoint, region="us-east-1", forcePathStyle=True
        )
        spec["backup"] = backup
    return made
