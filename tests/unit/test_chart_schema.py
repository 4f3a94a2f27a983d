"""values.schema.json and the chart's own checks refuse bad values with a message that names the
value (and the bad input); the example values files are accepted."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.chart import CHART, REPO, RenderError, helm_template

BAD = [
    # (--set argument, fragments the error must contain)
    ("replicas=abc", ["/replicas", "got string, want integer"]),
    ("replicas=-1", ["/replicas", "minimum"]),
    ("logFormat=xml", ["/logFormat", "json", "text"]),
    ("operatorUpgrades=Never", ["/operatorUpgrades", "Auto", "Manual"]),
    ("image.pullPolicy=Sometimes", ["/image/pullPolicy", "IfNotPresent"]),
    ("image.repository=", ["/image/repository"]),
    ("watchNamespaces={Team_A}", ["/watchNamespaces/0", "Team_A"]),
    ("watchNamespaces={a,a}", ["/watchNamespaces", "are equal"]),
    ("watchNamespace={a}", ["watchNamespace", "not allowed"]),
    ("metrics.port=70000", ["/metrics/port", "65,535"]),
    ("metrics.enabled=yes", ["/metrics/enabled", "want boolean"]),
    ("metrics.service.type=Headless", ["/metrics/service/type", "ClusterIP"]),
    ("metrics.serviceMonitor.interval=often", ["/metrics/serviceMonitor/interval", "often"]),
    ("livenessProbe.port=0", ["/livenessProbe/port", "minimum"]),
    ("peering.enabled=maybe", ["/peering/enabled", "want boolean"]),
    ("rbac.create=1", ["/rbac/create", "want boolean"]),
    ("serviceAccount.extra=1", ["/serviceAccount", "extra", "not allowed"]),
    ("extraArgs={oops}", ["/extraArgs/0", "oops"]),
    ("nodeSelector.zone=1", ["/nodeSelector/zone", "want string"]),
    # checks no schema can express, made by the templates
    ("replicas=2,leaderElection.enabled=false", ["replicas", "leaderElection.enabled"]),
    ("peering.enabled=true", ["peering.enabled", "leaderElection.enabled"]),
    (
        "replicas=2,peering.enabled=true,leaderElection.enabled=false",
        ["replicas", "peering.enabled", "leaderElection.enabled: true"],
    ),
    ("metrics.serviceMonitor.enabled=true", ["metrics.serviceMonitor.enabled", "metrics.enabled"]),
    ("metrics.enabled=true,metrics.port=8080", ["metrics.port", "livenessProbe.port"]),
]


@pytest.mark.parametrize("arg,fragments", BAD, ids=[a for a, _ in BAD])
def test_bad_value_is_refused_with_a_message_naming_it(arg, fragments):
    with pytest.raises(RenderError) as e:
        helm_template({}, "--set", arg)
    message = str(e.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in helm's error:\n{message}"


@pytest.mark.parametrize("path", sorted((REPO / "examples").glob("values-*.yaml")), ids=lambda p: p.name)
def test_example_values_are_accepted(path: Path):
    helm_template(yaml.safe_load(path.read_text()))


def test_default_values_satisfy_the_schema_and_every_key_is_described():
    import json

    schema = json.loads((CHART / "values.schema.json").read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    assert schema["additionalProperties"] is False
    assert set(defaults) <= set(schema["properties"])
    for key, value in defaults.items():
        if isinstance(value, dict) and schema["properties"][key].get("additionalProperties") is False:
            assert set(value) <= set(schema["properties"][key]["properties"]), key
    helm_template({})
