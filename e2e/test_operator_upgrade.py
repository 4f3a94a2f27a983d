"""Issue 19 on the local cluster: an operator upgrade as a user makes it. The previous release
(hack/versions.env: PREVIOUS_RELEASE_VERSION, built from PREVIOUS_RELEASE_COMMIT: its Dockerfile,
its chart) is installed from the registry beside the cluster (image pulled with a pull Secret,
chart from oci://) and runs a MySQL and a MariaDB cluster of 2 instances, each under writes. Then
`helm upgrade` to this checkout's chart. The previous release's Pod template differs from this
one's (its config hash covered the scripts), so the databases need a restart: it is staged
(RestartPending) and rolled one cluster at a time, each replica first and its primary last after
a switchover; no acknowledged write is lost and both clusters end Ready on the new template.
Measured: the upgrade's duration and the writes refused during each cluster's roll."""

from __future__ import annotations

import re
import subprocess
import tarfile
import threading
import time
from pathlib import Path

import pytest
from kubernetes import client

from e2e.conftest import OPERATOR_NAMESPACE, REPO, helm_env, install_operator
from e2e.helpers import Cluster, cluster_spec, create_writes_table, lost_rows, record, writer_to
from e2e.test_registry_image import _ready_operator_pods, pull_secret
from mysql_operator import rolling
from tests.support import chart_oci
from tests.support.containerd import parse_build_output
from tests.support.controlplane import binary
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster
REPO_IMAGE = "dbteam/mysql-operator"


def previous_release() -> tuple[str, str]:
    values = dict(
        line.split("=", 1)
        for line in (REPO / "hack" / "versions.env").read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    )
    return values["PREVIOUS_RELEASE_VERSION"], values["PREVIOUS_RELEASE_COMMIT"]


def checkout(commit: str, into: Path) -> Path:
    """The tree of `commit` (git archive: no worktree left behind)."""
    if subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"]).returncode != 0:
        why = f"this clone lacks the previous release's commit {commit} (shallow?): git fetch --unshallow"
        pytest.skip(reason=why)
    into.mkdir(parents=True)
    archive = into.parent / "prev.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), commit], check=True)
    with tarfile.open(archive) as t:
        t.extractall(into, filter="data")
    return into


def _db_pods(c: Cluster) -> list:
    """The cluster's database Pods (<name>-<ordinal>)."""
    pods = c.core.list_namespaced_pod(
        c.namespace, label_selector=f"app.kubernetes.io/instance={c.name}"
    ).items
    return [p for p in pods if re.fullmatch(rf"{re.escape(c.name)}-\d+", p.metadata.name)]


class Timeline(threading.Thread):
    """Every 0.5 s: each database Pod (name/uid) and each cluster's currentPrimary, with the time."""

    def __init__(self, clusters: list[Cluster]):
        super().__init__(daemon=True)
        self.clusters, self.stop_event = clusters, threading.Event()
        self.seen: dict[str, float] = {}  # pod name/uid -> when first listed
        self.deleting: dict[str, float] = {}  # -> when first listed with a deletionTimestamp
        self.ready: dict[str, float] = {}  # -> when first listed Ready
        self.primaries: dict[str, list[tuple[float, str]]] = {c.name: [] for c in clusters}

    def run(self) -> None:
        while not self.stop_event.wait(0.5):
            now = time.monotonic()
            for c in self.clusters:
                try:
                    pods = _db_pods(c)
                    primary = c.status().get("currentPrimary")
                except Exception:  # noqa: BLE001 - an API hiccup: the next round sees it
                    continue
                for p in pods:
                    key = f"{p.metadata.name}/{p.metadata.uid}"
                    self.seen.setdefault(key, now)
                    if p.metadata.deletion_timestamp:
                        self.deleting.setdefault(key, now)
                    elif any(x.type == "Ready" and x.status == "True" for x in p.status.conditions or []):
                        self.ready.setdefault(key, now)
                history = self.primaries[c.name]
                if primary and (not history or history[-1][1] != primary):
                    history.append((now, primary))

    def went(self, key: str) -> float:
        """When the Pod began to go: listed as deleting, else (deleted between two rounds) when
        its replacement was first listed."""
        if key in self.deleting:
            return self.deleting[key]
        name = key.split("/")[0]
        return min(t for k, t in self.seen.items() if k.split("/")[0] == name and t > self.seen[key])

    def stop(self) -> None:
        self.stop_event.set()
        self.join(10)


def test_an_upgrade_from_the_previous_release_restarts_one_cluster_at_a_time_and_loses_nothing(
    local_cluster, operator_release, registry_beside_cluster, scenario_namespace, tmp_path
):
    api, ns = local_cluster.api_client(), scenario_namespace
    core = client.CoreV1Api(api)
    version, commit = previous_release()
    prev = checkout(commit, tmp_path / "prev")
    helm, env = str(binary("helm")), helm_env(local_cluster)

    # the previous release, as its users got it: image and chart from the registry
    built = subprocess.run(
        ["bash", str(prev / "hack" / "build-images.sh"), "operator"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (image,) = parse_build_output(built.stdout).values()
    pushed = registry_beside_cluster.push(image.archive, REPO_IMAGE, version)
    ref, published, ca = chart_oci.publish(
        registry_beside_cluster, helm, env, prev / "charts" / "mysql-operator"
    )
    assert published == version, f"the chart at {commit} is {published}, not {version}"
    pull_secret(core, OPERATOR_NAMESPACE, registry_beside_cluster)
    started = time.monotonic()
    try:
        r = install_operator(
            local_cluster,
            "--set",
            f"image.repository={pushed.rsplit(':', 1)[0]}",
            "--set",
            "image.pullPolicy=Always",
            "--set",
            "imagePullSecrets[0].name=regcred",
            published=(ref, version, tuple(ca)),
            values=prev / "examples" / "values-local.yaml",
        )
        assert r.returncode == 0, r.stderr[-3000:]
        wait_for(
            lambda: (
                (p := _ready_operator_pods(core)) and all(x.spec.containers[0].image == pushed for x in p)
            ),
            180,
            f"only the {version} operator runs",
        )
        clusters = [
            Cluster(api, ns, "up-my").create(cluster_spec(2, "mysql")),
            Cluster(api, ns, "up-ma").create(cluster_spec(2, "mariadb")),
        ]
        for c in clusters:
            c.wait_ready(300, instances=2)
        writers = {}
        for c in clusters:
            rw, pw = create_writes_table(c)
            writers[c.name] = (writer_to(rw, "app", pw), rw, pw)
            writers[c.name][0].start()
        wait_for(lambda: all(len(w.acked) >= 20 for w, _, _ in writers.values()), 60, "20 writes each")
        primaries = {c.name: c.status()["currentPrimary"] for c in clusters}
        timeline = Timeline(clusters)
        timeline.start()

        upgrading = time.monotonic()
        r = install_operator(local_cluster)  # this checkout's chart and operator
        assert r.returncode == 0, r.stderr[-3000:]
        staged = []

        def rolled() -> bool:
            for c in clusters:
                pending = next(
                    (x for x in c.status().get("conditions") or [] if x["type"] == "RestartPending"), None
                )
                if pending:
                    staged.append((c.name, pending["reason"], pending["message"]))
            return all(_on_current_template(c) and c.status().get("phase") == "Ready" for c in clusters)

        wait_for(
            rolled,
            600,
            "both clusters restarted on the new template",
            describe=lambda: "\n".join(c.describe() for c in clusters),
        )
        record(
            "operator upgrade: helm upgrade to both clusters rolled",
            time.monotonic() - upgrading,
            scenario="19",
        )
        timeline.stop()
        for w, _, _ in writers.values():
            w.stop()
        for name, (w, rw, pw) in writers.items():
            assert lost_rows(rw, pw, w) == [], f"{name}: acknowledged writes lost"
            print(f"\n{name}: {len(w.acked)} writes acknowledged, {w.failures} refused during the upgrade")

        # one cluster at a time: the second's first restart comes after the first's last Pod is Ready
        windows = {}
        for c in clusters:
            alive = {f"{p.metadata.name}/{p.metadata.uid}" for p in _db_pods(c)}
            mine = [k for k in timeline.seen if k.startswith(f"{c.name}-")]
            went = {k.split("/")[0]: timeline.went(k) for k in mine if k not in alive}
            back = sorted(timeline.ready.get(k, float("inf")) for k in mine if k in alive)
            assert len(went) == 2 and len(back) == 2, f"{c.name}: every Pod restarted once ({went}, {back})"
            windows[c.name] = (min(went.values()), back[-1])
            # the primary last, after a switchover: its Pod went after the other one, and after
            # another instance had become the primary
            old = primaries[c.name]
            assert went[old] == max(went.values()), f"{c.name}: the primary {old} restarted last ({went})"
            moved = [t for t, p in timeline.primaries[c.name] if p != old]
            assert moved and moved[0] < went[old], f"{c.name}: switched over before {old} restarted"
        (a, (a0, a1)), (b, (b0, b1)) = sorted(windows.items(), key=lambda kv: kv[1][0])
        assert a1 <= b0, f"{b} started restarting ({b0:.1f}) before {a}'s Pods were all Ready ({a1:.1f})"
        assert any(name == b and reason == "WaitingForOtherCluster" for name, reason, _ in staged), staged
        print(f"\nrestarts: {a} {a1 - a0:.1f} s, then {b} {b1 - b0:.1f} s; staged: {sorted(set(staged))}")
    finally:
        r = install_operator(local_cluster)  # the release every other test uses
        assert r.returncode == 0, r.stderr[-3000:]
        record("operator upgrade test, total", time.monotonic() - started, scenario="19")


def _on_current_template(c: Cluster) -> bool:
    """Every Pod runs the StatefulSet's update revision, and that is the template the operator wants."""
    sts = client.AppsV1Api(c.api).read_namespaced_stateful_set(c.name, c.namespace)
    notes = sts.metadata.annotations or {}
    applied = notes.get(rolling.APPLIED_TEMPLATE_ANNOTATION)
    if applied is None or applied != notes.get(
        rolling.WANTED_TEMPLATE_ANNOTATION
    ):  # None: not the new operator's yet
        return False
    if sts.status.observed_generation != sts.metadata.generation:
        return False
    pods = _db_pods(c)
    return len(pods) == 2 and all(
        p.metadata.labels.get(rolling.REVISION_LABEL) == sts.status.update_revision for p in pods
    )
