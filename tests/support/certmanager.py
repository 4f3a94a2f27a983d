"""A real cert-manager for the integration tests: its controller as a host process against the test
session's kube-apiserver, and its CRDs from the same module version.

`hack/build-binaries.sh cert-manager` builds the controller (hack/cert-manager-controller/main.go:
the controllers of github.com/cert-manager/cert-manager at CERT_MANAGER_VERSION, without leader
election, webhook, metrics or ACME) and copies the module's deploy/crds/*.yaml beside it. Those
files are Helm templates: the template markers sit in YAML comments and in `metadata.labels`
values, so `crds()` parses them as YAML (comments go) and drops the labels; it refuses a file
with any marker left.

    python -m tests.support.certmanager     # install the CRDs and run the controller against
                                            # $KUBECONFIG until Ctrl-C
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml
from kubernetes import client

from mysql_operator.k8s.client import api_client

from tests.support.controlplane import Component, bin_dir, build_binaries, versions
from tests.support.crds import apply_crds
from tests.support.wait import wait_for

GROUP, VERSION = "cert-manager.io", "v1"


def home() -> Path:
    return bin_dir() / f"cert-manager-{versions()['CERT_MANAGER_VERSION']}"


def controller_binary() -> Path:
    return home() / "cert-manager-controller"


def ensure_built() -> None:
    """The controller and its CRDs, built (or waited for) by `hack/build-binaries.sh cert-manager`."""
    build_binaries("cert-manager")


def crds() -> list[dict]:
    """cert-manager's CRDs as objects, rendered from the module's Helm-templated files."""
    out = []
    for path in sorted((home() / "crds").glob("crd-*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        if len(docs) != 1 or docs[0].get("kind") != "CustomResourceDefinition":
            raise ValueError(f"{path}: expected one CustomResourceDefinition")
        crd = docs[0]
        meta = crd["metadata"]
        crd["metadata"] = {
            "name": meta["name"],
            "labels": {
                "app.kubernetes.io/name": "cert-manager",
                "app.kubernetes.io/instance": "cert-manager-test",
            },
        }
        if "{{" in json.dumps(crd):
            raise ValueError(f"{path}: a Helm template marker outside comments and labels")
        out.append(crd)
    return out


def install_crds(api: client.ApiClient, timeout: float = 60) -> list[str]:
    """Create (or replace) the CRDs and wait until cert-manager.io/v1 serves them. Returns their names."""
    names = apply_crds(api, crds(), timeout)
    objs = client.CustomObjectsApi(api)
    wait_for(
        lambda: (
            {"certificates", "issuers", "clusterissuers"}
            <= {r.name for r in objs.get_api_resources(GROUP, VERSION).resources}
        ),
        timeout,
        "cert-manager.io/v1 served",
    )
    return names


def uninstall_crds(api: client.ApiClient, names: list[str], timeout: float = 60) -> None:
    """Delete the CRDs (and so every cert-manager object) and wait until they are gone."""
    ext = client.ApiextensionsV1Api(api)
    for name in names:
        try:
            ext.delete_custom_resource_definition(name)
        except client.ApiException as e:
            if e.status != 404:
                raise

    def gone() -> bool:
        try:
            client.CustomObjectsApi(api).get_api_resources(GROUP, VERSION)
        except client.ApiException as e:
            return e.status == 404
        return False

    wait_for(gone, timeout, "cert-manager.io/v1 no longer served")


class CertManager:
    """The controller as a child process in its own process group (`stop()` ends exactly that)."""

    def __init__(self, kubeconfig: Path, workdir: Path, cluster_resource_namespace: str = "cert-manager"):
        self.cluster_resource_namespace = cluster_resource_namespace
        workdir.mkdir(parents=True, exist_ok=True)
        self.component = Component(
            "cert-manager-controller",
            [
                str(controller_binary()),
                f"--kubeconfig={kubeconfig}",
                "--leader-elect=false",
                f"--cluster-resource-namespace={cluster_resource_namespace}",
                "-v=2",
            ],
            workdir / "cert-manager-controller.log",
        )

    def start(self) -> "CertManager":
        self.component.start()
        time.sleep(0.5)
        if not self.component.alive():
            raise RuntimeError(f"cert-manager controller exited:\n{self.component.log_tail()}")
        return self

    def alive(self) -> bool:
        return self.component.alive()

    def log_tail(self, lines: int = 40) -> str:
        return self.component.log_tail(lines)

    def stop(self) -> None:
        self.component.stop()


def main() -> int:
    ensure_built()
    kubeconfig = Path(os.environ["KUBECONFIG"])
    api = api_client(str(kubeconfig))
    install_crds(api)
    try:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "cert-manager"}})
    except client.ApiException as e:
        if e.status != 409:
            raise
    cm = CertManager(kubeconfig, Path(tempfile.mkdtemp(prefix="cert-manager-"))).start()
    print(f"cert-manager controller running, log: {cm.component.log_path}")
    try:
        while cm.alive():
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        cm.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
