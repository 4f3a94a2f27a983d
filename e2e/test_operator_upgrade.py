"""Issue 19 on the local cluster: an operator upgrade as a user makes it. The previous release
(hack/versions.env: PREVIOUS_RELEASE_VERSION, built from PREVIOUS_RELEASE_COMMIT: its Dockerfile,
its chart) is installed from the registry beside the cluster (image pulled with a pull Secret,
chart from oci://) and runs a MySQL cluster of 3 instances and a MariaDB one of 2, each under
writes. Then `helm upgrade` to this checkout's chart with operatorUpgrades=Manual: the previous
release's Pod template differs from this one's (its config hash covered the scripts), so each
cluster's restart is staged (RestartPending, WaitingForApproval) and no database Pod restarts, no
write is refused, the CRD has the new version's fields and `helm test` passes. Approved (one
cluster by its annotation, the other by spec.operatorUpgrades: Auto), they roll one cluster at a
time, each replica first and its primary last after a switchover; no acknowledged write is lost,
writes are refused only during a cluster's own restart, and both clusters end Ready on the new
template. Measured: each phase's duration and the bursts of refused writes."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import tarfile
import threading
import time
from pathlib import Path

import pytest
from kubernetes import client

from e2e.conftest import OPERATOR_NAMESPACE, REPO, helm_env, install_operator
from e2e.helpers import (
    CLUSTERS,
    GROUP,
    VERSION,
    Cluster,
    cluster_spec,
    create_writes_table,
    lost_rows,
    record,
    writer_to,
)
from e2e.operator_install import ready_operator_pods, delete_test_pod, helm_test, pull_secret
from mysql_operator import clock, rolling
from tests.support import chart_oci
from tests.support.containerd import parse_build_output
from tests.support.controlplane import binary
from tests.support.wait import wait_for
from tests.support.writer import failures_said

pytestmark = [pytest.mark.cluster, pytest.mark.exclusive]  # disturbs the chart's operator
REPO_IMAGE = "dbteam/mysql-operator"
INSTANCES = {"up-my": 3, "up-ma": 2}  # MySQL as the 3 instances; MariaDB 2 (a 2-core machine)


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
        self.asked: dict[str, dt.datetime] = {}  # -> when its deletion was asked (API server, to the second)
        # each cluster's currentPrimary when it changed, with its primarySince (operator, microseconds)
        self.primaries: dict[str, list[tuple[float, str, str | None]]] = {c.name: [] for c in clusters}

    def run(self) -> None:
        while not self.stop_event.wait(0.5):
            now = time.monotonic()
            for c in self.clusters:
                try:
                    pods = _db_pods(c)
                    status = c.status()
                    primary = status.get("currentPrimary")
                except Exception:  # noqa: BLE001 - an API hiccup: the next round sees it
                    continue
                for p in pods:
                    key = f"{p.metadata.name}/{p.metadata.uid}"
                    self.seen.setdefault(key, now)
                    if p.metadata.deletion_timestamp:
                        self.deleting.setdefault(key, now)
                        grace = dt.timedelta(seconds=p.metadata.deletion_grace_period_seconds or 0)
                        self.asked.setdefault(key, p.metadata.deletion_timestamp - grace)
                    elif any(x.type == "Ready" and x.status == "True" for x in p.status.conditions or []):
                        self.ready.setdefault(key, now)
                history = self.primaries[c.name]
                if primary and (not history or history[-1][1] != primary):
                    history.append((now, primary, status.get("primarySince")))

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


def _upgrade_state(api, clusters: list[Cluster]) -> str:
    """What decides whether a restart is staged: each StatefulSet's template records and who
    wrote it last (managedFields), and which operator Pods run which image."""
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    lines = []
    for c in clusters:
        sts = apps.read_namespaced_stateful_set(c.name, c.namespace)
        notes = {
            k: v for k, v in (sts.metadata.annotations or {}).items() if k.startswith("mysql.operator.dev/")
        }
        lines.append(f"{c.name} StatefulSet generation {sts.metadata.generation}: {notes}")
        lines += [
            f"  managed by {f.manager} {f.operation} at {f.time}" for f in sts.metadata.managed_fields or []
        ]
    for p in core.list_namespaced_pod(OPERATOR_NAMESPACE).items:
        statuses = p.status.container_statuses or []
        lines.append(
            f"operator Pod {p.metadata.name}: {[s.image_id for s in statuses]} started "
            f"{p.status.start_time} deleting {p.metadata.deletion_timestamp}"
        )
    return "\n".join(lines)


@pytest.mark.causes("Switchover")  # each cluster's roll moves its primary before restarting it
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
                ready_operator_pods(core)
                # and no other operator left, not even one still stopping (it could take the
                # clusters created next before it lets go of its Lease)
                and all(
                    x.spec.containers[0].image == pushed
                    for x in core.list_namespaced_pod(OPERATOR_NAMESPACE).items
                    if any(o.kind == "ReplicaSet" for o in x.metadata.owner_references or [])
                )
            ),
            180,
            f"only the {version} operator runs",
        )
        clusters = [
            Cluster(api, ns, "up-my").create(cluster_spec(INSTANCES["up-my"], "mysql")),
            Cluster(api, ns, "up-ma").create(cluster_spec(INSTANCES["up-ma"], "mariadb")),
        ]
        for c in clusters:
            c.wait_ready(300, instances=INSTANCES[c.name])
        writers = {}
        for c in clusters:
            rw, pw = create_writes_table(c)
            writers[c.name] = (writer_to(rw, "app", pw), rw, pw)
            writers[c.name][0].start()
        wait_for(lambda: all(len(w.acked) >= 20 for w, _, _ in writers.values()), 60, "20 writes each")
        primaries = {c.name: c.status()["currentPrimary"] for c in clusters}
        before = {c.name: _pod_runs(c) for c in clusters}
        timeline = Timeline(clusters)
        timeline.start()

        # 1. this checkout's chart and operator, restarts waiting for approval: nothing restarts
        upgrading = time.monotonic()
        r = install_operator(local_cluster, "--set", "operatorUpgrades=Manual")
        assert r.returncode == 0, r.stderr[-3000:]
        staged: list[tuple[str, str, str]] = []

        def pending(c: Cluster) -> str | None:
            cond = next(
                (x for x in c.status().get("conditions") or [] if x["type"] == "RestartPending"), None
            )
            if cond:
                staged.append((c.name, cond["reason"], cond["message"]))
            return cond and cond["reason"]

        wait_for(
            lambda: all(pending(c) == "WaitingForApproval" for c in clusters),
            180,
            "both clusters' restarts staged, waiting for approval",
            describe=lambda: "\n".join([*(c.describe() for c in clusters), _upgrade_state(api, clusters)]),
        )
        record(
            "operator upgrade: helm upgrade to both restarts staged",
            time.monotonic() - upgrading,
            scenario="19",
        )
        ext = client.ApiextensionsV1Api(api)
        wait_for(
            lambda: "operatorUpgrades" in _spec_fields(ext),
            120,
            "the new operator applied its CRD (spec.operatorUpgrades is new in this version)",
        )
        try:
            tested = helm_test(local_cluster)
        finally:
            delete_test_pod(api, "mysql-operator")
        assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]
        for c in clusters:
            assert _pod_runs(c) == before[c.name], f"{c.name}: a database Pod restarted before any approval"
        approving = time.monotonic()
        for name, (w, _, _) in writers.items():
            refused = [t for t in w.failure_times if t >= upgrading]
            assert refused == [], (
                f"{name}: {len(refused)} writes refused while only the operator changed:\n"
                + failures_said(w, upgrading)
            )

        # 2. approved: one by its annotation, the other by its spec: one cluster at a time
        objs = client.CustomObjectsApi(api)
        objs.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            CLUSTERS,
            "up-my",
            {"metadata": {"annotations": {rolling.APPROVE_RESTART_ANNOTATION: "true"}}},
        )
        objs.patch_namespaced_custom_object(
            GROUP, VERSION, ns, CLUSTERS, "up-ma", {"spec": {"operatorUpgrades": "Auto"}}
        )

        def rolled() -> bool:
            for c in clusters:
                pending(c)
            return all(_on_current_template(c) and c.status().get("phase") == "Ready" for c in clusters)

        wait_for(
            rolled,
            600,
            "both clusters restarted on the new template",
            describe=lambda: "\n".join(c.describe() for c in clusters),
        )
        record(
            "operator upgrade: approval to both clusters rolled", time.monotonic() - approving, scenario="19"
        )
        wait_for(
            lambda: all(
                f"{p.metadata.name}/{p.metadata.uid}" in timeline.ready for c in clusters for p in _db_pods(c)
            ),
            30,
            "the timeline saw every Pod Ready",
        )
        timeline.stop()
        for w, _, _ in writers.values():
            w.stop()

        # one cluster at a time: the second's first restart comes after the first's last Pod is Ready
        windows = {}
        for c in clusters:
            alive = {f"{p.metadata.name}/{p.metadata.uid}" for p in _db_pods(c)}
            mine = [k for k in timeline.seen if k.startswith(f"{c.name}-")]
            went = {k.split("/")[0]: timeline.went(k) for k in mine if k not in alive}
            back = sorted(timeline.ready.get(k, float("inf")) for k in mine if k in alive)
            n = INSTANCES[c.name]
            assert len(went) == n and len(back) == n, f"{c.name}: every Pod restarted once ({went}, {back})"
            windows[c.name] = (min(went.values()), back[-1])
            # the primary last, after a switchover: its Pod went after the others, and after
            # another instance had become the primary
            old = primaries[c.name]
            assert went[old] == max(went.values()), f"{c.name}: the primary {old} restarted last ({went})"
            moved = [(t, since) for t, p, since in timeline.primaries[c.name] if p != old]
            assert moved, f"{c.name}: never switched over from {old}"
            if moved[0][0] == went[old]:
                # one round of the timeline saw both (they can come tenths of a second apart): the
                # switchover's record (microseconds) is not after the second the deletion was asked in
                key = next(k for k in mine if k.split("/")[0] == old and k not in alive)
                since = clock.parse(moved[0][1][:19] + "Z") if moved[0][1] else None
                assert since is not None and key in timeline.asked and since <= timeline.asked[key], (
                    f"{c.name}: switched over ({moved[0][1]}) before {old} restarted ({timeline.asked.get(key)})"
                )
            else:
                assert moved[0][0] < went[old], f"{c.name}: switched over before {old} restarted"
        (a, (a0, a1)), (b, (b0, b1)) = sorted(windows.items(), key=lambda kv: kv[1][0])
        assert a1 <= b0, f"{b} started restarting ({b0:.1f}) before {a}'s Pods were all Ready ({a1:.1f})"
        assert any(name == b and reason == "WaitingForOtherCluster" for name, reason, _ in staged), staged
        print(f"\nrestarts: {a} {a1 - a0:.1f} s, then {b} {b1 - b0:.1f} s; staged: {sorted(set(staged))}")

        # writes: none lost; refused only while the cluster's own Pods restarted (the switchover)
        for name, (w, rw, pw) in writers.items():
            assert lost_rows(rw, pw, w) == [], f"{name}: acknowledged writes lost"
            start, end = windows[name]
            outside = [
                round(t - start, 1) for t in w.failure_times if t >= upgrading and not start <= t <= end + 5
            ]
            assert outside == [], (
                f"{name}: writes refused outside its restart (s from its start): {outside}\n"
                + failures_said(w, upgrading)
            )
            refused = [t for t in w.failure_times if start <= t]
            spans = _bursts(refused)
            print(
                f"\n{name}: {len(w.acked)} writes acknowledged, {len(refused)} refused during its restart, "
                f"in {len(spans)} burst(s) of {', '.join(f'{s:.1f} s' for s in spans) or '-'}"
            )
            record(
                f"operator upgrade: {name} longest refused-write burst",
                max(spans, default=0.0),
                scenario="19",
            )
    finally:
        r = install_operator(local_cluster)  # the release every other test uses
        assert r.returncode == 0, r.stderr[-3000:]
        record("operator upgrade test, total", time.monotonic() - started, scenario="19")


def _pod_runs(c: Cluster) -> dict[str, tuple[str, int]]:
    """Each database Pod's uid and its containers' restarts: a restart changes one or the other."""
    return {
        p.metadata.name: (p.metadata.uid, sum(s.restart_count for s in p.status.container_statuses or []))
        for p in _db_pods(c)
    }


def _spec_fields(ext) -> set[str]:
    """The MySQLCluster CRD's spec fields (its served version)."""
    crd = ext.read_custom_resource_definition(f"{CLUSTERS}.{GROUP}")
    (v,) = [v for v in crd.spec.versions if v.name == VERSION]
    return set(v.schema.open_apiv3_schema.properties["spec"].properties)


def _bursts(times: list[float], gap: float = 2.0) -> list[float]:
    """The length of each run of refused writes (a pause of more than `gap` s ends one)."""
    spans: list[list[float]] = []
    for t in sorted(times):
        if spans and t - spans[-1][1] <= gap:
            spans[-1][1] = t
        else:
            spans.append([t, t])
    return [b - a for a, b in spans]


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
    return len(pods) == INSTANCES[c.name] and all(
        p.metadata.labels.get(rolling.REVISION_LABEL) == sts.status.update_revision for p in pods
    )
