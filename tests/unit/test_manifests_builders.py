"""Every manifest builder, from typed specs (pure: no processes)."""

from __future__ import annotations

import base64
import re
import copy
from pathlib import Path

import pytest
import yaml

from mysql_operator import manifests as m
from mysql_operator.api import parse
from mysql_operator.db import accounts
from mysql_operator.db.flavor import Flavor, ServerVersion
from tests.support.specs import FULL, body, cluster

REPO = Path(__file__).resolve().parents[2]


def pw(key: str) -> str:
    return f"secret-{key}"


def by_kind(objs):
    out = {}
    for o in objs:
        out.setdefault(o["kind"], []).append(o)
    return out


def test_build_all_returns_every_object_in_apply_order():
    objs = m.build_all(cluster(), pw)
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("Secret", "db-credentials"),
        ("ConfigMap", "db-config"),
        ("Service", "db-headless"),
        ("Service", "db-rw"),
        ("Service", "db-ro"),
        ("StatefulSet", "db"),
        ("PodDisruptionBudget", "db"),
    ]
    for o in objs:
        assert o["metadata"]["namespace"] == "prod"
        labels = o["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == "db"
        assert labels["app.kubernetes.io/managed-by"] == "mysql-operator"
        assert labels["app.kubernetes.io/name"] == "mysql"
        assert "ownerReferences" not in o["metadata"]


def test_builders_are_deterministic():
    c = parse(body(FULL))
    assert m.build_all(c, pw) == m.build_all(parse(body(copy.deepcopy(FULL))), pw)


def test_generated_secret_holds_every_password_from_the_given_function():
    asked = []

    def password_for(key):
        asked.append(key)
        return f"p'\"\\-{key}"

    s = m.credentials_secret(cluster(database={"name": "app", "user": "appuser"}), password_for)
    assert s["type"] == "Opaque"
    decoded = {k: base64.b64decode(v).decode() for k, v in s["data"].items()}
    assert decoded == {
        k: f"p'\"\\-{k}"
        for k in (
            "root-password",
            "operator-password",
            "replication-password",
            "backup-password",
            "sql-password",
            "monitor-password",
            "binlog-password",
            "app-password",
        )
    }
    assert asked == list(decoded)
    # no app user, no app password; no spec.restore, no restore account
    assert "app-password" not in m.credentials_secret(cluster(database={"name": "app"}), pw)["data"]
    assert "restore-password" not in m.credentials_secret(cluster(), pw)["data"]
    restoring = cluster(restore={"fromBackup": {"name": "nightly"}})
    assert "restore-password" in m.credentials_secret(restoring, pw)["data"]


def test_user_supplied_secret_means_no_secret_is_built_and_the_servers_read_it():
    c = cluster(credentials={"secretName": "mine"}, database={"name": "app", "user": "u"})
    assert m.credentials_secret(c, pw) is None
    assert "Secret" not in by_kind(m.build_all(c, pw))
    sts = m.statefulset(c)
    refs = {
        e["valueFrom"]["secretKeyRef"]["name"]
        for ctr in sts["spec"]["template"]["spec"]["initContainers"]
        + sts["spec"]["template"]["spec"]["containers"]
        for e in ctr["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert refs == {"mine"}


def test_empty_password_is_refused():
    with pytest.raises(ValueError, match="root-password"):
        m.credentials_secret(cluster(), lambda key: "")


def test_no_password_appears_outside_the_secret():
    objs = m.build_all(cluster(database={"name": "app", "user": "u"}), pw)
    for o in objs:
        if o["kind"] != "Secret":
            assert "secret-" not in repr(o)


@pytest.mark.parametrize(
    "flavor,version,expected,absent",
    [
        (
            "mysql",
            "8.4",
            [
                "gtid_mode = ON",
                "enforce_gtid_consistency = ON",
                "super_read_only = ON",
                "log_replica_updates = ON",
                "plugin_load_add = semisync_source.so",
                "plugin_load_add = mysql_clone.so",
                "rpl_semi_sync_source_wait_point = AFTER_SYNC",
            ],
            # the acknowledgements are set at runtime (scaling restarts no server)
            ["gtid_strict_mode", "rpl_semi_sync_source_wait_for_replica_count"],
        ),
        (
            "mariadb",
            "10.11",
            [
                "log_slave_updates = ON",
                "gtid_strict_mode = ON",
                "gtid_domain_id = 0",
                "binlog_format = ROW",
                "rpl_semi_sync_master_wait_point = AFTER_SYNC",
            ],
            ["gtid_mode", "super_read_only", "plugin_load_add", "server_id"],
        ),
    ],
)
def test_config_per_flavor(flavor, version, expected, absent):
    acks = {"semiSyncAcks": 2} if flavor == "mysql" else {}
    c = cluster(flavor=flavor, version=version, replication=acks)
    text = m.config_map(c)["data"]["my.cnf"]
    lines = text.splitlines()
    assert lines[1] == "[mysqld]"
    for e in ["log_bin = binlog", "read_only = ON"] + expected:
        assert e in lines, e
    for a in absent:
        assert not any(line.startswith(a) for line in lines), a


def test_config_fallback_timeout_and_async_mode():
    strict = m.my_cnf(cluster().spec)
    assert "rpl_semi_sync_source_timeout = 4294967295" in strict
    lenient = m.my_cnf(cluster(replication={"allowAsyncFallback": True}).spec)
    assert "rpl_semi_sync_source_timeout = 10000" in lenient
    plain = m.my_cnf(cluster(replication={"mode": "async"}).spec)
    assert "semi_sync" not in plain and "semisync" not in plain


def test_user_config_is_appended_after_the_operators():
    text = m.my_cnf(cluster(config={"myCnf": "max_connections = 7\n[mysqld]\nwait_timeout=60"}).spec)
    assert text.endswith("# spec.config.myCnf\n[mysqld]\nmax_connections = 7\n[mysqld]\nwait_timeout=60\n")
    assert text.index("read_only = ON") < text.index("max_connections = 7")


def test_config_map_ships_the_scripts_and_a_config_change_rolls_the_pods():
    cm = m.config_map(cluster())
    assert set(cm["data"]) == {"my.cnf", "init.sh", "start.sh", "probe.sh", "seed.sh", "exporter.sh"}
    assert "initialize-insecure" in cm["data"]["init.sh"] and "mariadb-install-db" in cm["data"]["init.sh"]
    a = m.statefulset(cluster())["spec"]["template"]["metadata"]["annotations"][m.CONFIG_HASH_ANNOTATION]
    b = m.statefulset(cluster(config={"myCnf": "max_connections=9"}))["spec"]["template"]["metadata"][
        "annotations"
    ][m.CONFIG_HASH_ANNOTATION]
    assert a != b


def test_services():
    c = cluster(service={"type": "LoadBalancer", "annotations": {"lb/internal": "true"}})
    hl, rw, ro = m.headless_service(c), m.primary_service(c), m.replica_service(c)
    sel = {
        "app.kubernetes.io/name": "mysql",
        "app.kubernetes.io/instance": "db",
        "app.kubernetes.io/component": "database",
    }
    assert hl["spec"]["clusterIP"] == "None" and hl["spec"]["publishNotReadyAddresses"] is True
    assert hl["spec"]["selector"] == sel
    assert rw["spec"]["selector"] == {**sel, m.ROLE_LABEL: "primary"}
    assert ro["spec"]["selector"] == {**sel, m.ROLE_LABEL: "replica"}
    for svc in (rw, ro):
        assert svc["spec"]["type"] == "LoadBalancer"
        assert svc["metadata"]["annotations"] == {"lb/internal": "true"}
        assert svc["spec"]["ports"] == [
            {"name": "mysql", "port": 3306, "targetPort": "mysql", "protocol": "TCP"}
        ]
    assert "annotations" not in hl["metadata"]


@pytest.mark.parametrize(
    "resources, server",
    [
        # no CPU named: the server still gets a CPU weight of its own (manifests.SERVER_CPU_REQUEST)
        ({}, {"requests": {"cpu": "25m"}}),
        ({"limits": {"memory": "1Gi"}}, {"limits": {"memory": "1Gi"}, "requests": {"cpu": "25m"}}),
        ({"requests": {"memory": "1Gi"}}, {"requests": {"memory": "1Gi", "cpu": "25m"}}),
        # the user's CPU is theirs: a limit alone is the request too (a default above it is refused)
        ({"requests": {"cpu": "2"}}, {"requests": {"cpu": "2"}}),
        ({"limits": {"cpu": "20m"}}, {"limits": {"cpu": "20m"}}),
    ],
)
@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
def test_the_server_always_requests_cpu_and_the_sidecars_a_little_where_resources_are_set(
    resources, server, flavor
):
    pod = m.statefulset(cluster(flavor=flavor, resources=resources))["spec"]["template"]["spec"]
    by_name = {x["name"]: x for x in pod["containers"] + pod["initContainers"]}
    assert by_name["mysqld"]["resources"] == by_name["init-datadir"]["resources"] == server
    sidecars = [x for name, x in by_name.items() if name in ("exporter", "seed-donor")]
    assert len(sidecars) == (2 if flavor == "mariadb" else 1)
    for x in sidecars:
        assert x["resources"] == ({"requests": {"cpu": "10m", "memory": "32Mi"}} if resources else {})


def test_statefulset_shape():
    c = cluster(
        flavor="mariadb",
        version="11.4",
        instances=5,
        database={"name": "shop", "user": "shop"},
        resources={"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
        storage={"size": "20Gi", "storageClassName": "fast"},
        deletionPolicy="Delete",
    )
    sts = m.statefulset(c)
    spec = sts["spec"]
    assert spec["replicas"] == 5 and spec["serviceName"] == "db-headless"
    assert spec["selector"]["matchLabels"] == m.selector_labels(c)
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Delete", "whenScaled": "Retain"}
    claim = spec["volumeClaimTemplates"][0]["spec"]
    assert claim == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "20Gi"}},
        "storageClassName": "fast",
    }
    pod = spec["template"]["spec"]
    (seed, init), (server, donor, exporter) = pod["initContainers"], pod["containers"]
    assert init["image"] == server["image"] == seed["image"] == donor["image"] == "mariadb:11.4"
    assert exporter["image"] == m.EXPORTER_IMAGE  # never the server's: it has no exporter
    assert init["command"] == ["/bin/bash", "/opt/mysql-operator/config/init.sh"]
    assert server["command"] == ["/bin/bash", "/opt/mysql-operator/config/start.sh"]
    assert (
        server["resources"]
        == init["resources"]
        == {"limits": {"memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}}
    )
    init_env = {e["name"]: e for e in init["env"]}
    assert init_env["MYSQL_OPERATOR_FLAVOR"]["value"] == "mariadb"
    assert init_env["MYSQL_APP_DATABASE"]["value"] == "shop" and init_env["MYSQL_APP_USER"]["value"] == "shop"
    assert init_env["MYSQL_ROOT_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "db-credentials",
        "key": "root-password",
    }
    # every account's privileges, rendered from db/accounts.py for the spec's flavor and version
    assert init_env["MYSQL_OPERATOR_GRANTS"]["value"] == accounts.grant_lines(
        accounts.operator_grants(ServerVersion(Flavor.MARIADB, 11, 4, 0), "shop")
    )
    assert init_env["MYSQL_OPERATOR_GRANTS"]["value"].endswith("ALL PRIVILEGES ON `shop`.* WITH GRANT OPTION")
    assert init_env["MYSQL_REPLICATION_GRANTS"]["value"] == "REPLICATION SLAVE ON *.*"
    assert init_env["MYSQL_APP_GRANTS"]["value"] == "ALL PRIVILEGES ON `shop`.*"
    assert init_env["MYSQL_BACKUP_USER"]["value"] == "mysql-operator-backup"
    assert init_env["MYSQL_BACKUP_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "db-credentials",
        "key": "backup-password",
        "optional": True,
    }
    assert "MYSQL_RESTORE_PASSWORD" not in init_env  # no spec.restore
    server_env = {e["name"] for e in server["env"]}
    assert "MYSQL_ROOT_PASSWORD" not in server_env and {"POD_NAME", "HEADLESS_SERVICE"} <= server_env
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert server[probe]["exec"]["command"][1] == "/opt/mysql-operator/config/probe.sh"
    assert server["readinessProbe"]["exec"]["command"][2] == "ready"
    assert {v["name"] for v in pod["volumes"]} == {
        "config",
        "run",
        "tmp",
        "tls",
        "seed-token",
        "reseed",
        "monitor",
    }
    tls = next(v for v in pod["volumes"] if v["name"] == "tls")["secret"]
    assert tls == {"secretName": "db-tls", "defaultMode": 0o440}  # the key: the server's group only
    server = next(ct for ct in pod["containers"] if ct["name"] == "mysqld")
    assert {"name": "tls", "mountPath": "/etc/mysql-operator/tls", "readOnly": True} in server["volumeMounts"]
    assert {vm["mountPath"] for vm in server["volumeMounts"]} == {
        "/var/lib/mysql",
        "/opt/mysql-operator/config",
        "/run/mysql-operator",
        "/tmp",
        "/etc/mysql-operator/tls",
    }
    assert pod["automountServiceAccountToken"] is False


def test_mariadb_pods_copy_and_receive_copies_and_mysql_pods_do_not():
    """MariaDB re-seeding (sh/seed.sh): the receiving init container runs before the data
    directory is initialised, with the operator's request (optional ConfigMap) and the token
    (the operator password, one key of the credentials Secret, as a file: renewed on rotation,
    never in the environment); the donor sidecar reads the data volume read-only."""
    pod = m.statefulset(cluster(flavor="mariadb", version="11.8"))["spec"]["template"]["spec"]
    seed, init = pod["initContainers"]
    assert (seed["name"], init["name"]) == ("seed", "init-datadir")
    assert seed["command"][-2:] == ["/opt/mysql-operator/config/seed.sh", "receive"]
    donor = next(ct for ct in pod["containers"] if ct["name"] == "seed-donor")
    assert donor["command"][-1] == "serve" and donor["ports"] == [
        {"name": "seed", "containerPort": 3307, "protocol": "TCP"}
    ]
    assert {"name": "data", "mountPath": "/var/lib/mysql", "readOnly": True} in donor["volumeMounts"]
    for ct in (seed, donor):
        assert not any("PASSWORD" in e["name"] for e in ct.get("env", []))
        assert {"name": "seed-token", "mountPath": "/etc/mysql-operator/seed", "readOnly": True} in ct[
            "volumeMounts"
        ]
    volumes = {v["name"]: v for v in pod["volumes"]}
    operator, backup = volumes["seed-token"]["projected"]["sources"]
    assert operator["secret"]["items"] == [{"key": "operator-password", "path": "token"}]
    assert "optional" not in operator["secret"]  # a Pod without it does not start
    # a physical backup's Job asks with the backup account's; a Secret of the user's may lack it
    assert backup["secret"] == {
        "name": operator["secret"]["name"],
        "items": [{"key": "backup-password", "path": "backup-token"}],
        "optional": True,
    }
    assert volumes["reseed"]["configMap"] == {"name": "db-reseed", "optional": True, "defaultMode": 0o444}
    mysql = m.statefulset(cluster(flavor="mysql"))["spec"]["template"]["spec"]
    assert [ct["name"] for ct in mysql["initContainers"] + mysql["containers"]] == [
        "init-datadir",
        "mysqld",
        "exporter",
    ]


@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
def test_the_metrics_sidecar_reads_its_password_from_a_file_and_can_be_turned_off(flavor):
    """mysqld_exporter on the port named metrics, its password (monitor-password) a file of the
    credentials Secret renewed in place on rotation - never in its environment or argv."""
    pod = m.statefulset(cluster(flavor=flavor))["spec"]["template"]["spec"]
    exporter = next(ct for ct in pod["containers"] if ct["name"] == "exporter")
    assert exporter["ports"] == [{"name": "metrics", "containerPort": 9104, "protocol": "TCP"}]
    assert exporter["command"] == ["/bin/sh", "/opt/mysql-operator/config/exporter.sh"]  # busybox's
    assert exporter["image"] == m.EXPORTER_IMAGE
    assert not any("PASSWORD" in e["name"] for e in exporter["env"])
    assert {"name": "monitor", "mountPath": "/etc/mysql-operator/monitor", "readOnly": True} in exporter[
        "volumeMounts"
    ]
    assert {"name": "data", "mountPath": "/var/lib/mysql"} not in exporter["volumeMounts"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["monitor"]["secret"]["items"] == [{"key": "monitor-password", "path": "password"}]
    assert volumes["monitor"]["secret"]["optional"] is True
    # the operator's exporter image (chart value exporterImage), or the cluster's own
    (named,) = [
        ct
        for ct in m.statefulset(cluster(flavor=flavor), "r.example/exp:1")["spec"]["template"]["spec"][
            "containers"
        ]
        if ct["name"] == "exporter"
    ]
    assert named["image"] == "r.example/exp:1"
    own = cluster(flavor=flavor, monitoring={"image": "mine/exporter:2"})
    (mine,) = [
        ct
        for ct in m.statefulset(own, "r.example/exp:1")["spec"]["template"]["spec"]["containers"]
        if ct["name"] == "exporter"
    ]
    assert mine["image"] == "mine/exporter:2"
    off = m.statefulset(cluster(flavor=flavor, monitoring={"enabled": False}))["spec"]["template"]["spec"]
    assert "exporter" not in [ct["name"] for ct in off["containers"]]
    assert "monitor" not in [v["name"] for v in off["volumes"]]


def test_the_default_exporter_image_is_the_pinned_mysqld_exporter_the_build_makes():
    """The operator's default, the chart's default and hack/versions.env name one version."""
    env = dict(
        line.split("=", 1)
        for line in (REPO / "hack" / "versions.env").read_text().splitlines()
        if "=" in line
    )
    assert m.EXPORTER_IMAGE == f"localhost/mysqld-exporter:{env['MYSQLD_EXPORTER_VERSION']}"
    values = yaml.safe_load((REPO / "charts" / "mysql-operator" / "values.yaml").read_text())["exporterImage"]
    assert f"{values['repository']}:{values['tag']}" == m.EXPORTER_IMAGE


def test_every_tool_image_the_operator_names_is_one_the_build_makes():
    """tools_image names REPOSITORY:FLAVOR-SERIES for TOOLS_SERIES: hack/build-images.sh builds
    each (and nothing names one it does not build)."""
    script = (REPO / "hack" / "build-images.sh").read_text()
    built = set(re.findall(r'echo "localhost/mysql-operator-tools:([a-z]+-[0-9.]+)"', script))
    named = {f"{flavor}-{series}" for flavor, all_series in m.TOOLS_SERIES.items() for series in all_series}
    assert m.TOOLS_REPOSITORY == "localhost/mysql-operator-tools"
    assert built == named


def test_restricted_pod_security():
    pod = m.statefulset(cluster())["spec"]["template"]["spec"]
    psc = pod["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] == 999 and psc["fsGroup"] == 999
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    for ctr in pod["initContainers"] + pod["containers"]:
        sc = ctr["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 999
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not any("hostPath" in v for v in pod["volumes"])


def test_scheduling_defaults_and_overrides():
    pod = m.statefulset(cluster())["spec"]["template"]["spec"]
    pref = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert pref["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert pref["podAffinityTerm"]["labelSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "db"
    for key in ("tolerations", "nodeSelector", "priorityClassName"):
        assert key not in pod

    full = parse(body(FULL))
    pod = m.statefulset(full)["spec"]["template"]["spec"]
    assert pod["affinity"] == FULL["affinity"]
    assert pod["tolerations"] == FULL["tolerations"]
    assert pod["nodeSelector"] == {"zone": "a"} and pod["priorityClassName"] == "high"
    assert pod["containers"][0]["image"] == "registry.local/mysql:lts"


def test_pod_labels_and_annotations_never_replace_the_operators():
    sts = m.statefulset(cluster(podLabels={"team": "x"}, podAnnotations={"a": "b"}))
    meta = sts["spec"]["template"]["metadata"]
    assert meta["labels"]["team"] == "x"
    assert all(meta["labels"][k] == v for k, v in m.selector_labels(cluster()).items())
    assert meta["annotations"]["a"] == "b" and m.CONFIG_HASH_ANNOTATION in meta["annotations"]
    assert m.ROLE_LABEL not in meta["labels"]  # the operator labels Pods, not the template


def test_pod_disruption_budget():
    pdb = m.pod_disruption_budget(cluster())
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": m.selector_labels(cluster())}}


def test_immutable_parts_of_the_statefulset_depend_only_on_immutable_fields():
    """selector, serviceName, volumeClaimTemplates and podManagementPolicy cannot change on a live
    StatefulSet: only the flavor, the name and the storage (all immutable) may feed them."""

    def frozen_parts(c):
        s = m.statefulset(c)["spec"]
        return (s["selector"], s["serviceName"], s["volumeClaimTemplates"], s["podManagementPolicy"])

    base = frozen_parts(parse(body(FULL)))
    from tests.support.specs import CHANGES, RECONCILE_INPUTS, changed_spec, is_immutable

    for path in CHANGES:
        if is_immutable(path) or path in RECONCILE_INPUTS:
            continue
        _, new = changed_spec(path)
        assert frozen_parts(parse(body(new))) == base, path


def test_owned_adds_a_controller_reference_without_touching_the_input():
    obj = m.config_map(cluster())
    owner = {
        "apiVersion": "mysql.operator.dev/v1alpha1",
        "kind": "MySQLCluster",
        "metadata": {"name": "db", "uid": "1234"},
    }
    out = m.owned(obj, owner)
    assert out["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "mysql.operator.dev/v1alpha1",
            "kind": "MySQLCluster",
            "name": "db",
            "uid": "1234",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert "ownerReferences" not in obj["metadata"]
    with pytest.raises(ValueError, match="uid"):
        m.owned(obj, {"metadata": {"name": "db"}})


def test_names_and_hosts():
    c = cluster()
    assert m.pod_host(c, 2) == "db-2.db-headless.prod.svc"
    assert m.credentials_secret_name(c) == "db-credentials"
    assert m.credentials_secret_name(cluster(credentials={"secretName": "x"})) == "x"


def test_random_password():
    a, b = m.random_password(), m.random_password()
    assert a != b and len(a) == 32 and a.isalnum()


def test_a_new_operator_versions_scripts_restart_no_server_but_a_config_change_does(monkeypatch):
    """An operator upgrade that changes the scripts beside my.cnf changes the ConfigMap only: the
    StatefulSet's Pod template (and so its revision) stays, so no server restarts; a change of
    spec.config.myCnf changes the template (the servers roll to read it)."""
    from mysql_operator.manifests import servers

    c = cluster()
    template = m.statefulset(c)["spec"]["template"]
    for script in ("START_SH", "INIT_SH", "PROBE_SH", "SEED_SH", "EXPORTER_SH"):
        monkeypatch.setattr(servers, script, getattr(servers, script) + "\n# the next version\n")
    assert m.config_map(c)["data"]["start.sh"].endswith("# the next version\n")
    assert m.statefulset(c)["spec"]["template"] == template
    tuned = cluster(config={"myCnf": "[mysqld]\nmax_connections = 500\n"})
    assert m.statefulset(tuned)["spec"]["template"] != template


@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
def test_scaling_changes_no_pod_template_so_no_server_restarts(flavor):
    """3 -> 5 instances: MySQL's commits then wait for 2 acknowledgements, set on the primary at
    runtime; nothing in the Pods (my.cnf, its hash) changes, so no Pod is restarted."""
    three, five = (m.statefulset(cluster(flavor=flavor, instances=n)) for n in (3, 5))
    assert three["spec"]["template"] == five["spec"]["template"]
    assert m.config_map(cluster(flavor=flavor, instances=3)) == m.config_map(
        cluster(flavor=flavor, instances=5)
    )
