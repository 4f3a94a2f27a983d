"""The CRDs in crds/ against the real kube-apiserver: schema, defaults, CEL rules, immutability,
printer columns, the invalid corpus (tests/invalid/) and the examples (examples/)."""

from __future__ import annotations

import copy
import json
import re
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from mysql_operator.api import GROUP, VERSION, SpecError, parse, parse_backup
from mysql_operator.api.sql import PLURALS as SQL_PLURALS
from mysql_operator.api.sql import parse_sql_object
from mysql_operator import status as cstatus
from mysql_operator import summary as csummary
from mysql_operator.backup.backup_status import backup_status
from mysql_operator.sql_status import Result, status_for
from tests.support.crds import PLURALS
from tests.support.crds import crds as crds  # the module-scoped fixture: the CRDs installed from crds/
from tests.support.wait import wait_for
from tests.support.specs import (
    CHANGES,
    FULL,
    IMMUTABLE_PATHS,
    IMMUTABLE_ROOTS,
    changed_spec,
    immutable_field,
    is_immutable,
)

pytestmark = pytest.mark.controlplane

REPO = Path(__file__).resolve().parents[2]
INVALID = sorted((REPO / "tests" / "invalid").glob("*.yaml"))
# examples/values-*.yaml are Helm values for the chart (tests/integration/test_chart.py)
EXAMPLES = sorted(p for p in (REPO / "examples").glob("*.yaml") if not p.name.startswith("values-"))


@pytest.fixture(scope="module")
def shared_ns(control_plane, crds):
    core = client.CoreV1Api(control_plane.api_client())
    name = f"crd-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture
def objs(control_plane, crds):
    return client.CustomObjectsApi(control_plane.api_client())


def create(objs, ns, body):
    return objs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[body["kind"]], body)


def update_spec(objs, ns, kind, name, spec):
    current = objs.get_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], name)
    current["spec"] = spec
    return objs.replace_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], name, current)


def cluster_body(name, spec):
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLCluster",
        "metadata": {"name": name},
        "spec": copy.deepcopy(spec),
    }


def unique(prefix="c"):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------- the CRDs themselves


def test_crds_declare_names_status_and_columns(crds):
    cluster = crds.read_custom_resource_definition("mysqlclusters.mysql.operator.dev")
    # not `mysql`: another operator's CRD uses it; `kubectl get mysql-operator` lists all five kinds
    assert cluster.spec.names.short_names == ["myc"]
    for kind in ("mysqlclusters", "mysqlbackups", "mysqldatabases", "mysqlusers", "mysqlgrants"):
        names = crds.read_custom_resource_definition(f"{kind}.mysql.operator.dev").spec.names
        assert names.categories == ["mysql-operator"], kind
    (v,) = cluster.spec.versions
    assert v.name == "v1alpha1" and v.subresources.status is not None
    columns = [(c.name, c.priority or 0) for c in v.additional_printer_columns]
    assert columns == [
        ("Instances", 0),
        ("Ready", 0),
        ("Primary", 0),
        ("Phase", 0),
        ("Age", 0),
        ("Lag", 1),  # -o wide
        ("Last Backup", 1),
        ("Drill", 1),  # the last restore drill: its phase and when it ended
        ("Drill Ended", 1),
    ]
    backup = crds.read_custom_resource_definition("mysqlbackups.mysql.operator.dev")
    assert backup.spec.names.short_names == ["mysqlbk"]
    (v,) = backup.spec.versions
    assert [c.name for c in v.additional_printer_columns] == [
        "Phase",
        "Cluster",
        "Started",
        "Completed",
        "Size",
        "Method",
    ]


def table_row(control_plane, namespace, plural, name) -> dict:
    """The object as `kubectl get` shows it: its printer columns (a Table), column name -> cell."""
    api = control_plane.api_client()
    request = api.param_serialize(
        method="GET",
        resource_path=f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{plural}/{name}",
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*request)
    response.read()
    table = json.loads(response.data)
    return dict(zip([c["name"] for c in table["columnDefinitions"]], table["rows"][0]["cells"]))


def test_status_subresource_and_printer_columns(control_plane, objs, namespace):
    name = unique()
    created = create(objs, namespace, cluster_body(name, {"instances": 3}))
    gen = created["metadata"]["generation"]
    status = {
        "phase": "Running",
        "readyInstances": 2,
        "currentPrimary": f"{name}-0",
        "replicaLagSeconds": 4,
        "lastBackup": {"name": "nightly", "completedAt": "2026-11-25T03:00:00Z"},
        "kopf": {"progress": {}},
    }  # kopf keeps its state here: it must not be pruned
    objs.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "mysqlclusters", name, {"status": status}
    )
    after = objs.get_namespaced_custom_object(GROUP, VERSION, namespace, "mysqlclusters", name)
    assert after["status"] == status and after["metadata"]["generation"] == gen
    # a status written through the main resource is ignored (status subresource)
    after["status"] = {"phase": "Hacked"}
    objs.replace_namespaced_custom_object(GROUP, VERSION, namespace, "mysqlclusters", name, after)
    assert (
        objs.get_namespaced_custom_object(GROUP, VERSION, namespace, "mysqlclusters", name)["status"]["phase"]
        == "Running"
    )

    # `kubectl get mysqlclusters` asks for a Table: the columns the brief promises
    row = table_row(control_plane, namespace, "mysqlclusters", name)
    assert row["Name"] == name and row["Instances"] == 3 and row["Ready"] == 2
    assert row["Primary"] == f"{name}-0" and row["Phase"] == "Running" and "Age" in row
    # -o wide: the largest replica lag and when the last backup completed
    assert row["Lag"] == 4 and re.fullmatch(r"(\d+[smhdy])+", row["Last Backup"]), row  # an age


STAMP = "2026-12-03T21:00:00Z"


def written_statuses(name):
    """One object of each kind and the status the operator's own writers make for it."""
    ref = {"clusterRef": {"name": "db"}}
    cluster = cstatus.build_status(csummary.Summary(instances=2, generation=1, ready=1), {}, STAMP)
    ready = status_for(Result(True, "Applied", "in sync"), {}, 1, STAMP)
    return [
        (cluster_body(name, {"instances": 2}), cluster),
        (
            {"kind": "MySQLBackup", "spec": ref},
            backup_status(
                {"phase": "Succeeded", "sizeBytes": 1610612736, "message": "stored"},
                {},
                1,
                STAMP,
            ),
        ),
        ({"kind": "MySQLDatabase", "spec": {**ref, "name": "shop"}}, ready),
        ({"kind": "MySQLUser", "spec": {**ref, "name": "writer"}}, ready),
        (
            {
                "kind": "MySQLGrant",
                "spec": {**ref, "user": "writer", "database": "shop", "privileges": ["SELECT"]},
            },
            ready,
        ),
    ]


def test_conditions_are_keyed_by_type_and_the_operators_statuses_are_kept(objs, namespace):
    """status.conditions is a list map keyed by type: two conditions of one type are refused; the
    status each kind's writer makes is accepted and read back unchanged."""
    for body, status in written_statuses(unique()):
        body = {"apiVersion": f"{GROUP}/{VERSION}", "metadata": {"name": unique()}, **body}
        plural = PLURALS[body["kind"]]
        create(objs, namespace, body)
        objs.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, plural, body["metadata"]["name"], {"status": status}
        )
        after = objs.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, body["metadata"]["name"])
        # a merge patch drops a null (replicaLagSeconds with no lag known): the rest reads back as written
        assert after["status"] == {k: v for k, v in status.items() if v is not None}, body["kind"]
        assert all(c["observedGeneration"] == 1 for c in after["status"]["conditions"]), body["kind"]
        twice = {
            **status,
            "conditions": [*status["conditions"], dict(status["conditions"][0], reason="Other")],
        }
        with pytest.raises(client.ApiException) as e:
            objs.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, plural, body["metadata"]["name"], {"status": twice}
            )
        assert e.value.status == 422 and "Duplicate value" in e.value.body, (body["kind"], e.value.body)


def test_a_backups_size_column_is_in_binary_units(control_plane, objs, namespace):
    name = unique("b")
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "MySQLBackup", "metadata": {"name": name}}
    create(objs, namespace, {**body, "spec": {"clusterRef": {"name": "db"}}})
    status = backup_status({"phase": "Succeeded", "sizeBytes": 1610612736, "message": "stored"}, {}, 1, STAMP)
    objs.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "mysqlbackups", name, {"status": status}
    )
    row = table_row(control_plane, namespace, "mysqlbackups", name)
    assert (row["Phase"], row["Size"]) == ("Succeeded", "1.5 GiB"), row


def test_apiserver_defaults_agree_with_the_python_defaults(objs, namespace):
    for spec in ({"instances": 1}, {"instances": 2, "flavor": "mariadb"}, FULL):
        name = unique()
        raw = cluster_body(name, spec)
        stored = create(objs, namespace, raw)
        assert parse(stored) == parse({**raw, "metadata": stored["metadata"]})


def test_largest_allowed_config_fits_the_cel_cost_budget(objs, namespace):
    line = "max_connections = 100\n"
    my_cnf = (line * (16384 // len(line) + 1))[:16384]
    create(objs, namespace, cluster_body(unique(), {"instances": 1, "config": {"myCnf": my_cnf}}))
    with pytest.raises(client.ApiException) as e:
        create(objs, namespace, cluster_body(unique(), {"instances": 1, "config": {"myCnf": my_cnf + "x"}}))
    assert e.value.status == 422 and "spec.config.myCnf" in e.value.body


# ---------------------------------------------------------------- corpus and examples


def test_corpus_is_large_enough():
    assert len(INVALID) >= 25


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_manifest_is_refused_with_its_message(objs, shared_ns, path):
    text = path.read_text()
    first = text.splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name}: line 1 must be '# expect: <message fragment>'"
    expected = first[len("# expect: ") :].strip()
    docs = [d for d in yaml.safe_load_all(text) if d]
    suffix = uuid.uuid4().hex[:6]
    for d in docs:  # unique names so the corpus can share one namespace
        if len(d["metadata"]["name"]) < 40:
            d["metadata"]["name"] = f"{d['metadata']['name']}-{suffix}"
    *setup, bad = docs
    for d in setup:
        create(objs, shared_ns, d)
    with pytest.raises(client.ApiException) as e:
        if setup:
            update_spec(objs, shared_ns, bad["kind"], bad["metadata"]["name"], bad["spec"])
        else:
            create(objs, shared_ns, bad)
    assert e.value.status == 422, e.value.body
    message = json.loads(e.value.body)["message"]
    assert expected in message, f"{path.name}: expected {expected!r} in {message}"


def test_a_backup_named_like_the_binlog_archive_folder_is_refused(objs, shared_ns):
    """Its folder would be <cluster>/binlogs, the archive's: deleting it would delete the archive.
    Outside the corpus, which makes its names unique with a suffix."""
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLBackup",
        "metadata": {"name": "binlogs"},
        "spec": {"clusterRef": {"name": "c"}},
    }
    with pytest.raises(client.ApiException) as e:
        create(objs, shared_ns, body)
    assert e.value.status == 422
    assert "binlogs is the folder of the cluster's binary log archive" in json.loads(e.value.body)["message"]
    with pytest.raises(SpecError, match="^metadata.name: binlogs is the folder"):
        parse_backup({**body, "metadata": {"name": "binlogs", "namespace": shared_ns}})


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_is_accepted(objs, namespace, path):
    for doc in yaml.safe_load_all(path.read_text()):
        stored = create(objs, namespace, doc)
        if doc["kind"] == "MySQLCluster":
            assert parse(stored) == parse({**doc, "metadata": stored["metadata"]})
        elif doc["kind"] in SQL_PLURALS:  # the apiserver's defaults are the parser's
            assert parse_sql_object(stored).spec == parse_sql_object(doc).spec
        else:
            parse_backup(stored)


# ---------------------------------------------------------------- the field walk, apiserver half


@pytest.mark.parametrize("path", sorted(CHANGES))
def test_field_walk_immutable_fields_are_refused_and_the_rest_accepted(objs, shared_ns, path):
    base, new = changed_spec(path)
    name = unique("walk")
    create(objs, shared_ns, cluster_body(name, base))
    if is_immutable(path):
        field = immutable_field(path)
        assert field.split(".")[0] in IMMUTABLE_ROOTS or field in IMMUTABLE_PATHS
        with pytest.raises(client.ApiException) as e:
            update_spec(objs, shared_ns, "MySQLCluster", name, new)
        assert e.value.status == 422
        assert f"spec.{field} is immutable" in json.loads(e.value.body)["message"]
        stored = objs.get_namespaced_custom_object(GROUP, VERSION, shared_ns, "mysqlclusters", name)
        assert parse(stored).spec == parse(cluster_body(name, base)).spec
    else:
        stored = update_spec(objs, shared_ns, "MySQLCluster", name, new)
        assert parse(stored).spec == parse(cluster_body(name, new)).spec


# ---------------------------------------------------------------- built objects on the real apiserver


RESOURCE_PATHS = {
    "Secret": "/api/v1/namespaces/{ns}/secrets/{name}",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps/{name}",
    "Service": "/api/v1/namespaces/{ns}/services/{name}",
    "StatefulSet": "/apis/apps/v1/namespaces/{ns}/statefulsets/{name}",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}",
}


def server_side_apply(api, obj):
    """PATCH application/apply-patch+yaml with strict field validation; returns the stored object."""
    path = RESOURCE_PATHS[obj["kind"]].format(ns=obj["metadata"]["namespace"], name=obj["metadata"]["name"])
    request = api.param_serialize(
        method="PATCH",
        resource_path=path,
        query_params=[("fieldManager", "crd-test"), ("force", "true"), ("fieldValidation", "Strict")],
        header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
        body=obj,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*request)
    response.read()
    if response.status >= 300:
        raise AssertionError(f"apply {obj['kind']} {obj['metadata']['name']}: {response.data[:2000]!r}")
    return json.loads(response.data)


@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
def test_built_objects_apply_strictly_and_pods_pass_restricted_admission(
    control_plane, objs, namespace, flavor
):
    from mysql_operator import manifests as m

    api = control_plane.api_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.patch_namespace(
        namespace,
        {
            "metadata": {
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                }
            }
        },
    )
    spec = {
        "instances": 3,
        "flavor": flavor,
        "database": {"name": "app", "user": "app"},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "nodeSelector": {"disk": "ssd"},
        "podLabels": {"team": "a"},
        "podAnnotations": {"note": "a"},
        "service": {"type": "NodePort", "annotations": {"a": "b"}},
    }
    cr = create(objs, namespace, cluster_body("db", spec))
    cluster = parse(cr)
    built = [m.owned(o, cr) for o in m.build_all(cluster, lambda key: m.random_password())]
    first = [server_side_apply(api, o) for o in built]
    assert [o["kind"] for o in first] == [o["kind"] for o in built]

    # applying the same objects again changes nothing (apart from the freshly generated passwords,
    # which a reconcile never regenerates: it creates the Secret only when missing)
    again = [server_side_apply(api, o) for o in built]
    for a, b in zip(first, again):
        if "generation" in a["metadata"]:  # controllers update these objects' status meanwhile
            assert a["metadata"]["generation"] == b["metadata"]["generation"], a["kind"]
            assert a["spec"] == b["spec"], a["kind"]
        else:
            assert a["metadata"]["resourceVersion"] == b["metadata"]["resourceVersion"], a["kind"]

    # the StatefulSet controller creates the Pods only if the restricted Pod Security level admits them
    def pods():
        found = core.list_namespaced_pod(namespace, label_selector="app.kubernetes.io/instance=db").items
        return found if len(found) == 3 else None

    def diagnose():
        events = core.list_namespaced_event(namespace).items
        return "; ".join(f"{e.reason}: {e.message}" for e in events if e.reason == "FailedCreate")

    try:
        found = wait_for(pods, 60, "3 server Pods created by the StatefulSet")
    except AssertionError as e:
        raise AssertionError(f"{e}; events: {diagnose()}") from None
    assert sorted(p.metadata.name for p in found) == ["db-0", "db-1", "db-2"]
    pvcs = core.list_namespaced_persistent_volume_claim(namespace).items
    assert sorted(p.metadata.name for p in pvcs) == ["data-db-0", "data-db-1", "data-db-2"]
    sts = apps.read_namespaced_stateful_set("db", namespace)
    assert sts.metadata.owner_references[0].uid == cr["metadata"]["uid"]

    # deleting the cluster garbage-collects what it owns
    objs.delete_namespaced_custom_object(GROUP, VERSION, namespace, "mysqlclusters", "db")

    def gone():
        left = [
            *core.list_namespaced_config_map(namespace, label_selector="app.kubernetes.io/instance=db").items,
            *core.list_namespaced_service(namespace, label_selector="app.kubernetes.io/instance=db").items,
            *apps.list_namespaced_stateful_set(namespace).items,
        ]
        return not left

    wait_for(gone, 60, "the garbage collector to delete the cluster's objects")


def test_version_upgrades_are_accepted_and_downgrades_refused(objs, shared_ns):
    def message(e) -> str:
        return json.loads(e.value.body)["message"]

    name = unique("ver")
    mariadb = {"instances": 1, "flavor": "mariadb"}
    create(objs, shared_ns, cluster_body(name, {**mariadb, "version": "10.11"}))
    # patch levels both ways, then MariaDB's path one LTS series at a time
    for version in ("10.11.9", "10.11.8", "11.4", "11.4.2", "11.8"):
        update_spec(objs, shared_ns, "MySQLCluster", name, {**mariadb, "version": version})
    with pytest.raises(client.ApiException) as e:
        update_spec(objs, shared_ns, "MySQLCluster", name, {**mariadb, "version": "11.4"})
    assert "spec.version cannot be lowered" in message(e)
    # compared as numbers: 10.6 is older than 10.11 although "10.6" > "10.11" as strings
    other = unique("ver")
    create(objs, shared_ns, cluster_body(other, {**mariadb, "version": "10.11"}))
    with pytest.raises(client.ApiException) as e:
        update_spec(objs, shared_ns, "MySQLCluster", other, {**mariadb, "version": "10.6"})
    assert "spec.version cannot be lowered" in message(e)
    with pytest.raises(client.ApiException) as e:  # 10.11 -> 11.8 skips 11.4
        update_spec(objs, shared_ns, "MySQLCluster", other, {**mariadb, "version": "11.8"})
    assert "skips a step of the servers' upgrade path" in message(e)
    with pytest.raises(client.ApiException) as e:  # back to the default would be a downgrade later
        update_spec(objs, shared_ns, "MySQLCluster", other, mariadb)
    assert "spec.version cannot be removed once set" in message(e)
    # MySQL: 8.4 LTS -> 9.7 LTS -> a later 9.x; never back
    mysql = {"instances": 1, "flavor": "mysql"}
    third = unique("ver")
    create(objs, shared_ns, cluster_body(third, {**mysql, "version": "8.4"}))
    for version in ("9.7", "9.8.1"):
        update_spec(objs, shared_ns, "MySQLCluster", third, {**mysql, "version": version})
    with pytest.raises(client.ApiException) as e:
        update_spec(objs, shared_ns, "MySQLCluster", third, {**mysql, "version": "8.4"})
    assert "spec.version cannot be lowered" in message(e)


def test_the_older_spellings_stay_admitted_and_a_flavor_may_change_only_its_spelling(objs, shared_ns):
    """An object written with an earlier version's spellings is admitted and means the same; its
    flavor may be respelled (mysql -> MySQL) but not changed (the invalid corpus has mysql ->
    MariaDB); the newer duration beside the older one is admitted (the older one's default is
    stored in every object made before the newer field existed) and the newer one is read."""
    name = unique("spell")
    older = {
        "instances": 3,
        "flavor": "mysql",
        "replication": {
            "mode": "semisync",
            "failover": {"delaySeconds": 20},
            "maxReadLagSeconds": 30,
            "binlogRetention": {"hours": 48},
        },
        "tls": {"certificateValiditySeconds": 86400},
        "backup": {"method": "physical"},
    }
    stored = create(objs, shared_ns, cluster_body(name, older))
    newer = {
        "instances": 3,
        "flavor": "MySQL",
        "replication": {
            "mode": "SemiSync",
            "failover": {"delay": "20s"},
            "maxReadLag": "30s",
            "binlogRetention": {"maxAge": "2d"},
        },
        "tls": {"certificateValidity": "1d"},
        "backup": {"method": "Physical"},
    }
    assert parse(stored).spec == parse(cluster_body(name, newer)).spec
    respelled = update_spec(objs, shared_ns, "MySQLCluster", name, {**older, "flavor": "MySQL"})
    assert respelled["spec"]["flavor"] == "MySQL"
    both = copy.deepcopy(older)
    both["replication"]["failover"]["delay"] = "45s"
    c = parse(update_spec(objs, shared_ns, "MySQLCluster", name, both))
    assert c.spec.replication.failover.delay_seconds == 45
    assert c.superseded == (("spec.replication.failover.delaySeconds", "spec.replication.failover.delay"),)
