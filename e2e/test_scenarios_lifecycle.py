"""Scenarios 7 and 8 with the operator installed by its chart (a Pod): deleting a MySQLCluster
removes what it owns and keeps the user's Secret and (by default, deletionPolicy Retain) the data
volumes; a Pod that cannot start is named in the status with the kubelet's reason; invalid CRs
made from examples/*.yaml are refused by `kubectl apply` with their messages."""

from __future__ import annotations

import copy

import pytest
import yaml
from kubernetes import client

from e2e.helpers import (
    CLUSTERS,
    FLAVORS,
    GROUP,
    IMAGES,
    REPO,
    VERSION,
    Cluster,
    cluster_spec,
    create_writes_table,
    kubectl,
    query,
    record,
    stopwatch,
    try_query,
)
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster


def _owned_by(items, uid: str) -> list[str]:
    return [
        f"{type(o).__name__}/{o.metadata.name}"
        for o in items
        if any(r.uid == uid for r in o.metadata.owner_references or [])
    ]


def _owned_objects(api, ns: str, uid: str) -> list[str]:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    policy = client.PolicyV1Api(api)
    return (
        _owned_by(apps.list_namespaced_stateful_set(ns).items, uid)
        + _owned_by(core.list_namespaced_service(ns).items, uid)
        + _owned_by(core.list_namespaced_config_map(ns).items, uid)
        + _owned_by(core.list_namespaced_secret(ns).items, uid)
        + _owned_by(policy.list_namespaced_pod_disruption_budget(ns).items, uid)
        + _owned_by(core.list_namespaced_pod(ns).items, uid)
    )


def _pvcs(api, ns: str) -> set[str]:
    return {
        p.metadata.name
        for p in client.CoreV1Api(api).list_namespaced_persistent_volume_claim(ns).items
        if not p.metadata.deletion_timestamp
    }


def test_deleting_a_cluster_removes_owned_objects_keeps_user_secret_and_pvcs(
    local_cluster, scenario_namespace
):
    api = local_cluster.api_client()
    ns = scenario_namespace
    core = client.CoreV1Api(api)
    core.create_namespaced_secret(
        ns,
        {
            "metadata": {"name": "my-creds"},
            "stringData": {
                "root-password": "e2e-root-pw-1",
                "operator-password": "e2e-op-pw-1",
                "replication-password": "e2e-repl-pw-1",
                "app-password": "e2e-app-pw-1",
            },
        },
    )
    kept = Cluster(api, ns, "kept").create(cluster_spec(2, credentials={"secretName": "my-creds"}))
    gone = Cluster(api, ns, "gone").create(cluster_spec(1, deletionPolicy="Delete"))
    kept.wait_ready(300, instances=2)
    gone.wait_ready(300, instances=1)
    assert kept.password(secret="my-creds") == "e2e-app-pw-1"
    kept_uid, gone_uid = kept.body()["metadata"]["uid"], gone.body()["metadata"]["uid"]
    owned_kept = _owned_objects(api, ns, kept_uid)
    assert any(o.startswith("V1StatefulSet/") for o in owned_kept), owned_kept
    assert any(o.startswith("V1Service/kept-rw") for o in owned_kept), owned_kept
    assert "V1Secret/gone-credentials" in _owned_objects(api, ns, gone_uid)
    assert {"data-kept-0", "data-kept-1", "data-gone-0"} <= _pvcs(api, ns)

    objs = client.CustomObjectsApi(api)
    for name in ("kept", "gone"):
        objs.delete_namespaced_custom_object(GROUP, VERSION, ns, CLUSTERS, name)
    wait_for(
        lambda: not objs.list_namespaced_custom_object(GROUP, VERSION, ns, CLUSTERS)["items"],
        120,
        "both MySQLClusters gone (the operator removed its finalizer)",
    )
    wait_for(
        lambda: not _owned_objects(api, ns, kept_uid) and not _owned_objects(api, ns, gone_uid),
        120,
        "owned objects garbage-collected",
    )
    assert core.read_namespaced_secret("my-creds", ns).data, "the user-supplied Secret is kept"
    wait_for(lambda: "data-gone-0" not in _pvcs(api, ns), 120, "deletionPolicy Delete removes gone's PVC")
    assert {"data-kept-0", "data-kept-1"} <= _pvcs(api, ns), "deletionPolicy Retain (default) keeps the PVCs"


def test_a_pod_that_cannot_start_is_named_with_the_kubelets_reason(local_cluster, scenario_namespace):
    """An image the registry does not have (a typo in spec.image): the status says which instance
    is stuck and why, in the kubelet's words, instead of only "0/1 instances ready", and so does
    one Warning Event; once the spec names an image that is there, the cluster starts."""
    c = Cluster(local_cluster.api_client(), scenario_namespace, "noimg")
    missing = IMAGES["mariadb"].replace("/mariadb:", "/no-such-image:")
    c.create(cluster_spec(1, image=missing))
    pulling = ("ErrImagePull", "ImagePullBackOff")

    def stuck():
        st = c.status()
        entry = next((i for i in st.get("instances") or [] if i.get("name") == "noimg-0"), {})
        return st if any(r in entry.get("waiting", "") for r in pulling) else None

    # the kubelet tries the container once the new volume is mounted: seen 1 min 52 s after the
    # Pod was scheduled on a loaded node (its volume manager retries with a growing delay)
    st = wait_for(stuck, 300, "noimg-0 reported waiting on its image pull", describe=c.describe)
    ready = next(cond for cond in st["conditions"] if cond["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "InstancesNotReady", ready
    assert "0/1 instances ready; noimg-0: " in ready["message"], ready
    assert any(r in ready["message"] for r in pulling), ready
    # and said once as a Warning Event on the MySQLCluster, not only in its status
    said = wait_for(lambda: c.events("InstanceWaiting"), 30, "the InstanceWaiting Event", describe=c.describe)
    assert said[0].type == "Warning" and said[0].message.startswith("noimg-0 cannot start: "), said[0]
    assert any(r in said[0].message for r in pulling), said[0].message

    # the user fixes the image: the stuck Pod is replaced at once (it never ran), no hand needed
    c.objs.patch_namespaced_custom_object(
        GROUP, VERSION, c.namespace, CLUSTERS, "noimg", {"spec": {"image": IMAGES["mariadb"]}}
    )
    c.wait_ready(300, instances=1)


# ------------------------------------------------------------------------------ invalid CRs
def _example(name: str) -> dict:
    return yaml.safe_load((REPO / "examples" / name).read_text())


def _set(doc: dict, path: str, value) -> dict:
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = doc
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value
    return doc


INVALID = [
    ("three-instance.yaml", "spec.primary", 3, "spec.primary 3 must be lower than spec.instances 3"),
    ("three-instance.yaml", "spec.instances", 10, "spec.instances"),
    (
        "three-instance.yaml",
        "spec.replication.semiSyncAcks",
        3,
        "spec.replication.semiSyncAcks 3 must be lower than spec.instances 3",
    ),
    (
        "mariadb.yaml",
        "spec.replication.semiSyncAcks",
        2,
        "MariaDB (10.11, 11.4, 11.8) waits for exactly one replica acknowledgement",
    ),
    ("one-instance.yaml", "spec.version", "10.11", "spec.version '10.11' must match spec.flavor MySQL"),
    (
        "mariadb.yaml",
        "spec.config.myCnf",
        "server_id = 7\n",
        "spec.config.myCnf sets a setting the operator owns",
    ),
    (
        "mariadb.yaml",
        "spec.config.myCnf",
        "!include /etc/other.cnf\n",
        "must not have a line starting with '!'",
    ),
    (
        "three-instance.yaml",
        "metadata.name",
        "a" * 41,
        f"metadata.name '{'a' * 41}' must be at most 40 characters",
    ),
    (
        "local-demo.yaml",
        "spec.podLabels",
        {"app.kubernetes.io/name": "x"},
        "spec.podLabels must not set app.kubernetes.io/name",
    ),
    ("local-demo.yaml", "spec.backup.schedule", "every day", "spec.backup.schedule"),
    ("local-demo.yaml", "spec.flavor", "postgres", "spec.flavor"),
    ("local-demo-mysql.yaml", "spec.version", "8.0", "spec.version '8.0' is not a supported release"),
    (
        "three-instance.yaml",
        "spec.restore",
        {
            "fromBackup": {"name": "b"},
            "s3": {"bucket": "bkt", "path": "p", "credentialsSecret": {"name": "s"}},
        },
        "spec.restore needs exactly one of spec.restore.fromBackup or spec.restore.s3",
    ),
]


@pytest.mark.parametrize("example", sorted({e[0] for e in INVALID} | {"backup.yaml"}))
def test_the_examples_themselves_are_accepted(local_cluster, operator_release, kube_namespace, example):
    """The control for the refusals below: each unmodified example passes server-side validation."""
    r = kubectl(
        local_cluster.kubeconfig,
        "apply",
        "--dry-run=server",
        "-n",
        kube_namespace,
        "-f",
        str(REPO / "examples" / example),
    )
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("example,path,value,message", INVALID, ids=[f"{e}:{p}" for e, p, _, _ in INVALID])
def test_invalid_cr_from_an_example_is_refused_with_its_message(
    local_cluster, operator_release, kube_namespace, example, path, value, message
):
    doc = _set(_example(example), path, value)
    r = kubectl(
        local_cluster.kubeconfig,
        "apply",
        "--dry-run=server",
        "-n",
        kube_namespace,
        "-f",
        "-",
        input=yaml.safe_dump(doc),
    )
    assert r.returncode != 0, f"accepted: {r.stdout}"
    assert message in r.stderr, r.stderr
    assert "is invalid" in r.stderr, r.stderr


@pytest.fixture(scope="module")
def applied_namespace(local_cluster, operator_release):
    """examples/local-demo.yaml applied once (1 instance, no backup: no S3 credentials here)."""
    from e2e.helpers import scenario_namespace

    with scenario_namespace(local_cluster.api_client(), "e2e-imm") as ns:
        doc = _example("local-demo.yaml")
        doc["spec"].pop("backup")
        doc["spec"]["instances"] = 1
        r = kubectl(local_cluster.kubeconfig, "apply", "-n", ns, "-f", "-", input=yaml.safe_dump(doc))
        assert r.returncode == 0, r.stderr
        yield ns, doc


@pytest.mark.parametrize(
    "path,value,message",
    [
        ("spec.storage.size", "10Mi", "spec.storage.size can only grow"),
        ("spec.flavor", "mysql", "spec.flavor is immutable"),
        ("spec.database", {"name": "other", "user": "other"}, "spec.database is immutable"),
        ("spec.restore", {"fromBackup": {"name": "x"}}, "spec.restore is immutable"),
        ("spec.credentials", {"secretName": "mine"}, "spec.credentials is immutable"),
    ],
    ids=["storage-shrink", "flavor", "database", "restore", "credentials"],
)
def test_immutable_fields_of_an_applied_example_are_refused(
    local_cluster, applied_namespace, path, value, message
):
    ns, doc = applied_namespace
    changed = _set(doc, path, value)
    if path == "spec.flavor":
        changed["spec"]["version"] = "8.4"
    r = kubectl(local_cluster.kubeconfig, "apply", "-n", ns, "-f", "-", input=yaml.safe_dump(changed))
    assert r.returncode != 0, f"accepted: {r.stdout}"
    assert message in r.stderr, r.stderr


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_retained_cluster_created_again_comes_back_with_its_data_and_passwords(
    local_cluster, scenario_namespace, flavor
):
    """deletionPolicy Retain (the default) keeps the volumes and the generated credentials Secret:
    the same MySQLCluster applied again adopts the data (the instance with every transaction is
    the primary, the other replicates from it) and the app password still works."""
    api = local_cluster.api_client()
    ns = scenario_namespace
    core, objs = client.CoreV1Api(api), client.CustomObjectsApi(api)
    spec = cluster_spec(2, flavor)
    c = Cluster(api, ns, "back").create(spec)
    c.wait_ready(300, instances=2)
    rw, pw = create_writes_table(c)
    query(rw, "app", pw, "INSERT INTO app.writes VALUES (1), (2), (3)")
    first_uid = c.body()["metadata"]["uid"]

    objs.delete_namespaced_custom_object(GROUP, VERSION, ns, CLUSTERS, "back")
    wait_for(lambda: not _owned_objects(api, ns, first_uid), 180, "the cluster's objects and Pods gone")
    secret = core.read_namespaced_secret("back-credentials", ns)
    assert not secret.metadata.owner_references, "the generated Secret outlives a Retain cluster"
    assert {"data-back-0", "data-back-1"} <= _pvcs(api, ns)

    elapsed = stopwatch()
    c = Cluster(api, ns, "back").create(spec)
    st = c.wait_ready(300, instances=2)
    record(f"retained cluster created again to Ready (2 instances, {flavor})", elapsed(), scenario="8")
    assert c.password() == pw
    rw = c.service_ip("rw")
    rows = wait_for(lambda: try_query(rw, "app", pw, "SELECT id FROM app.writes ORDER BY id"), 60, "-rw")
    assert [r[0] for r in rows] == [1, 2, 3]
    query(rw, "app", pw, "INSERT INTO app.writes VALUES (4)")  # writable, replicating again
    assert [i["role"] for i in st["instances"]] == ["primary", "replica"], st["instances"]
    replica_ip = c.pod(1 if st["currentPrimary"] == "back-0" else 0).status.pod_ip
    wait_for(
        lambda: (r := try_query(replica_ip, "app", pw, "SELECT COUNT(*) FROM app.writes")) and r[0][0] == 4,
        60,
        "the replica has the new row",
    )
    adopted = [e.message for e in c.events("Bootstrap")]
    assert any("adopting existing data" in m for m in adopted), adopted
