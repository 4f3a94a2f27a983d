"""hack/release.sh, the steps .github/workflows/release.yml runs on a tag, against the test
registry (TLS, basic auth) with this machine's architecture: every image a user's cluster pulls
is pushed as a multi-architecture index; the chart pushed beside them, rendered with no values,
names only images that are there (the operator's, the metrics sidecar's and the client tools of
every series the operator picks them for); a tag other than v + appVersion is refused."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from mysql_operator.manifests.common import TOOLS_SERIES
from tests.support.chart_oci import chart_version
from tests.support.controlplane import binary

REPO = Path(__file__).resolve().parents[2]
RELEASE = REPO / "hack" / "release.sh"
INDEX_TYPES = {
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
}


def _release(env: dict, *args: str) -> str:
    r = subprocess.run([str(RELEASE), *map(str, args)], capture_output=True, text=True, env=env, timeout=1200)
    assert r.returncode == 0, f"hack/release.sh {args[0]} exited {r.returncode}: {r.stderr[-3000:]}"
    return r.stdout


def _split(ref: str, registry) -> tuple[str, str]:
    """REGISTRY/REPO:TAG -> (REPO, TAG)"""
    assert ref.startswith(f"{registry.address}/"), ref
    repo, _, tag = ref.removeprefix(f"{registry.address}/").rpartition(":")
    return repo, tag


@pytest.fixture(scope="module")
def release_env(registry, tmp_path_factory):
    helm = binary("helm")
    if not helm.exists():
        pytest.skip(reason=f"helm not built ({helm}): hack/build-binaries.sh control-plane")
    d = tmp_path_factory.mktemp("release-credentials")
    (d / "auth.json").write_text(json.dumps(registry.docker_config()))
    (d / "certs").mkdir()
    (d / "certs" / "ca.crt").write_bytes(registry.ca_file.read_bytes())
    return {
        **os.environ,
        "PATH": f"{helm.parent}:{os.environ['PATH']}",
        "RELEASE_AUTHFILE": str(d / "auth.json"),
        "RELEASE_CERT_DIR": str(d / "certs"),
        "HELM_CACHE_HOME": str(d / "helm-cache"),
        "HELM_CONFIG_HOME": str(d / "helm-config"),
    }


def test_a_release_pushes_every_image_a_cluster_pulls_and_a_chart_that_names_only_them(
    registry, release_env, tmp_path
):
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
    _release(release_env, "build", tmp_path / arch)
    pushed = {}
    for line in _release(release_env, "publish", registry.address, tmp_path / arch).split():
        ref, _, digest = line.partition("@")
        repo, tag = _split(ref, registry)
        index = registry.manifest(repo, tag)
        assert index["mediaType"] in INDEX_TYPES, (ref, index["mediaType"])
        assert [m["platform"] for m in index["manifests"]] == [{"architecture": arch, "os": "linux"}], ref
        assert registry.manifest_digest(repo, tag) == digest, ref
        pushed[(repo, tag)] = digest
    assert len(pushed) == 5, pushed  # the operator, the exporter, three tool images

    chart_ref = _release(release_env, "chart", registry.address, tmp_path / "chart").strip()
    version = chart_version()
    assert chart_ref.startswith(f"oci://{registry.address}/charts/mysql-operator:{version}@sha256:"), (
        chart_ref
    )
    rendered = subprocess.run(
        [
            "helm",
            "template",
            "mysql-operator",
            f"oci://{registry.address}/charts/mysql-operator",
            "--version",
            version,
            "--ca-file",
            f"{release_env['RELEASE_CERT_DIR']}/ca.crt",
            "--registry-config",
            release_env["RELEASE_AUTHFILE"],
        ],
        capture_output=True,
        text=True,
        env=release_env,
        timeout=120,
        check=True,
    ).stdout
    (deployment,) = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"]
    (operator,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in operator["env"]}
    named = [operator["image"], env["MYSQL_OPERATOR_IMAGE"], env["MYSQL_OPERATOR_EXPORTER_IMAGE"]] + [
        f"{env['MYSQL_OPERATOR_TOOLS_IMAGE']}:{flavor}-{series}"
        for flavor, all_series in TOOLS_SERIES.items()
        for series in all_series
    ]
    for ref in named:
        assert _split(ref, registry) in pushed, f"the chart's default {ref} was not pushed"
    assert operator["image"].endswith(f"/mysql-operator:{version}")
    every_image = {
        c["image"]
        for d in yaml.safe_load_all(rendered)
        if d and d["kind"] in ("Deployment", "Pod", "Job")
        for c in (d["spec"].get("template", d)["spec"]["containers"])
    }
    assert all(_split(ref, registry) in pushed for ref in every_image), every_image


def test_only_the_tag_of_the_charts_app_version_releases():
    version = chart_version()
    ok = subprocess.run([str(RELEASE), "check-tag", f"v{version}"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.strip() == version, ok.stderr
    wrong = subprocess.run([str(RELEASE), "check-tag", "v99.0.0"], capture_output=True, text=True)
    assert wrong.returncode != 0
    assert f"tag v99.0.0 is not v{version}" in wrong.stderr


def test_the_release_notes_are_the_changelog_section_of_the_version():
    version = chart_version()
    notes = subprocess.run(
        [str(RELEASE), "notes", version], capture_output=True, text=True, check=True
    ).stdout
    assert notes.startswith(f"## {version} ") and "\n## " not in notes.removeprefix("## "), notes
    missing = subprocess.run([str(RELEASE), "notes", "0.0.9"], capture_output=True, text=True)
    assert missing.returncode != 0 and 'CHANGELOG.md has no section "## 0.0.9"' in missing.stderr
