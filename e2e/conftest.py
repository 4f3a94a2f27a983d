"""The local one-node cluster (tests/support/cluster.py), or any cluster through KUBECONFIG later."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from mysql_operator.k8s.client import api_client
from tests.support import cluster as cluster_mod
from tests.support import host_operator as operator_process
from tests.support.controlplane import missing_binaries, stop_group

REPO = Path(__file__).resolve().parents[1]


class ClusterHandle:
    """What tests need from a running local cluster: API access and the containerd socket."""

    def __init__(self, state: dict):
        self.kubeconfig = state["kubeconfig"]
        self.containerd_socket = state["containerd_socket"]
        self.logs_dir = state["logs_dir"]
        self.s3_state = state.get("s3")  # absent in clusters started before it existed
        self.registry_state = state.get("registry")  # None in a cluster started by older code
        self.state = state

    def pull_secret(self, namespace: str) -> str:
        """The local registry's pull Secret in `namespace` (what every e2e MySQLCluster names); its name."""
        cluster_mod.ensure_pull_secret(self.api_client(), self.state, namespace)
        return cluster_mod.PULL_SECRET

    def s3(self):
        """The MinIO beside the cluster (tests.support.s3.S3Server, already running)."""
        from urllib.parse import urlparse

        from tests.support.s3 import S3Server

        url = urlparse(self.s3_state["endpoint"])
        return S3Server(
            root=Path(self.logs_dir),
            host=url.hostname,
            port=url.port,
            access_key=self.s3_state["access_key"],
            secret_key=self.s3_state["secret_key"],
        )

    def registry(self):
        """The OCI registry beside the cluster (tests.support.registry.Registry, running), or None."""
        from tests.support.registry import Registry

        if not self.registry_state:
            return None
        return Registry.from_state(self.registry_state)

    def api_client(self):
        return api_client(self.kubeconfig)


@pytest.fixture(scope="session")
def local_cluster():
    """Reuse a cluster started by `make cluster-up`, else start one for this session."""
    missing = missing_binaries() + [
        b
        for b in ("kubelet", "kube-proxy", "coredns", "local-path-provisioner", "kube-router")
        if not _has_binary(b)
    ]
    from tests.support import registry as reg

    if reg.missing():
        missing.append("registry")
    if missing:
        pytest.fail(f"cluster binaries missing: {missing}; run `make binaries node-binaries`")
    s = cluster_mod.running_state()
    if s is not None:
        print(f"\nreusing the local cluster of pid {s['pid']}", file=sys.stderr)
        if not s.get("registry"):
            pytest.fail("this cluster was started without a registry: `make cluster-down cluster-up`")
        changed = cluster_mod.refresh_images(s)
        if changed:
            print(f"rebuilt images imported or pushed: {', '.join(changed)}", file=sys.stderr)
        handle = ClusterHandle(s)
        _remove_leftovers(handle)
        yield handle
        return
    c = cluster_mod.Cluster()
    try:
        c.up()
    except Exception as e:  # noqa: BLE001 - the message carries the component logs
        pytest.fail(f"local cluster failed to start: {e}")
    print(f"\nlocal cluster up: {json.dumps(c.timings)}", file=sys.stderr)
    handle = ClusterHandle(json.loads((c.workdir / "state.json").read_text()))
    _remove_leftovers(handle)
    yield handle
    c.down()


def _remove_leftovers(handle: ClusterHandle) -> None:
    """What sessions that were killed left on a reused cluster (e2e/helpers.py remove_leftovers),
    and evidence bundles past their time (e2e/evidence.py prune)."""
    from e2e import evidence
    from e2e.helpers import remove_leftovers

    try:
        removed = remove_leftovers(handle.api_client())
    except Exception as e:  # noqa: BLE001 - housekeeping: never the session's failure
        print(f"leftovers of earlier sessions not removed: {e}", file=sys.stderr)
        removed = []
    if removed:
        print(f"removed what earlier e2e sessions left: {', '.join(removed)}", file=sys.stderr)
    evidence.prune()


def _has_binary(name: str) -> bool:
    from tests.support.controlplane import binary

    try:
        binary(name)
        return True
    except FileNotFoundError:
        return False


@pytest.fixture
def kube_namespace(local_cluster):
    """A fresh namespace (labelled as this session's, e2e/helpers.py create_namespace), deleted
    after the test (at once, finalizers dropped, when the session is interrupted)."""
    from e2e.helpers import create_namespace, delete_namespace, interrupted

    api = local_cluster.api_client()
    name = create_namespace(api, f"e2e-{uuid.uuid4().hex[:8]}")
    try:
        local_cluster.pull_secret(name)
        yield name
    finally:
        delete_namespace(api, name, fast=interrupted())


# ------------------------------------------------------------------ the product on the cluster
OPERATOR_NAMESPACE = "mysql-operator"


HELM_HOMES = {
    "HELM_CACHE_HOME": "/var/tmp/mysqlop-helm/cache",
    "HELM_CONFIG_HOME": "/var/tmp/mysqlop-helm/config",  # also the registry login
    "HELM_DATA_HOME": "/var/tmp/mysqlop-helm/data",
}


def helm_env(local_cluster) -> dict[str, str]:
    return {**os.environ, "KUBECONFIG": local_cluster.kubeconfig, **HELM_HOMES}


@functools.lru_cache(maxsize=1)
def _published_chart(helm: str, registry_state: str) -> tuple[str, str, tuple[str, ...]]:
    """This checkout's chart packaged and pushed to the registry beside the cluster, once a session."""
    from tests.support import chart_oci
    from tests.support.registry import Registry

    registry = Registry.from_state(json.loads(registry_state))
    env = {**os.environ, **HELM_HOMES}
    ref, version, flags = chart_oci.publish(registry, helm, env)
    return ref, version, tuple(flags)


def install_operator(
    local_cluster,
    *extra: str,
    published: tuple[str, str, tuple[str, ...]] | None = None,
    values: Path | None = None,
) -> subprocess.CompletedProcess:
    """`helm upgrade --install` of the chart from this checkout, as users install it: packaged,
    pushed to the registry beside the cluster and installed from oci://, with
    examples/values-local.yaml (the release every e2e test uses), plus `extra` arguments.
    `published` (ref, version, flags) and `values`: another chart's (the previous release's)."""
    from tests.support import registry as reg
    from tests.support.controlplane import binary

    helm = str(binary("helm"))
    if not local_cluster.registry_state:
        pytest.fail(
            f"no registry beside the cluster: {reg.missing() or 'restart the cluster (make cluster-up)'}"
        )
    ref, version, flags = published or _published_chart(
        helm, json.dumps(local_cluster.registry_state, sort_keys=True)
    )
    cluster_mod.create_or_keep(
        local_cluster.api_client(),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}},
    )
    local_cluster.pull_secret(OPERATOR_NAMESPACE)  # examples/values-local.yaml names it
    argv = [
        helm,
        "upgrade",
        "--install",
        "mysql-operator",
        ref,
        "--version",
        version,
        *flags,
        "--namespace",
        OPERATOR_NAMESPACE,
        "--create-namespace",
        "-f",
        str(values or REPO / "examples" / "values-local.yaml"),
        "--set",
        "logFormat=json",
        "--set",
        "metrics.enabled=true",
        # the operator's metrics open to no Pod (the chart's default, set as a user would): the
        # Prometheus of e2e/test_monitoring.py runs on the node, which NetworkPolicy admits anyway.
        # Not for another chart (the previous release's): its values schema may not know the value
        *(() if published else ("--set-json", 'metrics.networkPolicy={"enabled": true, "from": []}')),
        *extra,
        "--wait",
        "--timeout",
        "180s",
    ]
    return subprocess.run(argv, capture_output=True, text=True, env=helm_env(local_cluster))


# hack/test.sh runs the e2e tests in more than one pytest session on one cluster it started (those
# that disturb the chart's operator alone, then the rest side by side): its value names that run
SUITE_RUN_VARIABLE = "MYSQLOP_SUITE_RUN"


@pytest.fixture(scope="session")
def operator_release(local_cluster):
    """The chart installed with the real helm, the operator running as a Pod from the image built
    from the project's Dockerfile (examples/values-local.yaml). One session at a time installs it
    (a lock beside the cluster's state); the later sessions of one hack/test.sh run use the release
    its first session installed as it is, and none of them uninstalls it (the run stops the cluster).
    Outside such a run, a release some session installed is uninstalled by the last session using
    it (xdist workers end one by one: the first to end must not take the operator from the others);
    one that was there before (make demo) stays."""
    from kubernetes import client

    apps = client.AppsV1Api(local_cluster.api_client())
    suite_run = os.environ.get(SUITE_RUN_VARIABLE)
    marker = cluster_mod.state_dir() / "operator-release.json"
    users = ReleaseUsers(cluster_mod.state_dir() / "operator-release-users.json")
    with helm_release_lock():
        installed_by = json.loads(marker.read_text()).get("suite_run") if marker.exists() else None
        existed = (suite_run and installed_by == suite_run) or _install_release(local_cluster, apps)
        if suite_run:
            marker.write_text(json.dumps({"suite_run": suite_run}))
        users.join(installed=not existed)
        name = apps.list_namespaced_deployment(OPERATOR_NAMESPACE).items[0].metadata.name
    yield name
    with helm_release_lock():
        last_owned = users.leave()
        if not last_owned or suite_run:
            return
        from tests.support.controlplane import binary

        subprocess.run(
            [
                str(binary("helm")),
                "uninstall",
                "mysql-operator",
                "--namespace",
                OPERATOR_NAMESPACE,
                "--wait",
                "--timeout",
                "120s",
            ],
            capture_output=True,
            text=True,
            env=helm_env(local_cluster),
        )


@dataclasses.dataclass
class ReleaseUsers:
    """The pytest sessions (process ids) using the chart's release, and whether one of them
    installed it; read and written under helm_release_lock."""

    path: Path

    def _read(self) -> tuple[bool, list[int]]:
        d = json.loads(self.path.read_text()) if self.path.exists() else {}
        live = [pid for pid in d.get("users", []) if _alive(pid)]
        return bool(d.get("installed")) and bool(live), live

    def join(self, installed: bool) -> None:
        was_installed, live = self._read()
        self.path.write_text(
            json.dumps({"installed": installed or was_installed, "users": [*live, os.getpid()]})
        )

    def leave(self) -> bool:
        """Leave; whether this was the last session and one of the sessions installed the release."""
        installed, live = self._read()
        rest = [pid for pid in live if pid != os.getpid()]
        self.path.write_text(json.dumps({"installed": installed and bool(rest), "users": rest}))
        return installed and not rest


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def helm_release_lock():
    """Held while a session installs or checks the chart's release (xdist workers start together)."""
    import fcntl

    path = cluster_mod.state_dir() / "operator-release.lock"
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _install_release(local_cluster, apps) -> bool:
    """`helm upgrade --install` this checkout's chart and CRDs; a release that was there already is
    restarted (its Pod may run an operator image imported before this session's). Whether it was."""
    from e2e.helpers import install_crds
    from tests.support.controlplane import binary

    existed = (
        subprocess.run(
            [str(binary("helm")), "status", "mysql-operator", "--namespace", OPERATOR_NAMESPACE],
            capture_output=True,
            env=helm_env(local_cluster),
        ).returncode
        == 0
    )
    # helm creates missing CRDs but never updates them: a reused cluster gets this checkout's
    install_crds(local_cluster.api_client())
    r = install_operator(local_cluster)
    if r.returncode != 0:
        from e2e import evidence

        saved = evidence.save_bundle(
            local_cluster,
            "operator-install",
            [],
            None,
            operator_namespace=OPERATOR_NAMESPACE,
            failure=r.stderr,
        )
        pytest.fail(f"helm install failed (evidence: {saved}): {r.stderr[-3000:]}")
    if existed:
        restart_deployment(apps, apps.list_namespaced_deployment(OPERATOR_NAMESPACE).items[0])
    return existed


def restart_deployment(apps, dep, timeout: float = 180) -> None:
    """`kubectl rollout restart`: new Pods (from the image now in containerd), then wait for them."""
    import datetime as dt

    from tests.support.wait import wait_for

    ns, name = dep.metadata.namespace, dep.metadata.name
    stamp = dt.datetime.now(dt.timezone.utc).isoformat()
    apps.patch_namespaced_deployment(
        name,
        ns,
        {"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": stamp}}}}},
    )

    def rolled() -> bool:
        d = apps.read_namespaced_deployment(name, ns)
        st, want = d.status, d.spec.replicas or 0
        return (
            (st.observed_generation or 0) >= d.metadata.generation
            and (st.updated_replicas or 0) == want
            and (st.ready_replicas or 0) == want
            and (st.replicas or 0) == want
        )

    wait_for(rolled, timeout, f"deployment {ns}/{name} restarted and ready")


# the chart's operator Deployments paused (name: replicas) and the cluster's handle: host_operator
# tests run one after another (pytest_collection_modifyitems) under one pause, resumed after the last
_PAUSED: dict[str, int] = {}
_PAUSED_ON: list = []


def pause_chart_operator(local_cluster) -> None:
    """Scale the chart's operator (if installed) to 0 while tests run their own operator in a
    namespace the chart's would also serve; resume_chart_operator restores its replicas."""
    from kubernetes import client

    from tests.support.wait import wait_for

    if _PAUSED_ON:
        return
    _PAUSED_ON.append(local_cluster)
    api = local_cluster.api_client()
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    deps = [
        d for d in apps.list_namespaced_deployment(OPERATOR_NAMESPACE).items if (d.spec.replicas or 0) > 0
    ]
    for d in deps:
        apps.patch_namespaced_deployment_scale(d.metadata.name, OPERATOR_NAMESPACE, {"spec": {"replicas": 0}})
        _PAUSED[d.metadata.name] = d.spec.replicas
    if deps:
        wait_for(
            lambda: not core.list_namespaced_pod(OPERATOR_NAMESPACE).items,
            120,
            "the chart's operator Pods to stop",
        )


def resume_chart_operator() -> None:
    from kubernetes import client

    if not _PAUSED_ON:
        return
    apps = client.AppsV1Api(_PAUSED_ON.pop().api_client())
    for name, replicas in list(_PAUSED.items()):
        apps.patch_namespaced_deployment_scale(name, OPERATOR_NAMESPACE, {"spec": {"replicas": replicas}})
        del _PAUSED[name]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Before the test's fixtures are torn down (its namespaces still there): the Failover,
    Switchover and Reseed Events of its namespaces since it began, listed in its report; one of a
    kind it did not declare (`@pytest.mark.causes`) fails it, after its teardown. After: the
    chart's operator resumes once a test that ran its own is torn down and the next test (if any)
    does not run one too."""
    try:
        unexpected = _check_disruptions(item)
    except Exception as e:  # noqa: BLE001 - the API server not answering: the teardown still runs
        print(f"\n{item.nodeid}: Events not checked: {type(e).__name__}: {e}", file=sys.stderr)
        unexpected = ""
    try:
        result = yield
    finally:
        if "host_operator" not in getattr(nextitem, "fixturenames", ()):
            resume_chart_operator()
    if unexpected:  # (a teardown that failed by itself raised above: its own error first)
        pytest.fail(unexpected, pytrace=False)
    return result


@pytest.fixture
def host_operator(local_cluster, kube_namespace, tmp_path):
    """This checkout's operator as a host process, authenticated as a ServiceAccount bound to
    exactly the declared rules (mysql_operator/k8s/rbac.py), serving only `kube_namespace`.
    Yields (namespace, api client, log path, process)."""
    from kubernetes import client

    from e2e.helpers import (
        EXPORTER_IMAGE,
        OPERATOR_IMAGE,
        RUN_LABEL,
        TOOLS_IMAGE,
        delete_clusters,
        install_crds,
        interrupted,
        run_id,
        sa_kubeconfig,
    )
    from mysql_operator.k8s.rbac import CLUSTER_SCOPE_RULES, namespaced_rules

    api = local_cluster.api_client()
    ns = kube_namespace
    install_crds(api)
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(ns, {"metadata": {"name": "mysql-operator"}})
    rbac.create_namespaced_role(ns, {"metadata": {"name": "mysql-operator"}, "rules": namespaced_rules()})
    subject = [{"kind": "ServiceAccount", "name": "mysql-operator", "namespace": ns}]
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "mysql-operator"},
            "subjects": subject,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "mysql-operator"},
        },
    )
    # labelled as this session's: a killed session's are removed by a later one (remove_leftovers)
    labels = {RUN_LABEL: run_id()}
    rbac.create_cluster_role(
        {"metadata": {"name": f"mysql-operator-{ns}", "labels": labels}, "rules": CLUSTER_SCOPE_RULES}
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": f"mysql-operator-{ns}", "labels": labels},
            "subjects": subject,
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"mysql-operator-{ns}",
            },
        }
    )
    kubeconfig = sa_kubeconfig(api, local_cluster.kubeconfig, ns, "mysql-operator", tmp_path / "sa.conf")
    log_path = tmp_path / "operator.log"
    pause_chart_operator(local_cluster)  # one operator per namespace; resumed after the last such test
    proc = operator_process.start(
        ns,
        kubeconfig,
        log_path,
        *("--resolver", "ip", "--loop-seconds", "1", "--resync-seconds", "30"),
        # its backup Jobs' image, their client tools' and its exporter sidecars', as the chart sets them
        env={
            "MYSQL_OPERATOR_IMAGE": OPERATOR_IMAGE,
            "MYSQL_OPERATOR_EXPORTER_IMAGE": EXPORTER_IMAGE,
            "MYSQL_OPERATOR_TOOLS_IMAGE": TOOLS_IMAGE,
        },
    )
    try:
        yield ns, api, log_path, proc
    finally:
        alive = proc.poll() is None
        try:  # while the operator runs: it removes kopf's finalizers (interrupted: kube_namespace does)
            if not interrupted():
                delete_clusters(api, ns)
        except Exception as e:  # noqa: BLE001 - teardown: report, go on
            print(f"clusters not deleted: {e}", file=sys.stderr)
        finally:
            stop_group(proc, 20)
    print(
        f"\n----- operator log (tail) -----\n{log_path.read_text(errors='replace')[-8000:]}", file=sys.stderr
    )
    rbac.delete_cluster_role_binding(f"mysql-operator-{ns}")
    rbac.delete_cluster_role(f"mysql-operator-{ns}")
    assert alive, "the operator exited during the test"


@pytest.fixture(scope="session")
def s3_beside_cluster(local_cluster):
    """The cluster's real S3 server (MinIO) on the node address, reachable from Pods and host."""
    return local_cluster.s3()


@pytest.fixture(scope="session")
def registry_beside_cluster(local_cluster):
    """The cluster's real OCI registry (TLS, basic auth) on the node address; containerd trusts
    its CA and pulls with the credentials of a Pod's pull Secret."""
    from tests.support import registry as reg

    r = local_cluster.registry()
    if r is None:
        pytest.skip(reason=reg.missing() or "this cluster was started without a registry: restart it")
    return r


def push_image(registry, name: str, repo: str) -> str:
    """The image `name` of hack/build-images.sh pushed to the registry as repo:<its tag>; its ref."""
    from tests.support.containerd import build_images

    (image,) = build_images(name).values()
    return registry.push(image.archive, repo, image.ref.rsplit(":", 1)[1])


@pytest.hookimpl(tryfirst=True)  # before `-m` selects: the marks it adds count
def pytest_collection_modifyitems(session, config, items):
    """A test that runs its own operator (host_operator pauses the chart's) is marked `exclusive`,
    like the files that stop, scale, replace or upgrade the chart's operator. The tests that need
    a binary built beside the tests last but one; last e2e/test_permissions_used.py, which reads
    what every other test made the operator do."""
    from tests.support.controlplane import late_builds_last

    for item in items:
        if "host_operator" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.exclusive)
        try:
            _declared(item)
        except ValueError as e:
            raise pytest.UsageError(f"{item.nodeid}: {e}") from None
    # those first, one after another: one pause of the chart's operator for all of them
    items.sort(key=lambda item: "host_operator" not in getattr(item, "fixturenames", ()))
    late_builds_last(items)
    items.sort(key=lambda item: item.path.name == "test_permissions_used.py")


# ------------------------------------------------------------------ evidence and disruptions (e2e/evidence.py)
STARTED = pytest.StashKey[float]()  # time.time() at the test's setup
FAILED = pytest.StashKey[bool]()  # a phase of the test failed (its evidence saved then)
BUNDLE = pytest.StashKey[str]()  # where its evidence went
FOUND = pytest.StashKey[list]()  # the disruptions the test saw (e2e/evidence.py Disruption)
DISRUPTIONS = pytest.StashKey[str]()  # the report section listing them
SHOWN = pytest.StashKey[bool]()  # that section is in a report of the test already


def _namespaces(item) -> list[str]:
    """The namespaces of the test: fixtures' values named *namespace, and those this process
    created since the test began (a test may make its own), the chart operator's aside."""
    from e2e.helpers import created_since

    names = [
        v for k, v in getattr(item, "funcargs", {}).items() if k.endswith("namespace") and isinstance(v, str)
    ]
    names += created_since(item.stash.get(STARTED, float("inf")))
    return [n for n in dict.fromkeys(names) if n != OPERATOR_NAMESPACE]


def _since(item):
    import datetime as dt

    started = item.stash.get(STARTED, None)
    return dt.datetime.fromtimestamp(started, dt.timezone.utc) if started is not None else None


def _declared(item) -> set[str]:
    from e2e import evidence

    return evidence.declared_kinds(m.args for m in item.iter_markers("causes"))


def _save_evidence(item, failure: str = "", disruption_report: str = "") -> str | None:
    """The test's evidence bundle (once per test); its path."""
    from e2e import evidence

    if BUNDLE in item.stash:
        return item.stash[BUNDLE]
    handle = getattr(item, "funcargs", {}).get("local_cluster")
    if handle is None:
        return None
    host = item.funcargs.get("host_operator")
    if not disruption_report:  # (the Events were read at the end of the call, or at a failed setup)
        disruption_report = item.stash.get(DISRUPTIONS, None) or evidence.report(
            item.stash.get(FOUND, []), _declared(item)
        )
    try:
        path = evidence.save_bundle(
            handle,
            item.nodeid,
            _namespaces(item),
            _since(item),
            operator_namespace=OPERATOR_NAMESPACE,
            failure=failure,
            disruption_report=disruption_report,
            operator_log=host[2] if isinstance(host, tuple) and len(host) > 2 else None,
        )
    except Exception as e:  # noqa: BLE001 - a report that cannot be saved must not hide the failure
        print(f"\n{item.nodeid}: evidence not saved: {type(e).__name__}: {e}", file=sys.stderr)
        return None
    item.stash[BUNDLE] = str(path)
    return str(path)


def _disruptions(item) -> list:
    """The Failover/Switchover/Reseed Events of the test's namespaces since it began (its report
    section kept), read once: at the end of its call, or at its teardown when it had none."""
    from e2e import evidence

    if FOUND in item.stash:
        return item.stash[FOUND]
    namespaces = _namespaces(item)
    handle = getattr(item, "funcargs", {}).get("local_cluster")
    if not namespaces or handle is None:
        return []
    since = _since(item)
    found = evidence.list_disruptions(handle.api_client(), namespaces, since)
    seen = {(d.namespace, d.reason, d.first, d.message) for d in found}
    found += [
        d
        for d in evidence.snapshots(namespaces, since)
        if (d.namespace, d.reason, d.first, d.message) not in seen
    ]
    item.stash[FOUND] = found
    if found:
        item.stash[DISRUPTIONS] = evidence.report(found, _declared(item))
    return found


def _check_disruptions(item) -> str:
    """A failure message when the test saw a disruption of a kind it did not declare and did not
    fail already (its evidence then saved)."""
    from e2e import evidence

    bad = evidence.undeclared(_disruptions(item), _declared(item))
    if not bad or item.stash.get(FAILED, False):
        return ""
    message = (
        f"{len(bad)} Event(s) of a kind this test does not declare "
        f"(@pytest.mark.causes({', '.join(repr(k) for k in sorted({d.kind for d in bad}))}) if it causes them):\n"
        + "\n".join(d.line() for d in bad)
    )
    path = _save_evidence(item, failure=message, disruption_report=item.stash.get(DISRUPTIONS, ""))
    return message + (f"\nevidence: {path}" if path else "")


@pytest.hookimpl(tryfirst=True)  # before the fixtures are set up
def pytest_runtest_setup(item):
    import time

    item.stash[STARTED] = time.time()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed phase of a test on the local cluster (or an xfail that failed) leaves its evidence
    (e2e/evidence.py save_bundle) outside the clone; the report says where, with the operator's
    log lines about the test's namespaces and the Failover/Switchover/Reseed Events it saw."""
    outcome = yield
    rep = outcome.get_result()
    if "local_cluster" not in getattr(item, "fixturenames", ()):
        return
    known_bug = rep.when == "call" and hasattr(rep, "wasxfail") and rep.skipped  # an xfail that failed
    if rep.when == "call" or rep.failed:  # (before the teardown: the test's namespaces are still there)
        try:
            _disruptions(item)
        except Exception as e:  # noqa: BLE001 - the API server not answering: said, not raised
            print(f"\n{item.nodeid}: Events not read: {type(e).__name__}: {e}", file=sys.stderr)
    if DISRUPTIONS in item.stash and not item.stash.get(SHOWN, False) and (rep.when != "setup" or rep.failed):
        rep.sections.append(("Failover/Switchover/Reseed Events", item.stash[DISRUPTIONS]))
        item.stash[SHOWN] = True
    if rep.when == "call":
        _keep_evidence_of_slow(item, rep.passed)
    if not (rep.failed or known_bug):
        if rep.when == "teardown" and BUNDLE in item.stash:
            rep.sections.append(("evidence", f"saved under {item.stash[BUNDLE]}"))
        return
    fresh = BUNDLE not in item.stash
    item.stash[FAILED] = True
    failure = str(call.excinfo.getrepr(style="short")) if call.excinfo is not None else rep.longreprtext
    try:
        path = _save_evidence(item, failure=f"{rep.when}: {failure}")
    except Exception as e:  # noqa: BLE001 - a broken bundle must never end the session (xdist)
        print(f"\n{item.nodeid}: evidence not saved: {type(e).__name__}: {e}", file=sys.stderr)
        path = None
    if known_bug and call.excinfo is not None:  # pytest prints no traceback for an xfail
        print(f"\n{item.nodeid} (xfail) failed: {call.excinfo.exconly()[:2000]}", file=sys.stderr)
    if path is None:
        return
    rep.sections.append(("evidence", f"saved under {path} (INDEX.txt says what each file is)"))
    mine = _namespaces(item)
    tail = _operator_log_lines(Path(path) / OPERATOR_NAMESPACE / "logs", mine, 80) if fresh else ""
    if tail:  # CI shows only the report: what the operator did about this test's clusters
        rep.sections.append(("operator log (this test's namespaces, tail)", tail))


def _keep_evidence_of_slow(item, passed: bool) -> None:
    """A passed test that measured something far slower than usual leaves its evidence too (a
    failed one leaves it anyway)."""
    from e2e.helpers import take_slow

    slow = take_slow()
    if slow and passed:
        path = _save_evidence(item, failure="passed, but slower than usual:\n" + "\n".join(slow))
        print(f"\n{item.nodeid}: slower than usual ({'; '.join(slow)}); evidence: {path}", file=sys.stderr)


def _operator_log_lines(folder: Path, namespaces: list[str], count: int) -> str:
    lines: list[str] = []
    logs = (
        sorted(folder.glob("*.log"), key=lambda f: (".previous." not in f.name, f.name))
        if folder.is_dir() and namespaces
        else []
    )
    for log in logs:  # a restarted container's earlier log first
        lines += [
            line
            for line in log.read_text(errors="replace").splitlines()
            if any(ns in line for ns in namespaces)
        ]
    return "\n".join(line[:600] for line in lines[-count:])


# ------------------------------------------------------------------ interruption (SIGINT, SIGTERM, SIGHUP)
_last_signal: list[float] = []


def _on_signal(signum, frame):
    """A stop asked for: namespaces go at once from now on (e2e/helpers.py interrupt), the
    pytest-xdist workers of this controller are asked to stop too, and KeyboardInterrupt unwinds
    the test, so that context managers and fixtures clean up. The same stop asked again within
    seconds (the terminal's SIGINT, then hack/test.sh's SIGTERM) is not a second interruption:
    the cleanup goes on."""
    import signal
    import time

    from e2e.helpers import interrupt

    now = time.monotonic()
    if _last_signal and now - _last_signal[0] < 5:
        return
    _last_signal[:] = [now]
    name = signal.Signals(signum).name
    interrupt(name)
    for child in _xdist_workers():
        with contextlib.suppress(OSError):
            os.kill(child, signal.SIGTERM)
    raise KeyboardInterrupt(name)


_CONTROLLER: list[bool] = []  # this process is a pytest-xdist controller (its workers get our signals)


def _xdist_workers() -> list[int]:
    """This controller's child processes that run Python (its pytest-xdist workers)."""
    if not _CONTROLLER:
        return []
    pids = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(OSError, ValueError):
            pids += [int(x) for x in (task / "children").read_text().split()]
    out = []
    for pid in pids:
        with contextlib.suppress(OSError):
            if b"python" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(pid)
    return out


def pytest_configure(config):
    import atexit
    import signal
    import threading

    from e2e import evidence
    from e2e.helpers import delete_created_namespaces, run_id

    config.addinivalue_line(
        "markers",
        "causes(*kinds): the primary changes or data replacements the test causes on purpose, of "
        f"{', '.join(sorted(evidence.KINDS))}; an Event of another kind during it fails it",
    )
    worker = hasattr(config, "workerinput")
    if not worker:
        run_id(new=True)  # this session's label on its namespaces; xdist workers inherit it
        if getattr(config.option, "numprocesses", None):
            _CONTROLLER.append(True)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _on_signal)
    atexit.register(delete_created_namespaces)


def pytest_keyboard_interrupt(excinfo):
    from e2e.helpers import interrupt

    interrupt("KeyboardInterrupt")


# ------------------------------------------------------------------ scenarios (e2e/test_scenarios_*.py)
@pytest.fixture
def scenario_namespace(local_cluster, operator_release):
    """A fresh namespace watched by the chart-installed operator; its MySQLClusters are deleted
    while the operator still runs (kopf's finalizer removed), then the namespace."""
    from e2e.helpers import scenario_namespace as make

    with make(local_cluster.api_client()) as ns:
        yield ns


def pytest_sessionfinish(session):
    """In a pytest-xdist worker: hand the timings it recorded to the controller, which prints them."""
    from e2e.helpers import recorded

    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["e2e_timings"] = recorded()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller: a worker finished; keep its timings for the table."""
    from e2e.helpers import add_recorded

    add_recorded(getattr(node, "workeroutput", {}).get("e2e_timings", []))


def pytest_terminal_summary(terminalreporter):
    from e2e.helpers import format_table, recorded, save_timings

    if recorded():
        save_timings()
        terminalreporter.write_sep("-", "e2e timings")
        terminalreporter.write_line(format_table(recorded()))
