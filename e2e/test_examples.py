"""Every cluster example in examples/, and the one the chart's NOTES.txt prints, runs on the
flavor it names, with the operator installed by its chart: applied as a user would (kubectl
apply), it becomes Ready and serves its application database through -rw with the settings it
shows (its my.cnf lines, semi-sync, labels).

What this machine cannot give an example is replaced, and only that: the image (the registry
beside the local cluster has the example's flavor, and its version, MySQL 9.7 for the examples'
8.4), the storage (1Gi of the local StorageClass), memory requests sized for a shared 2-core node,
and the backup section (its S3 bucket is the user's; backups are exercised in
test_scenarios_backup.py)."""

from __future__ import annotations

import copy
import subprocess
import textwrap

import pytest
import yaml

from e2e.examples import runnable_here
from e2e.helpers import REPO, Cluster, kubectl, query, record, stopwatch, try_query
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster

EXAMPLES = ["one-instance.yaml", "three-instance.yaml", "mariadb.yaml"]


def notes_cluster(local_cluster) -> dict:
    """The MySQLCluster the chart's NOTES.txt (as `helm install` printed it) asks a new user to
    apply first."""
    from e2e.conftest import OPERATOR_NAMESPACE, helm_env
    from tests.support.controlplane import binary

    r = subprocess.run(
        [str(binary("helm")), "get", "notes", "mysql-operator", "--namespace", OPERATOR_NAMESPACE],
        capture_output=True,
        text=True,
        env=helm_env(local_cluster),
    )
    assert r.returncode == 0, r.stderr
    body = r.stdout.split("<<'YAML'\n", 1)[1].split("\n     YAML\n", 1)[0]
    return yaml.safe_load(textwrap.dedent(body))


@pytest.mark.parametrize("example", [*EXAMPLES, "NOTES.txt"])
def test_an_example_runs_on_the_flavor_it_names(local_cluster, operator_release, scenario_namespace, example):
    if example == "NOTES.txt":
        original = notes_cluster(local_cluster)
    else:
        original = yaml.safe_load((REPO / "examples" / example).read_text())
    doc = runnable_here(copy.deepcopy(original))
    name, spec = doc["metadata"]["name"], doc["spec"]
    elapsed = stopwatch()
    r = kubectl(
        local_cluster.kubeconfig, "apply", "-n", scenario_namespace, "-f", "-", input=yaml.safe_dump(doc)
    )
    assert r.returncode == 0, r.stderr
    c = Cluster(local_cluster.api_client(), scenario_namespace, name)
    c.wait_ready(300, instances=spec["instances"])
    record(f"example {example} ({spec['flavor']}) applied to Ready", elapsed())

    db = spec.get("database", {}).get("name")
    user = spec.get("database", {}).get("user")
    rw = c.service_ip("rw")
    if db:
        pw = c.password()
        wait_for(lambda: try_query(rw, user, pw, "SELECT 1"), 60, "-rw answering the example's user")
        query(rw, user, pw, f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
        query(rw, user, pw, f"INSERT INTO {db}.t VALUES (1)")
        assert query(rw, user, pw, f"SELECT COUNT(*) FROM {db}.t") == ((1,),)
    # the example's own settings reached the servers (read as the operator's account: any example
    # has it, not every example has an application user)
    for line in original["spec"].get("config", {}).get("myCnf", "").splitlines():
        key, _, value = (p.strip() for p in line.partition("="))
        if key == "max_connections":
            got = query(
                c.pod(0).status.pod_ip,
                "mysql-operator",
                c.password("operator-password"),
                "SELECT @@max_connections",
            )[0][0]
            assert str(got) == value, (key, got, value)
    labels = original["spec"].get("podLabels") or {}
    for pod in c.pods():
        assert labels.items() <= (pod.metadata.labels or {}).items()
    assert c.roles()[f"{name}-0"] == "primary"
