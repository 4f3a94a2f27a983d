"""A real Kubernetes control plane on loopback, from binaries built by hack/build-binaries.sh.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as child processes of the
test session, each in its own process group, with data and logs under one temporary folder and
ports chosen free at start. kubeadm generates the PKI and the kubeconfigs. Nothing is shared with
another session, and `stop()` kills exactly the processes `start()` started.

    python -m tests.support.controlplane      # start, print KUBECONFIG, run until Ctrl-C
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import yaml

from tests.support.ports import free_port
from tests.support import audit

REPO = Path(__file__).resolve().parents[2]
SERVICE_CIDR = "10.96.0.0/16"  # virtual only; overlaps nothing the host routes
CLUSTER_DOMAIN = "cluster.local"
NODE_NAME = "mysqlop-node"


def versions() -> dict[str, str]:
    """The pins of hack/versions.env as a dict."""
    out = {}
    for line in (REPO / "hack" / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = value
    return out


def bin_dir() -> Path:
    root = os.environ.get("MYSQL_OPERATOR_DEV_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mysql-operator-dev"
    )
    return Path(root) / "bin"


def binary(name: str) -> Path:
    v = versions()
    folder = {
        "etcd": f"etcd-{v['ETCD_VERSION']}",
        "helm": f"helm-{v['HELM_VERSION']}",
        "coredns": f"coredns-{v['COREDNS_VERSION']}",
        "local-path-provisioner": f"local-path-provisioner-{v['LOCAL_PATH_PROVISIONER_VERSION']}",
        "kube-router": f"kube-router-{v['KUBE_ROUTER_VERSION']}",
    }.get(name, f"kubernetes-{v['KUBERNETES_VERSION']}")
    path = bin_dir() / folder / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `make binaries` (hack/build-binaries.sh)")
    return path


def build_binaries(target: str) -> None:
    """`hack/build-binaries.sh target`: returns at once when its binaries are built. `make test`
    builds the test-only ones (cert-manager, Prometheus) at low priority beside the other builds and
    the tests, so a test that needs one may wait here for that build (the script's lock)."""
    proc = subprocess.run(
        [str(REPO / "hack" / "build-binaries.sh"), target], capture_output=True, text=True, timeout=3600
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"`hack/build-binaries.sh {target}` failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}"
        )


def late_builds_last(items: list) -> None:
    """Sort the tests marked `late_build` (they need a binary hack/test.sh builds beside the tests)
    after the others, so that on a cold machine no test waits for that build."""
    items.sort(key=lambda item: item.get_closest_marker("late_build") is not None)


def missing_binaries() -> list[str]:
    names = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubeadm"]
    out = []
    for n in names:
        try:
            binary(n)
        except FileNotFoundError:
            out.append(n)
    return out


class ControlPlaneError(RuntimeError):
    pass


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the process that started it dies, so a test
    session killed hard leaves nothing running (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def stop_group(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM the process group `proc` leads (started with start_new_session), SIGKILL it after
    `timeout`; returns once `proc` is gone."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(5)


@dataclass
class Component:
    name: str
    argv: list[str]
    log_path: Path
    die_with_parent: bool = True
    proc: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: teardown kills exactly this tree
                preexec_fn=_die_with_parent if self.die_with_parent else None,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None:
            stop_group(self.proc, timeout)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text[-lines:])


@dataclass
class ControlPlane:
    """One control plane. `start()` returns when the apiserver is ready and RBAC is bootstrapped."""

    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mysqlop-cp-")))
    keep_workdir: bool = False
    # Where the apiserver listens and what it advertises. Loopback for API-only tests; the node
    # address when Pods must reach it through the `kubernetes` Service.
    host: str = "127.0.0.1"
    die_with_parent: bool = True
    components: list[Component] = field(default_factory=list)
    api_port: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    # ---- paths
    @property
    def pki(self) -> Path:
        return self.workdir / "pki"

    @property
    def kubeconfig_dir(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def admin_kubeconfig(self) -> Path:
        """cluster-admin (group kubeadm:cluster-admins, bound at start)."""
        return self.kubeconfig_dir / "admin.conf"

    @property
    def super_admin_kubeconfig(self) -> Path:
        """system:masters: bypasses RBAC. Prefer admin_kubeconfig."""
        return self.kubeconfig_dir / "super-admin.conf"

    @property
    def server(self) -> str:
        return f"https://{self.host}:{self.api_port}"

    @property
    def logs_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def audit_log(self) -> Path:
        """What ServiceAccounts asked (tests/support/audit.py): in the logs, or in the directory
        `make test` names for the suite (audit.SUITE_DIR_VARIABLE), where it outlives this control plane."""
        return audit.log_path(self.logs_dir, self.workdir.name)

    # ---- lifecycle
    def start(self, attempts: int = 3) -> "ControlPlane":
        missing = missing_binaries()
        if missing:
            raise ControlPlaneError(
                f"binaries missing: {', '.join(missing)}; build them with `make binaries`"
            )
        last: Exception | None = None
        for attempt in range(attempts):
            try:
                self._start_once()
                return self
            except ControlPlaneError as e:  # e.g. a port taken between choosing and binding
                last = e
                self.stop(remove=False)
                for c in self.components:
                    c.log_path.rename(c.log_path.with_suffix(f".attempt{attempt}.log"))
                self.components.clear()
            except BaseException:
                self.stop(remove=False)
                raise
        raise ControlPlaneError(f"control plane did not start after {attempts} attempts: {last}")

    def _start_once(self) -> None:
        t0 = time.monotonic()
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.api_port = free_port()
        etcd_client, etcd_peer = free_port(), free_port()
        if not (self.pki / "ca.crt").exists():
            self._kubeadm_pki()
        self._point_kubeconfigs_here()
        self.timings["pki"] = time.monotonic() - t0

        etcd_url = f"http://127.0.0.1:{etcd_client}"
        peer_url = f"http://127.0.0.1:{etcd_peer}"
        self.run_component(
            "etcd",
            [
                str(binary("etcd")),
                "--name=default",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--listen-metrics-urls=",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        self.wait_until(lambda: _http_ok(f"{etcd_url}/health"), "etcd", 20)

        pki = self.pki
        audit_policy = self.workdir / "audit-policy.yaml"
        audit_policy.write_text(yaml.safe_dump(audit.POLICY))
        self.run_component(
            "kube-apiserver",
            [
                str(binary("kube-apiserver")),
                f"--etcd-servers={etcd_url}",
                f"--bind-address={self.host}",
                f"--advertise-address={self.host}",
                f"--secure-port={self.api_port}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
                # reach kubelets by their node address, never by a host name the machine's
                # resolver would be asked about
                "--kubelet-preferred-address-types=InternalIP",
                f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
                f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
                f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-username-headers=X-Remote-User",
                f"--service-account-issuer=https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                "--allow-privileged=true",
                "--profiling=false",
                # a loopback address cannot be an endpoint of the `kubernetes` Service
                f"--endpoint-reconciler-type={'none' if self._loopback else 'lease'}",
                "--v=1",
                *audit.apiserver_args(audit_policy, self.audit_log),
            ],
        )
        self.wait_until(self._apiserver_ready, "kube-apiserver", 60)
        audit.STARTED.append(self.audit_log)
        self.timings["apiserver"] = time.monotonic() - t0

        self.run_component(
            "kube-controller-manager",
            [
                str(binary("kube-controller-manager")),
                f"--kubeconfig={self.kubeconfig_dir / 'controller-manager.conf'}",
                f"--authentication-kubeconfig={self.kubeconfig_dir / 'controller-manager.conf'}",
                f"--authorization-kubeconfig={self.kubeconfig_dir / 'controller-manager.conf'}",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                f"--cluster-signing-key-file={pki / 'ca.key'}",
                "--controllers=*,bootstrapsigner,tokencleaner",
                "--concurrent-gc-syncs=5",
                "--profiling=false",
                "--v=1",
            ],
        )
        self.run_component(
            "kube-scheduler",
            [
                str(binary("kube-scheduler")),
                f"--kubeconfig={self.kubeconfig_dir / 'scheduler.conf'}",
                f"--authentication-kubeconfig={self.kubeconfig_dir / 'scheduler.conf'}",
                f"--authorization-kubeconfig={self.kubeconfig_dir / 'scheduler.conf'}",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--leader-elect=false",
                "--profiling=false",
                "--v=1",
            ],
        )
        self._bootstrap_rbac()
        self.wait_until(self._default_service_account_exists, "kube-controller-manager", 60)
        self.timings["ready"] = time.monotonic() - t0

    def stop(self, remove: bool | None = None) -> None:
        for c in reversed(self.components):
            c.stop()
        if remove is None:
            remove = not self.keep_workdir
        if remove:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "ControlPlane":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- helpers
    @property
    def _loopback(self) -> bool:
        return self.host.startswith("127.")

    def run_component(self, name: str, argv: list[str]) -> Component:
        c = Component(name, argv, self.logs_dir / f"{name}.log", self.die_with_parent)
        c.start()
        self.components.append(c)
        return c

    def wait_until(self, ready, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [c for c in self.components if not c.alive()]
            if dead:
                raise ControlPlaneError(
                    f"{dead[0].name} exited with {dead[0].proc.returncode}:\n{dead[0].log_tail()}"
                )
            try:
                if ready():
                    return
            except Exception:  # noqa: BLE001 - not ready yet; the deadline reports it
                pass
            time.sleep(0.1)
        raise ControlPlaneError(f"{what} not ready after {timeout}s:\n{self.logs_report()}")

    def logs_report(self, lines: int = 40) -> str:
        return "\n".join(f"----- {c.name} ({c.log_path}) -----\n{c.log_tail(lines)}" for c in self.components)

    def _kubeadm_pki(self) -> None:
        config = [
            {
                "apiVersion": "kubeadm.k8s.io/v1beta4",
                "kind": "InitConfiguration",
                # kubeadm refuses a loopback advertise address; this one only appears in certs
                # (no traffic is ever sent to it): TEST-NET-2 from RFC 5737.
                "localAPIEndpoint": {
                    "advertiseAddress": "198.51.100.10" if self._loopback else self.host,
                    "bindPort": self.api_port,
                },
                "nodeRegistration": {
                    "name": NODE_NAME,
                    "criSocket": "unix:///run/containerd/containerd.sock",
                },
            },
            {
                "apiVersion": "kubeadm.k8s.io/v1beta4",
                "kind": "ClusterConfiguration",
                "kubernetesVersion": versions()["KUBERNETES_VERSION"],
                "clusterName": "mysqlop-test",
                "certificatesDir": str(self.pki),
                "controlPlaneEndpoint": f"{self.host}:{self.api_port}",
                "encryptionAlgorithm": "ECDSA-P256",
                "networking": {"serviceSubnet": SERVICE_CIDR, "dnsDomain": CLUSTER_DOMAIN},
                "apiServer": {"certSANs": sorted({"127.0.0.1", "localhost", self.host})},
            },
        ]
        cfg = self.workdir / "kubeadm.yaml"
        cfg.write_text(yaml.safe_dump_all(config))
        kubeadm = str(binary("kubeadm"))
        for phase in (["certs", "all"], ["kubeconfig", "all"]):
            argv = [kubeadm, "init", "phase", *phase, f"--config={cfg}"]
            if phase[0] == "kubeconfig":
                argv.append(f"--kubeconfig-dir={self.kubeconfig_dir}")
            r = subprocess.run(argv, capture_output=True, text=True)
            if r.returncode != 0:
                raise ControlPlaneError(f"kubeadm {' '.join(phase)} failed:\n{r.stdout}{r.stderr}")

    def _point_kubeconfigs_here(self) -> None:
        """kubeadm writes the advertise address into some kubeconfigs and the port of the first
        attempt into all: every client must use this attempt's loopback endpoint. Called again
        for each new user while components already run: a file is replaced whole (a rename), never
        truncated and rewritten where a starting component may read it (kube-proxy once read an
        empty kubeconfig: "no configuration has been provided"), and only when it changes."""
        for path in self.kubeconfig_dir.glob("*.conf"):
            text = path.read_text()
            kc = yaml.safe_load(text)
            for cluster in kc["clusters"]:
                cluster["cluster"]["server"] = self.server
            new = yaml.safe_dump(kc)
            if new != text:
                tmp = path.with_name(f".{path.name}.tmp")
                tmp.write_text(new)
                tmp.chmod(path.stat().st_mode & 0o777)
                os.replace(tmp, path)

    def _ssl_context(self, kubeconfig: Path | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        kc = yaml.safe_load((kubeconfig or self.super_admin_kubeconfig).read_text())
        user = kc["users"][0]["user"]
        certdir = self.workdir / "client-certs"
        certdir.mkdir(exist_ok=True)
        crt, key = certdir / "admin.crt", certdir / "admin.key"
        if not crt.exists():
            crt.write_bytes(base64.b64decode(user["client-certificate-data"]))
            key.write_bytes(base64.b64decode(user["client-key-data"]))
            key.chmod(0o600)
        ctx.load_cert_chain(str(crt), str(key))
        return ctx

    def _apiserver_ready(self) -> bool:
        with urllib.request.urlopen(f"{self.server}/readyz", context=self._ssl_context(), timeout=2) as r:
            return r.status == 200

    def _bootstrap_rbac(self) -> None:
        """What a full `kubeadm init` binds and the phases alone do not."""
        from kubernetes import client

        api = client.RbacAuthorizationV1Api(self.api_client(super_admin=True))
        bindings = {
            "kubeadm:cluster-admins": ("cluster-admin", "Group", "kubeadm:cluster-admins"),
            # lets `kubectl logs/exec` reach kubelets
            "kube-apiserver-kubelet-admin": (
                "system:kubelet-api-admin",
                "User",
                "kube-apiserver-kubelet-client",
            ),
        }
        for name, (role, kind, subject) in bindings.items():
            body = {
                "metadata": {"name": name},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": role,
                },
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject}],
            }
            deadline = time.monotonic() + 30
            while True:  # the ClusterRoles are created by the apiserver's post-start hook
                try:
                    api.create_cluster_role_binding(body)
                    break
                except client.ApiException as e:
                    if e.status == 409:
                        break
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)

    def _default_service_account_exists(self) -> bool:
        from kubernetes import client

        client.CoreV1Api(self.api_client()).read_namespaced_service_account("default", "default")
        return True

    def user_kubeconfig(self, user: str, cluster_role: str, rules: list[dict] | None = None) -> Path:
        """A client-certificate kubeconfig for `user`, bound to `cluster_role` (created from
        `rules` when given). For host-process components such as kube-proxy and CoreDNS."""
        from kubernetes import client

        r = subprocess.run(
            [
                str(binary("kubeadm")),
                "kubeconfig",
                "user",
                f"--client-name={user}",
                f"--config={self.workdir / 'kubeadm.yaml'}",
            ],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            raise ControlPlaneError(f"kubeadm kubeconfig user {user} failed: {r.stderr[-2000:]}")
        path = self.kubeconfig_dir / f"{user.replace(':', '-')}.conf"
        path.write_text(r.stdout)
        path.chmod(0o600)
        self._point_kubeconfigs_here()
        rbac = client.RbacAuthorizationV1Api(self.api_client())
        if rules is not None:
            _create_ignoring_conflict(
                rbac.create_cluster_role, {"metadata": {"name": cluster_role}, "rules": rules}
            )
        _create_ignoring_conflict(
            rbac.create_cluster_role_binding,
            {
                "metadata": {"name": f"{cluster_role}:{user}"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": cluster_role,
                },
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            },
        )
        return path

    # ---- what tests use
    def api_client(self, kubeconfig: Path | None = None, super_admin: bool = False):
        """A kubernetes.client.ApiClient for a kubeconfig (default: the admin's)."""
        from mysql_operator.k8s.client import api_client

        path = kubeconfig or (self.super_admin_kubeconfig if super_admin else self.admin_kubeconfig)
        return api_client(str(path))

    @contextlib.contextmanager
    def fresh_namespace(self, prefix: str = "t") -> Iterator[str]:
        """A new namespace `<prefix>-<random>`, deleted afterwards."""
        from kubernetes import client

        core = client.CoreV1Api(self.api_client())
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        core.create_namespace({"metadata": {"name": name}})
        try:
            yield name
        finally:
            core.delete_namespace(name)

    def service_account_kubeconfig(self, namespace: str, name: str, expiration_seconds: int = 3600) -> Path:
        """A kubeconfig that authenticates as ServiceAccount namespace/name (TokenRequest)."""
        from kubernetes import client

        core = client.CoreV1Api(self.api_client())
        token = core.create_namespaced_service_account_token(
            name,
            namespace,
            {"spec": {"expirationSeconds": expiration_seconds}},
        ).status.token
        ca = base64.b64encode((self.pki / "ca.crt").read_bytes()).decode()
        user = f"system:serviceaccount:{namespace}:{name}"
        kc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": self.server, "certificate-authority-data": ca},
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": user, "context": {"cluster": "local", "user": user}}],
            "current-context": user,
        }
        path = self.kubeconfig_dir / f"sa-{namespace}-{name}.conf"
        path.write_text(yaml.safe_dump(kc))
        path.chmod(0o600)
        return path


def _create_ignoring_conflict(create, body) -> None:
    from kubernetes import client

    try:
        create(body)
    except client.ApiException as e:
        if e.status != 409:
            raise


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as r:
        return r.status == 200


def main() -> int:
    cp = ControlPlane(keep_workdir="--keep" in sys.argv)
    t0 = time.monotonic()
    try:
        cp.start()
    except Exception as e:  # noqa: BLE001 - report and keep the logs
        print(f"control plane failed: {e}", file=sys.stderr)
        print(f"logs kept in {cp.logs_dir}", file=sys.stderr)
        return 1
    print(f"control plane ready in {time.monotonic() - t0:.1f}s", file=sys.stderr)
    print(f"export KUBECONFIG={cp.admin_kubeconfig}")
    sys.stdout.flush()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        while not stop and all(c.alive() for c in cp.components):
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    dead = [c for c in cp.components if not c.alive()]
    for c in dead:
        print(f"{c.name} exited:\n{c.log_tail()}", file=sys.stderr)
    t1 = time.monotonic()
    cp.stop()
    print(f"control plane stopped in {time.monotonic() - t1:.1f}s", file=sys.stderr)
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main())
