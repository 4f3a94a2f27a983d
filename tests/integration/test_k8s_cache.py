"""The watched stores against the real kube-apiserver: a created, changed and deleted object is
seen through the watch; the operator's own status write is read back at once (before its watch
event), and a later, older event does not undo it; the namespace scope keeps other namespaces out.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from kubernetes import client, watch

from mysql_operator.api import GROUP, VERSION
from mysql_operator.k8s.cache import Reads
from mysql_operator.k8s.reflector import start_reflectors
from tests.support.crds import apply_crds, project_crds
from tests.support.wait import wait_for

pytestmark = pytest.mark.controlplane

SELECTOR = "app.kubernetes.io/managed-by=mysql-operator"


def pod(name: str, **labels: str) -> dict:
    return {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "mysql-operator", **labels}},
        "spec": {"containers": [{"name": "c", "image": "localhost/none:0"}]},
    }


def cluster(name: str, spec: dict) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLCluster",
        "metadata": {"name": name},
        "spec": spec,
    }


@pytest.fixture
def spaces(control_plane):
    apply_crds(control_plane.api_client(), project_crds())
    core = client.CoreV1Api(control_plane.api_client())
    names = [f"cache-{uuid.uuid4().hex[:6]}", f"cache-{uuid.uuid4().hex[:6]}"]
    for n in names:
        core.create_namespace({"metadata": {"name": n}})
    yield names
    for n in names:
        core.delete_namespace(n)


def test_the_stores_follow_the_api_server_and_read_the_operators_own_writes(control_plane, spaces):
    watched, other = spaces
    api = control_plane.api_client()
    core, objs = client.CoreV1Api(api), client.CustomObjectsApi(api)
    clusters, pods, sets, reflectors = start_reflectors(control_plane.api_client(), [watched], SELECTOR)
    try:
        wait_for(
            lambda: clusters.synced.is_set() and pods.synced.is_set() and sets.synced.is_set(), 30, "synced"
        )
        reads = Reads(api, clusters, pods, sets)

        core.create_namespaced_pod(watched, pod("db-0", instance="db"))
        core.create_namespaced_pod(watched, pod("db-1", instance="db"))
        core.create_namespaced_pod(watched, {**pod("stranger"), "metadata": {"name": "stranger"}})  # no label
        core.create_namespaced_pod(other, pod("db-0", instance="db"))
        wait_for(lambda: len(reads.list_pods(watched, {"instance": "db"})) == 2, 30, "both Pods seen")
        assert pods.get(watched, "stranger") is None and pods.get(other, "db-0") is None

        reads.set_pod_label(watched, "db-1", "role", "primary")  # read back at once
        assert [p["metadata"]["name"] for p in reads.list_pods(watched, {"role": "primary"})] == ["db-1"]
        core.delete_namespaced_pod("db-0", watched, grace_period_seconds=0)
        wait_for(
            lambda: [p["metadata"]["name"] for p in reads.list_pods(watched, {})] == ["db-1"], 30, "gone"
        )

        objs.create_namespaced_custom_object(
            GROUP,
            VERSION,
            watched,
            "mysqlclusters",
            cluster("db", {"flavor": "mariadb", "instances": 1, "storage": {"size": "1Gi"}}),
        )
        created = wait_for(lambda: reads.cluster(watched, "db"), 30, "the cluster seen")
        # the status recorded before acting is what the next pass reads, before any watch event
        reads.patch_status(created, {"currentPrimary": "db-1"})
        assert reads.cluster(watched, "db")["status"]["currentPrimary"] == "db-1"
        reads.seen(created)  # kopf delivering an older body later changes nothing
        assert reads.cluster(watched, "db")["status"]["currentPrimary"] == "db-1"
        objs.patch_namespaced_custom_object(
            GROUP, VERSION, watched, "mysqlclusters", "db", {"spec": {"instances": 2}}
        )
        wait_for(lambda: reads.cluster(watched, "db")["spec"]["instances"] == 2, 30, "the edit seen")
        assert reads.cluster(watched, "db")["status"]["currentPrimary"] == "db-1"
    finally:
        for r in reflectors:
            r.stop()


def _with_setting(api, served: bool) -> None:
    """The project's CRDs, with spec.futureSetting in the MySQLCluster schema when `served`."""
    crds = project_crds()
    if served:
        for crd in crds:
            if crd["spec"]["names"]["plural"] == "mysqlclusters":
                props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
                props["properties"]["futureSetting"] = {"type": "string"}
    apply_crds(api, crds)


def _served(objs, ns: str) -> bool | None:
    """Whether the API server keeps spec.futureSetting now (a dry run); None while it cannot say."""
    body = cluster("probe", {"flavor": "mariadb", "instances": 1, "futureSetting": "on"})
    try:
        dry = objs.create_namespaced_custom_object(GROUP, VERSION, ns, "mysqlclusters", body, dry_run="All")
    except client.ApiException:
        return None
    return "futureSetting" in dry["spec"]


def _watching(objs, ns: str, touched: str) -> dict:
    """A watch of `ns`'s MySQLClusters opened now, kept as kopf keeps its own (watching on from the
    last version it delivered when the server closes it): "labelled" is the first body it delivers
    whose label `touched` is `touched`."""
    seen: dict = {}

    def listed() -> str:
        answer = objs.list_namespaced_custom_object(GROUP, VERSION, ns, "mysqlclusters")
        for body in answer["items"]:
            offer(body)
        return answer["metadata"]["resourceVersion"]

    def offer(body: dict) -> None:
        if (body["metadata"].get("labels") or {}).get("touched") == touched:
            seen.setdefault("labelled", body)

    version = listed()

    def run() -> None:
        nonlocal version
        deadline = time.monotonic() + 60
        while "labelled" not in seen and time.monotonic() < deadline:
            try:  # closed by the server: on from the last version it delivered
                for event in watch.Watch().stream(
                    objs.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    ns,
                    "mysqlclusters",
                    resource_version=version,
                    timeout_seconds=60,
                ):
                    version = event["raw_object"]["metadata"]["resourceVersion"]
                    offer(event["raw_object"])
                    if "labelled" in seen:
                        return
            except client.ApiException:  # 410: that version is gone from the new storage's cache
                version = listed()

    threading.Thread(target=run, daemon=True).start()
    return seen


def _pruned_by_an_open_watch(api, objs, clusters, ns: str, attempt: int) -> dict | None:
    """Serve spec.futureSetting and change the object at once: the store reads it whole (its LIST
    after the server closed its watch); the copy a watch opened before delivered (as kopf's), pruned
    by the old schema, or None when the change came after the server closed that watch (1 s after
    the CRD update: then the schema is taken away again for the next attempt)."""
    kopfs = _watching(objs, ns, str(attempt))
    _with_setting(api, served=True)
    wait_for(lambda: _served(objs, ns), 30, "the field served again", interval=0.1)
    # a change the watch opened under the old schema delivers (pruned), while the API server has
    # not closed it yet: the watch's resourceVersion is then as new as the new schema's
    objs.patch_namespaced_custom_object(
        GROUP, VERSION, ns, "mysqlclusters", "db", {"metadata": {"labels": {"touched": str(attempt)}}}
    )
    wait_for(
        lambda: "futureSetting" in clusters.get(ns, "db")["spec"],
        60,
        "the stored field read once the schema serves it",
        describe=lambda: str(clusters.get(ns, "db")["spec"]),
    )
    copy = wait_for(lambda: kopfs.get("labelled"), 30, "the watch's copy of the changed body")
    if "futureSetting" not in copy["spec"]:
        return copy
    _with_setting(api, served=False)
    wait_for(lambda: _served(objs, ns) is False, 30, "the field pruned", interval=0.5)
    return None


def test_a_schema_change_is_read_again_without_any_change_to_the_objects(control_plane, spaces):
    """A CRD update that starts serving a field an object already holds in storage sends no watch
    event for that object; the API server closes the kind's watches instead. The store reads the
    objects again then: the pass sees the field (and names it, if this version does not know it),
    and kopf's copy of the same version, pruned by the old schema, never replaces it."""
    watched, _ = spaces
    api = control_plane.api_client()
    objs = client.CustomObjectsApi(api)
    spec = {"flavor": "mariadb", "instances": 1, "futureSetting": "on"}
    try:
        _with_setting(api, served=True)
        wait_for(lambda: _served(objs, watched), 30, "the field served", interval=0.5)
        objs.create_namespaced_custom_object(GROUP, VERSION, watched, "mysqlclusters", cluster("db", spec))
        _with_setting(api, served=False)  # stored with the field, read without it
        wait_for(lambda: _served(objs, watched) is False, 30, "the field pruned", interval=0.5)
        clusters, _, _, reflectors = start_reflectors(api, [watched], SELECTOR)
        try:
            wait_for(lambda: clusters.get(watched, "db"), 30, "the cluster listed")
            assert "futureSetting" not in clusters.get(watched, "db")["spec"]
            for attempt in range(1, 4):
                pruned = _pruned_by_an_open_watch(api, objs, clusters, watched, attempt)
                if pruned is not None:
                    break
                print(f"attempt {attempt}: the change came after the old watch closed; again")
            else:
                pytest.fail("3 times the change came after the API server closed the old watch")
            # kopf watches on from the version it saw: its copy of this version stays pruned, and is
            # offered before every pass; it must not put the pruned copy back in the store
            whole = clusters.get(watched, "db")
            assert whole["metadata"]["resourceVersion"] == pruned["metadata"]["resourceVersion"]
            Reads(api, clusters).seen(pruned)
            assert Reads(api, clusters).cluster(watched, "db")["spec"]["futureSetting"] == "on"
        finally:
            for r in reflectors:
                r.stop()
    finally:
        _with_setting(api, served=False)
        wait_for(
            lambda: _served(objs, watched) is False, 60, "the project's schema served again", interval=0.5
        )


@pytest.mark.parametrize("resumes", [True, False])
def test_an_expired_watch_of_a_builtin_kind_is_taken_up_again_without_a_list(control_plane, spaces, resumes):
    """Pods and StatefulSets (no CRD update can change their storage) are watched on from the last
    version when a watch expires: one LIST in all, however many watch periods pass, and a change
    made after an expiry is still seen. A custom resource's store (resumes=False) lists each time."""
    from mysql_operator.k8s.reflector import Reflector, Store

    watched, _ = spaces
    api = control_plane.api_client()
    core = client.CoreV1Api(api)
    calls = {"list": 0, "watch": 0}

    def list_pods(**kw):
        calls["watch" if kw.get("watch") else "list"] += 1
        return core.list_namespaced_pod(watched, **kw)

    store = Store([watched])
    r = Reflector(
        api, store, list_pods, label_selector=SELECTOR, scope=watched, watch_seconds=1, resumes=resumes
    )
    r.start()
    try:
        wait_for(lambda: calls["watch"] >= 4, 60, "four watch periods", interval=0.2)
        core.create_namespaced_pod(watched, pod("late", **{"app.kubernetes.io/instance": "db"}))
        wait_for(lambda: store.get(watched, "late"), 30, "the Pod made after the expiries", interval=0.2)
        if resumes:
            assert calls["list"] == 1, calls
        else:
            assert calls["list"] >= 4, calls
    finally:
        r.stop()
