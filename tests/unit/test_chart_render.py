"""The Helm chart rendered by the real `helm template` with several values; objects checked as dicts.

The helpers the chart tests share, `render(values)` and `helm_or_skip()`, are in tests/support/chart.py.
"""

from __future__ import annotations

import subprocess
import tomllib

import pytest
import yaml

import mysql_operator
from tests.support.chart import (
    CHART,
    KUBE_VERSION,
    MONITORING_APIS,
    RELEASE,
    RELEASE_NS,
    REPO,
    RenderError,
    helm_or_skip,
    of_kind,
    one,
    render,
)

# CRDs the chart ships besides the project's own (kopf's peering objects)
KOPF_CRDS = {"kopfpeerings.yaml", "clusterkopfpeerings.yaml"}


def container(objs: list[dict]) -> dict:
    (c,) = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return c


# --------------------------------------------------------------------------------- CRDs, versions


def test_chart_crds_are_byte_identical_copies_of_crds_dir():
    project = {p.name: p.read_bytes() for p in (REPO / "crds").glob("*.yaml")}
    shipped = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert project, "crds/ is empty"
    for name, content in project.items():
        assert name in shipped, f"charts/mysql-operator/crds/{name} is missing: cp crds/{name} there"
        assert shipped[name] == content, (
            f"charts/mysql-operator/crds/{name} differs from crds/{name}: copy it again"
        )
    assert set(shipped) - set(project) == KOPF_CRDS


def test_rendered_crds_are_the_project_crds_and_kopf_peering():
    crds = of_kind(render(), "CustomResourceDefinition")
    names = {c["metadata"]["name"] for c in crds}
    project = {yaml.safe_load(p.read_text())["metadata"]["name"] for p in (REPO / "crds").glob("*.yaml")}
    assert names == project | {"kopfpeerings.kopf.dev", "clusterkopfpeerings.kopf.dev"}
    peering = {c["metadata"]["name"]: c["spec"]["scope"] for c in crds if c["spec"]["group"] == "kopf.dev"}
    assert peering == {"kopfpeerings.kopf.dev": "Namespaced", "clusterkopfpeerings.kopf.dev": "Cluster"}


def test_app_version_is_the_package_version():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert chart["appVersion"] == mysql_operator.__version__ == pyproject["project"]["version"]
    local = yaml.safe_load((REPO / "examples" / "values-local.yaml").read_text())
    assert local["image"]["tag"] == chart["appVersion"]


@pytest.mark.parametrize("values_file", [None, "values-namespaced.yaml", "values-local.yaml"])
def test_helm_lint_strict_is_clean(values_file):
    helm = helm_or_skip()
    argv = [helm, "lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION]
    if values_file:
        argv += ["-f", str(REPO / "examples" / values_file)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[WARNING]" not in r.stdout and "[ERROR]" not in r.stdout, r.stdout


# --------------------------------------------------------------------------------- the Deployment


@pytest.mark.parametrize(
    "values", [{}, {"watchNamespaces": ["a", "b"], "replicas": 2}], ids=["all-namespaces", "namespaced"]
)
def test_pod_runs_restricted(values):
    objs = render(values)
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not any(k in pod for k in ("hostNetwork", "hostPID", "hostIPC"))
    assert all("hostPath" not in v for v in pod.get("volumes", []))
    for c in pod["containers"] + pod.get("initContainers", []):
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert sc.get("privileged", False) is False
        assert sc["runAsNonRoot"] is True
    # a read-only root still gives Python a writable /tmp
    mounts = {m["mountPath"]: m["name"] for m in container(objs)["volumeMounts"]}
    (tmp,) = [v for v in pod["volumes"] if v["name"] == mounts["/tmp"]]
    assert "emptyDir" in tmp


def _flag(args: list[str], name: str) -> list[str]:
    return [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]


def test_liveness_probe_hits_the_operators_liveness_endpoint():
    c = container(render({"livenessProbe": {"port": 8181, "failureThreshold": 5}}))
    (url,) = _flag(c["args"], "liveness")
    assert url == "http://0.0.0.0:8181/healthz"
    probe = c["livenessProbe"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert probe["httpGet"]["path"] == "/healthz"
    assert ports[probe["httpGet"]["port"]] == 8181
    assert probe["failureThreshold"] == 5


def test_all_namespaces_by_default():
    c = container(render())
    assert c["args"][0] == "run"
    assert "--all-namespaces" in c["args"] and not _flag(c["args"], "namespace")
    assert _flag(c["args"], "log-format") == ["json"]
    assert _flag(c["args"], "leader-elect") == [f"{RELEASE}-mysql-operator"]
    assert not _flag(c["args"], "peering")


def test_watch_namespaces_become_namespace_flags():
    c = container(render({"watchNamespaces": ["team-a", "team-b"], "logFormat": "text"}))
    assert _flag(c["args"], "namespace") == ["team-a", "team-b"]
    assert "--all-namespaces" not in c["args"]
    assert _flag(c["args"], "log-format") == ["text"]


def test_operator_upgrades_reaches_the_operator_as_its_default_for_clusters():
    def env(values: dict | None) -> dict:
        return {e["name"]: e.get("value") for e in container(render(values)).get("env", [])}

    assert env(None)["OPERATOR_UPGRADES"] == "Auto"
    assert env({"operatorUpgrades": "Manual"})["OPERATOR_UPGRADES"] == "Manual"


def test_image_defaults_to_app_version_and_can_be_overridden():
    app = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    c = container(render())
    assert c["image"] == f"localhost/mysql-operator:{app}"
    assert c["imagePullPolicy"] == "IfNotPresent"
    c = container(
        render(
            {
                "image": {
                    "repository": "registry.example/ops/mysql-operator",
                    "tag": "9.9.9",
                    "pullPolicy": "Always",
                }
            }
        )
    )
    assert c["image"] == "registry.example/ops/mysql-operator:9.9.9"
    assert c["imagePullPolicy"] == "Always"
    # backup and restore Jobs run the image the operator runs (from the registry it came from)
    assert {"name": "MYSQL_OPERATOR_IMAGE", "value": "registry.example/ops/mysql-operator:9.9.9"} in c["env"]


def test_the_metrics_sidecars_image_is_the_operators_default_and_can_be_overridden():
    from mysql_operator.manifests import EXPORTER_IMAGE

    def exporter_image(values):
        return {e["name"]: e.get("value") for e in container(render(values))["env"]}[
            "MYSQL_OPERATOR_EXPORTER_IMAGE"
        ]

    assert exporter_image(None) == EXPORTER_IMAGE
    assert (
        exporter_image({"exporterImage": {"repository": "r.example/exp", "tag": "v1"}}) == "r.example/exp:v1"
    )


def test_the_tool_images_repository_is_the_operators_default_and_can_be_overridden():
    from mysql_operator.manifests.common import TOOLS_REPOSITORY

    def tools(values):
        return {e["name"]: e.get("value") for e in container(render(values))["env"]}[
            "MYSQL_OPERATOR_TOOLS_IMAGE"
        ]

    assert tools(None) == TOOLS_REPOSITORY
    assert tools({"toolsImage": {"repository": "r.example/tools"}}) == "r.example/tools"


def test_values_local_pulls_the_pushed_image_from_the_registry_beside_the_cluster():
    from mysql_operator.manifests import EXPORTER_IMAGE
    from mysql_operator.manifests.common import TOOLS_REPOSITORY
    from tests.support.cluster import PULL_SECRET, registry_ref

    values = yaml.safe_load((REPO / "examples" / "values-local.yaml").read_text())
    rendered = render(values)
    c = container(rendered)
    assert c["image"] == registry_ref(f"localhost/mysql-operator:{mysql_operator.__version__}")
    assert c["imagePullPolicy"] == "Always"  # a rebuilt image is pushed under the same tag
    exporter = {e["name"]: e.get("value") for e in c["env"]}["MYSQL_OPERATOR_EXPORTER_IMAGE"]
    assert exporter == registry_ref(EXPORTER_IMAGE)
    tools = {e["name"]: e.get("value") for e in c["env"]}["MYSQL_OPERATOR_TOOLS_IMAGE"]
    assert tools == registry_ref(TOOLS_REPOSITORY)
    pod = next(d for d in rendered if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": PULL_SECRET}]


@pytest.mark.parametrize("example", ["local-demo.yaml", "local-demo-mysql.yaml"])
def test_the_demo_clusters_pull_the_pushed_images_with_the_demos_secret(example):
    from tests.support.cluster import PULL_SECRET, registry_ref

    spec = yaml.safe_load((REPO / "examples" / example).read_text())["spec"]
    local = {"mysql": "localhost/mysql:9.7", "mariadb": "localhost/mariadb:10.11"}[spec["flavor"].lower()]
    assert spec["image"] == registry_ref(local)
    assert spec["imagePullSecrets"] == [{"name": PULL_SECRET}]


def test_scheduling_resources_and_replicas_pass_through():
    values = {
        "replicas": 3,
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        },
        "priorityClassName": "system-cluster-critical",
        "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "imagePullSecrets": [{"name": "regcred"}],
        "extraArgs": ["--debug"],
        "extraEnv": [{"name": "TZ", "value": "UTC"}],
    }
    dep = one(render(values), "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == 3
    for key in ("nodeSelector", "tolerations", "affinity", "priorityClassName", "imagePullSecrets"):
        assert pod[key] == values[key], key
    (c,) = pod["containers"]
    assert c["resources"] == values["resources"]
    assert c["args"][-1] == "--debug"
    assert {"name": "TZ", "value": "UTC"} in c["env"]


def test_default_resources_are_bounded():
    c = container(render())
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    assert c["resources"]["limits"]["memory"]


def test_common_labels_and_annotations_on_every_object_but_selector_labels_win():
    values = {
        "commonLabels": {"team": "db", "app.kubernetes.io/instance": "hijack"},
        "commonAnnotations": {"owner": "dba@example.org"},
        "podLabels": {"tier": "control", "app.kubernetes.io/name": "hijack"},
        "podAnnotations": {"scrape": "no"},
        "watchNamespaces": ["a"],
        "metrics": {"enabled": True, "serviceMonitor": {"enabled": True, "labels": {"prom": "main"}}},
    }
    objs = [o for o in render(values, *MONITORING_APIS) if o["kind"] != "CustomResourceDefinition"]
    assert {o["kind"] for o in objs} >= {
        "Deployment",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "Service",
        "ServiceMonitor",
    }
    for o in objs:
        md = o["metadata"]
        assert md["labels"]["team"] == "db", o["kind"]
        assert md["labels"]["app.kubernetes.io/instance"] == RELEASE, o["kind"]
        assert md["annotations"]["owner"] == "dba@example.org", o["kind"]
    dep = one(objs, "Deployment")
    tmpl = dep["spec"]["template"]["metadata"]
    assert tmpl["labels"]["tier"] == "control"
    assert tmpl["annotations"].pop("mysql.operator.dev/crds-digest")  # restarts it when the CRDs change
    assert tmpl["annotations"] == {"scrape": "no", "owner": "dba@example.org"}
    selector = dep["spec"]["selector"]["matchLabels"]
    assert selector == {"app.kubernetes.io/name": "mysql-operator", "app.kubernetes.io/instance": RELEASE}
    assert selector.items() <= tmpl["labels"].items()
    assert one(objs, "ServiceMonitor")["metadata"]["labels"]["prom"] == "main"


def test_objects_live_in_the_release_namespace():
    objs = render({}, namespace="mysql-ops")
    for o in objs:
        if o["kind"] in ("Deployment", "ServiceAccount", "Service"):
            assert o["metadata"]["namespace"] == "mysql-ops", o["kind"]


# --------------------------------------------------------------------------------- metrics


def test_metrics_are_off_by_default():
    objs = render()
    assert not of_kind(objs, "Service") and not of_kind(objs, "ServiceMonitor")
    c = container(objs)
    assert "METRICS_PORT" not in {e["name"] for e in c["env"]}
    assert "metrics" not in {p["name"] for p in c["ports"]}


def test_metrics_service_and_service_monitor_select_the_operator():
    objs = render(
        {"metrics": {"enabled": True, "port": 9191, "serviceMonitor": {"enabled": True, "interval": "15s"}}},
        *MONITORING_APIS,
    )
    c = container(objs)
    assert {"name": "METRICS_PORT", "value": "9191"} in c["env"]
    assert {"name": "metrics", "containerPort": 9191, "protocol": "TCP"} in c["ports"]
    svc = one(objs, "Service")
    pod_labels = one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert svc["spec"]["ports"] == [
        {"name": "metrics", "port": 9191, "targetPort": "metrics", "protocol": "TCP"}
    ]
    sm = one(objs, "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [RELEASE_NS]}
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    assert sm["spec"]["endpoints"][0]["interval"] == "15s"


def test_metrics_service_alone_without_service_monitor():
    objs = render({"metrics": {"enabled": True}})
    assert one(objs, "Service") and not of_kind(objs, "ServiceMonitor")


# --------------------------------------------------------------------------------- peering


PEERING = {"peering": {"enabled": True}, "leaderElection": {"enabled": False}}


def test_cluster_peering_object_when_watching_all_namespaces():
    objs = render(PEERING)
    peering = one(objs, "ClusterKopfPeering")
    assert peering["apiVersion"] == "kopf.dev/v1"
    assert _flag(container(objs)["args"], "peering") == [peering["metadata"]["name"]]
    assert not of_kind(objs, "KopfPeering")


def test_one_namespaced_peering_object_per_watched_namespace():
    objs = render(
        {
            "watchNamespaces": ["a", "b"],
            "peering": {"enabled": True, "name": "ops-peers"},
            "leaderElection": {"enabled": False},
        }
    )
    peerings = of_kind(objs, "KopfPeering")
    assert sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in peerings) == [
        ("a", "ops-peers"),
        ("b", "ops-peers"),
    ]
    assert _flag(container(objs)["args"], "peering") == ["ops-peers"]
    assert not of_kind(objs, "ClusterKopfPeering")


def test_standalone_without_peering_or_leader_election():
    objs = render({"leaderElection": {"enabled": False}})
    args = container(objs)["args"]
    assert not _flag(args, "peering") and not _flag(args, "leader-elect")  # kopf runs standalone
    assert not of_kind(objs, "ClusterKopfPeering") and not of_kind(objs, "KopfPeering")


def test_two_replicas_are_elected_on_a_lease_and_never_both_ways():
    assert _flag(container(render({"replicas": 2}))["args"], "leader-elect") == [f"{RELEASE}-mysql-operator"]
    with pytest.raises(RenderError) as e:
        render({"peering": {"enabled": True}})
    assert "choose one way to elect the active replica" in str(e.value)
    # kopf's peering pauses every operator of equal priority, and one Deployment's replicas share it
    with pytest.raises(RenderError) as e:
        render({"replicas": 2, **PEERING})
    assert "kopf then pauses every one of them" in str(e.value) and "leaderElection.enabled: true" in str(
        e.value
    )


# --------------------------------------------------------------------------------- the operator's CLI


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"watchNamespaces": ["team-a", "team-b"], "logFormat": "text", "replicas": 2},
        {"leaderElection": {"enabled": False}, "extraArgs": ["--verbose"]},
        PEERING,
    ],
    ids=["all-namespaces", "namespaced", "standalone", "peering"],
)
def test_operator_cli_accepts_the_rendered_arguments(values):
    """The Deployment's args parse with the operator's own argument parser (mysql_operator/cli.py)."""
    from mysql_operator import cli

    args = cli.build_parser().parse_args(container(render(values))["args"])
    assert args.command == "run"
    assert args.all_namespaces is (not values.get("watchNamespaces"))
    assert (args.namespace or []) == values.get("watchNamespaces", [])
    assert args.liveness == "http://0.0.0.0:8080/healthz"
    assert args.log_format == values.get("logFormat", "json")
    peering = values.get("peering", {}).get("enabled", False)
    assert args.peering == (f"{RELEASE}-mysql-operator" if peering else None)
    elected = values.get("leaderElection", {}).get("enabled", True)
    assert args.leader_elect == (f"{RELEASE}-mysql-operator" if elected else None)


def test_a_standby_comes_with_a_disruption_budget_of_one():
    assert not of_kind(render(), "PodDisruptionBudget")
    objs = render({"replicas": 2})
    pdb = one(objs, "PodDisruptionBudget")
    dep = one(objs, "Deployment")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    assert pdb["metadata"]["namespace"] == dep["metadata"]["namespace"]
