"""Every program a Pod script runs is in the image that runs it. Which script runs in which image
is read from the Pods the operator makes (the StatefulSet's containers and probes, a Job's
client-tools container); the programs are manifests.scripts.PROGRAMS (checked against the scripts
themselves by tests/unit/test_pod_scripts.py); each is looked up on the PATH of the image's files
(its OCI archive from hack/build-images.sh, layers read in order, nothing unpacked). A script
calling a program its image lacks fails here, naming both: the exporter's `cksum` did (Debian's
busybox has none; the rotation of the monitoring password was never noticed in the image)."""

from __future__ import annotations

import functools

import pytest

from mysql_operator import manifests as m
from mysql_operator.api import parse
from mysql_operator.manifests.tenant_jobs import client_tools_sidecar
from mysql_operator.manifests.common import EXPORTER_IMAGE, TOOLS_REPOSITORY
from mysql_operator.manifests import scripts
from tests.support import pod_scripts as ps
from tests.support.containerd import build_images
from tests.support.specs import body

# the local images each role's references stand for, by the series they are built for
SERVER = {("mysql", "9.7"): "mysql", ("mariadb", "10.11"): "mariadb", ("mariadb", "11.8"): "mariadb-11.8"}
TOOLS = {
    ("mysql", "9.7"): "mysql-tools",
    ("mariadb", "10.11"): "mariadb-tools",
    ("mariadb", "11.8"): "mariadb-tools-11.8",
}


@functools.cache
def _files(name: str) -> dict[str, tuple[str, str, int]]:
    (image,) = build_images(name).values()
    return ps.image_files(image.archive)


def _runs(container: dict) -> list[tuple[str, str | None]]:
    """(shell, script name) for what a container and its probes run through a shell."""
    out = []
    for cmd in [container.get("command") or []] + [
        (container.get(p) or {}).get("exec", {}).get("command") or []
        for p in ("startupProbe", "livenessProbe", "readinessProbe")
    ]:
        if cmd and cmd[0] in ("/bin/bash", "/bin/sh"):
            script = cmd[3] if cmd[1] == "-c" else cmd[1].rsplit("/", 1)[-1]
            out.append((cmd[0], script))
    return out


def _pods(flavor: str, series: str) -> list[tuple[str, str, str]]:
    """(local image name, shell, script) for every script the operator's Pods of a cluster run."""
    c = parse(body({"flavor": flavor, "version": series, "instances": 3}, name="db", namespace="prod"))
    pod = m.statefulset(c)["spec"]["template"]["spec"]
    images = {c.spec.image_ref: SERVER[(flavor, series)], EXPORTER_IMAGE: "exporter"}
    out = []
    for container in pod["initContainers"] + pod["containers"]:
        assert container["image"] in images, (
            f"{container['name']} runs {container['image']}: which image is it?"
        )
        out += [(images[container["image"]], shell, script) for shell, script in _runs(container)]
    tools = client_tools_sidecar(c, TOOLS_REPOSITORY)
    assert tools["image"] == f"{TOOLS_REPOSITORY}:{flavor}-{series}"
    out += [(TOOLS[(flavor, series)], shell, script) for shell, script in _runs(tools)]
    return out


@pytest.mark.parametrize("flavor, series", sorted(SERVER), ids=lambda v: str(v))
def test_every_program_a_pod_script_runs_is_in_the_image_that_runs_it(flavor, series):
    runs = _pods(flavor, series)
    scripts_run = {script for _, _, script in runs}
    expected = {"init.sh", "start.sh", "probe.sh", "exporter.sh", "client-tools.sh"}
    assert scripts_run == (expected | {"seed.sh"} if flavor == "mariadb" else expected), scripts_run
    missing = {}
    for image, shell, script in sorted(set(runs)):
        programs = scripts.PROGRAMS[script]
        wanted = [shell.rsplit("/", 1)[-1], *programs.get("", ()), *programs.get(flavor, ())]
        gone = ps.missing(_files(image), wanted)
        if gone:
            missing[f"{script} in {image}"] = gone
    assert not missing, f"programs the scripts run that their images lack: {missing}"


def test_the_lookup_finds_what_an_image_has_and_names_what_it_lacks():
    files = _files("exporter")  # busybox's applets and /bin/mysqld_exporter
    assert ps.missing(files, ["sh", "md5sum", "mysqld_exporter", "sleep"]) == []
    assert ps.missing(files, ["cksum", "bash", "mysqlbinlog"]) == ["cksum", "bash", "mysqlbinlog"]
