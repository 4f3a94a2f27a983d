"""Shared fixtures. The control plane is real (see tests/support/controlplane.py)."""

from __future__ import annotations

import os
import sys

import pytest

from tests.support.controlplane import ControlPlane, ControlPlaneError, late_builds_last, missing_binaries

_FAILED: list[str] = []  # node ids of failed tests: the control plane's logs are printed at teardown


def pytest_collection_modifyitems(session, config, items):
    late_builds_last(items)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        _FAILED.append(item.nodeid)
        cp = item.funcargs.get("control_plane") if hasattr(item, "funcargs") else None
        if cp is not None:
            rep.sections.append(("control plane logs", cp.logs_report()))


@pytest.fixture(scope="session")
def control_plane(request):
    """A real etcd + kube-apiserver + controller-manager + scheduler for the whole session."""
    missing = missing_binaries()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"control plane binaries missing in CI: {missing}; `make binaries` first")
        pytest.skip(reason=f"control plane binaries missing ({', '.join(missing)}): run `make binaries`")
    cp = ControlPlane(keep_workdir=bool(os.environ.get("KEEP_CONTROL_PLANE")))
    try:
        cp.start()
    except ControlPlaneError as e:
        cp.stop(remove=False)
        pytest.fail(f"control plane failed to start (logs in {cp.logs_dir}): {e}")
    print(f"\ncontrol plane up in {cp.timings['ready']:.1f}s at {cp.server}", file=sys.stderr)
    yield cp
    if _FAILED:
        print(f"\n{cp.logs_report(80)}", file=sys.stderr)
    cp.stop()


@pytest.fixture
def namespace(control_plane):
    """A fresh namespace, deleted after the test."""
    with control_plane.fresh_namespace() as name:
        yield name
