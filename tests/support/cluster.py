"""A one-node Kubernetes cluster on this machine, without Docker, for end-to-end tests.

The control plane of tests/support/controlplane.py, plus a node: a project-configured containerd,
kubelet and kube-proxy (same Kubernetes version), CNI bridge networking, CoreDNS,
rancher's local-path-provisioner and kube-router's NetworkPolicy firewall (the bridge plugin
enforces no NetworkPolicy) as host processes, and a real OCI registry beside it (TLS, basic auth).
The images built locally (hack/build-images.sh) reach the node as users' images do: the operator's
and the servers' are pushed to that registry and pulled by containerd with the credentials of a
pull Secret (PULL_SECRET, in each namespace that runs them); only the node's own images (the Pod
sandbox, which containerd pulls without any Pod's credentials, and the volume helper) are imported,
as a kind node image carries them.

Every non-default setting and the reason for it is in NODE_SETTINGS.md beside this file.

Addresses: the node lives on a bridge the cluster creates (`mysqlop0`, 10.244.0.1/24); Pods get
10.244.0.10-254 on it, Services 10.96.0.0/16 (routed onto the bridge too, so nothing for the
cluster ever leaves through the machine's own interfaces). Fixed names mean one such cluster per
machine at a time: a lock file serialises them.

    python -m tests.support.cluster up      # detached; prints KUBECONFIG when the node is Ready
    python -m tests.support.cluster down
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.support import controlplane as cp_mod
from tests.support.controlplane import ControlPlane, binary
from tests.support.ports import free_port

BRIDGE = "mysqlop0"
NODE_IP = "10.244.0.1"
POD_SUBNET = "10.244.0.0/24"
POD_RANGE_START = "10.244.0.10"
CLUSTER_CIDR = "10.244.0.0/16"
SERVICE_CIDR = cp_mod.SERVICE_CIDR
NODE_NAME = cp_mod.NODE_NAME
STORAGE_CLASS = "standard"
NODE_IMAGES = ("pause", "busybox")  # imported into containerd: the node's own
PRODUCT_IMAGES = (
    "mariadb",
    "mariadb-11.8",
    "mysql",
    "operator",
    "exporter",
    "mariadb-tools",
    "mariadb-tools-11.8",
    "mysql-tools",
)  # pushed to the registry, pulled
IMAGES_ENV = "MYSQLOP_CLUSTER_IMAGES"  # a subset of PRODUCT_IMAGES to build and push (`make demo`)
S3_PORT = 9000
REGISTRY_PORT = 5000  # the registry beside the cluster (tests/support/registry.py), node address
REGISTRY = f"{NODE_IP}:{REGISTRY_PORT}"
PULL_SECRET = "local-registry"  # the kubernetes.io/dockerconfigjson Secret for REGISTRY


def registry_ref(local_ref: str) -> str:
    """Where a hack/build-images.sh image (localhost/NAME:TAG) is in the registry: REGISTRY/NAME:TAG."""
    return f"{REGISTRY}/{local_ref.removeprefix('localhost/')}"


def pull_secret(state: dict, namespace: str) -> dict:
    """The PULL_SECRET a namespace needs to run the product's images (a running cluster's state)."""
    from tests.support.registry import Registry

    secret = Registry.from_state(state["registry"]).pull_secret(PULL_SECRET)
    secret["metadata"]["namespace"] = namespace
    return secret


def ensure_pull_secret(api, state: dict, namespace: str) -> None:
    """Create PULL_SECRET in `namespace` (kept when it is there already)."""
    create_or_keep(api, pull_secret(state, namespace))


LOCK = Path("/run/lock/mysqlop-cluster.lock")


def state_dir() -> Path:
    return Path(os.environ.get("MYSQLOP_CLUSTER_DIR", "/var/tmp/mysqlop-cluster"))


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=check)


class ClusterError(RuntimeError):
    pass


@dataclass
class Cluster:
    workdir: Path = field(default_factory=state_dir)
    cp: ControlPlane | None = None
    containerd: object | None = None
    images: dict = field(default_factory=dict)
    s3: object | None = None  # MinIO beside the cluster, on the node address
    registry: object | None = None  # the OCI registry beside the cluster, on the node address
    netpol_health_port: int = 0  # kube-router's /healthz on 127.0.0.1
    timings: dict[str, float] = field(default_factory=dict)
    _lock_fd: int | None = None

    # ---------------------------------------------------------------- lifecycle
    def up(self, lock_timeout: float = 600) -> "Cluster":
        self._take_lock(lock_timeout)
        t0 = time.monotonic()
        try:
            self._cleanup_leftovers()
            self.workdir.mkdir(parents=True, exist_ok=True)
            self._network_up()
            self.cp = ControlPlane(workdir=self.workdir / "control-plane", host=NODE_IP)
            self.cp.workdir.mkdir(parents=True, exist_ok=True)
            self.cp.start()
            self.timings["control-plane"] = time.monotonic() - t0
            self._start_containerd()
            self.timings["containerd"] = time.monotonic() - t0
            self._start_kubelet()
            self._start_kube_proxy()
            self._start_coredns()
            self._wait_node_ready()
            self.timings["node-ready"] = time.monotonic() - t0
            self._start_network_policy()
            self.timings["network-policy"] = time.monotonic() - t0
            self._start_provisioner()
            self._start_s3()
            self._start_registry()
            self.timings["ready"] = time.monotonic() - t0
            self._write_state()
            return self
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        if self.cp is not None:
            node_components = [c for c in self.cp.components if c.name in _NODE_COMPONENTS]
            for c in reversed(node_components):
                c.stop()
        if self.s3 is not None:
            self.s3.stop()
        if self.registry is not None:
            self.registry.stop()
        if self.containerd is not None:
            self.containerd.stop()
        if self.cp is not None:
            self.cp.stop(remove=False)
        self._cleanup_leftovers()
        self._release_lock()

    # ---------------------------------------------------------------- pieces
    def _take_lock(self, timeout: float) -> None:
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise ClusterError(
                        f"another local cluster holds {LOCK} (pid {_read(LOCK)}); "
                        "stop it with `make cluster-down`"
                    ) from None
                time.sleep(1)
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _network_up(self) -> None:
        """The bridge Pods attach to, with the node address; Service traffic routed onto it."""
        _run("mount", "--make-rshared", "/")  # kubelet volume mounts need shared propagation
        if _run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
            _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "replace", f"{NODE_IP}/24", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        # Without kube-proxy's DNAT a Service address would follow the default route out of the
        # machine: keep the whole range on our bridge instead.
        _run("ip", "route", "replace", SERVICE_CIDR, "dev", BRIDGE)

    def _start_containerd(self) -> None:
        from tests.support.containerd import Containerd, build_images

        t0 = time.monotonic()
        self.images = build_images(*NODE_IMAGES, *_product_images())  # quick when the cache is warm
        self.timings["images"] = time.monotonic() - t0
        self.containerd = Containerd(self.workdir / "containerd", pause_image=self.images["pause"].ref)
        self.containerd.start()
        conflist = self.containerd.cni_conf_dir / "10-mysqlop.conflist"
        conflist.write_text(json.dumps(_cni_conflist(self.workdir / "cni-ipam"), indent=2))
        self.containerd.import_images({n: self.images[n] for n in NODE_IMAGES})

    def _start_kubelet(self) -> None:
        d = self.workdir / "kubelet"
        d.mkdir(parents=True, exist_ok=True)
        port, healthz = free_port(), free_port()
        config = kubelet_config(
            ca_file=self.cp.pki / "ca.crt",
            runtime_endpoint=f"unix://{self.containerd.socket}",
            port=port,
            healthz_port=healthz,
            pod_logs_dir=d / "pod-logs",
        )
        (d / "config.yaml").write_text(yaml.safe_dump(config))
        self.cp.run_component(
            "kubelet",
            [
                str(binary("kubelet")),
                f"--config={d / 'config.yaml'}",
                f"--kubeconfig={self.cp.kubeconfig_dir / 'kubelet.conf'}",
                f"--root-dir={d / 'root'}",
                f"--cert-dir={d / 'pki'}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={NODE_IP}",
                "--v=1",
            ],
        )

    def _start_kube_proxy(self) -> None:
        d = self.workdir / "kube-proxy"
        d.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.cp.user_kubeconfig("system:kube-proxy", "system:node-proxier")
        config = kube_proxy_config(kubeconfig, free_port(), free_port())
        (d / "config.yaml").write_text(yaml.safe_dump(config))
        self.cp.run_component(
            "kube-proxy",
            [str(binary("kube-proxy")), f"--config={d / 'config.yaml'}", "--v=1"],
        )

    def _start_coredns(self) -> None:
        d = self.workdir / "coredns"
        d.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.cp.user_kubeconfig("system:coredns", "system:coredns-reader", rules=COREDNS_RULES)
        (d / "Corefile").write_text(corefile(kubeconfig))
        self.cp.run_component("coredns", [str(binary("coredns")), "-conf", str(d / "Corefile")])

    def _start_network_policy(self) -> None:
        """kube-router with only its firewall: enforces NetworkPolicy with iptables + ipset on the
        traffic of this node's Pods (chains of its own, jumped to from the filter table's
        INPUT/FORWARD/OUTPUT, like kube-proxy's). Its routing, service proxy and CNI stay off.
        Needs the Node object (it reads the node address), so it starts once the node is Ready.
        Not built (`make demo` does not build it): no enforcer, and the state says so."""
        try:
            binary("kube-router")
        except FileNotFoundError:
            print("no kube-router built: NetworkPolicy is not enforced on this cluster", file=sys.stderr)
            return
        kubeconfig = self.cp.user_kubeconfig(
            "system:kube-router", "system:kube-router-netpol", rules=NETPOL_RULES
        )
        self.netpol_health_port = free_port()
        self.cp.run_component(
            "kube-router",
            [
                str(binary("kube-router")),
                f"--kubeconfig={kubeconfig}",
                f"--hostname-override={NODE_NAME}",
                "--run-firewall=true",
                "--run-router=false",
                "--run-service-proxy=false",
                "--enable-cni=false",
                "--enable-ipv6=false",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--health-addr=127.0.0.1",
                f"--health-port={self.netpol_health_port}",
                "--metrics-port=0",
                "--v=1",
            ],
        )
        self.cp.wait_until(
            lambda: network_policy_ready(self.netpol_health_port), "kube-router NetworkPolicy firewall", 60
        )

    def _start_provisioner(self) -> None:
        d = self.workdir / "local-path"
        (d / "volumes").mkdir(parents=True, exist_ok=True)
        api = self.cp.api_client()
        for obj in local_path_objects(d / "volumes", self.images["busybox"].ref):
            create_or_keep(api, obj)
        kubeconfig = self.cp.user_kubeconfig(
            "system:local-path-provisioner",
            "system:local-path-provisioner",
            rules=PROVISIONER_RULES,
        )
        self.cp.run_component(
            "local-path-provisioner",
            [
                str(binary("local-path-provisioner")),
                "start",
                f"--kubeconfig={kubeconfig}",
                "--namespace=local-path-storage",
                f"--helper-image={self.images['busybox'].ref}",
                "--service-account-name=local-path-provisioner",
            ],
        )

    def _start_s3(self) -> None:
        """A real S3 server (MinIO, test-only) that Pods and the host reach at the node address."""
        from tests.support.s3 import S3Server

        self.s3 = S3Server(root=self.workdir / "s3", host=NODE_IP, port=S3_PORT).start()

    def _start_registry(self) -> None:
        """A real OCI registry (TLS, basic auth) that containerd pulls from at the node address,
        its CA trusted through containerd's certs.d; credentials come from Pods' pull Secrets.
        The product's images are pushed to it (PRODUCT_IMAGES, as registry_ref names them)."""
        from tests.support import registry as reg

        if reg.missing():
            raise ClusterError(reg.missing())
        self.registry = reg.Registry(self.workdir / "registry", host=NODE_IP, port=REGISTRY_PORT).start()
        hosts = self.containerd.workdir / "certs.d" / self.registry.address
        hosts.mkdir(parents=True, exist_ok=True)
        (hosts / "hosts.toml").write_text(self.registry.hosts_toml())
        t0 = time.monotonic()
        push_images(self.registry, {n: self.images[n] for n in _product_images()})
        self.timings["push-images"] = time.monotonic() - t0

    def _wait_node_ready(self) -> None:
        from kubernetes import client

        core = client.CoreV1Api(self.cp.api_client())

        def ready():
            node = core.read_node(NODE_NAME)
            return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)

        self.cp.wait_until(ready, f"node {NODE_NAME} Ready", 120)

    def _write_state(self) -> None:
        state = {
            "pid": os.getpid(),
            "kubeconfig": str(self.cp.admin_kubeconfig),
            "server": self.cp.server,
            "containerd_socket": str(self.containerd.socket),
            "logs_dir": str(self.cp.logs_dir),
            "audit_log": str(self.cp.audit_log),  # e2e/evidence.py reads the operator's writes there
            "s3": {
                "endpoint": self.s3.endpoint,
                "access_key": self.s3.access_key,
                "secret_key": self.s3.secret_key,
            },
            "registry": {
                "root": str(self.registry.root),
                "host": self.registry.host,
                "port": self.registry.port,
                "username": self.registry.username,
                "password": self.registry.password,
            },
            "network_policy": (
                {"enforcer": "kube-router", "health": f"http://127.0.0.1:{self.netpol_health_port}/healthz"}
                if self.netpol_health_port
                else None
            ),
            "timings": self.timings,
            "images": {i.name: str(i.archive) for i in self.images.values()},
        }
        path = self.workdir / "state.json"
        path.touch(mode=0o600)  # holds the local S3 server's keys and the registry's password
        path.write_text(json.dumps(state, indent=2))

    def _cleanup_leftovers(self) -> None:
        """Undo what a cluster (this one or one that died) left: processes, mounts, rules,
        routes, bridge."""
        root = str(self.workdir) + "/"
        _kill_processes_mentioning(root)
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
        for m in sorted((m for m in mounts if m.startswith(root)), key=len, reverse=True):
            _run("umount", "-l", m, check=False)
        if cp_mod.bin_dir().exists():
            try:
                _run(str(binary("kube-proxy")), "--cleanup", check=False)
            except FileNotFoundError:
                pass
        remove_network_policy_rules()
        # Pod network namespaces: containerd 1.6 keeps them in the machine-wide /run/netns and
        # does not remove them when stopped. Only this cluster makes them (we hold the lock).
        netns = Path("/run/netns")
        for ns in sorted(netns.glob("cni-*")) if netns.exists() else []:
            _run("ip", "netns", "delete", ns.name, check=False)
        _run("ip", "route", "del", SERVICE_CIDR, "dev", BRIDGE, check=False)
        for veth in _bridge_ports(BRIDGE):
            _run("ip", "link", "del", veth, check=False)
        _run("ip", "link", "del", BRIDGE, check=False)
        if self.workdir.exists():
            shutil.rmtree(self.workdir, ignore_errors=True)


_NODE_COMPONENTS = ("kubelet", "kube-proxy", "coredns", "local-path-provisioner", "kube-router")


# -------------------------------------------------------------------- pure configuration
def kubelet_config(*, ca_file, runtime_endpoint, port, healthz_port, pod_logs_dir) -> dict:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_IP,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": runtime_endpoint,
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": False,
        "enforceNodeAllocatable": [],
        # without per-Pod cgroups the kubelet 1.34 panics in its in-place resize path (a nil Pod
        # cgroup config) when a recreated Pod's containers ask for different resources
        "featureGates": {"InPlacePodVerticalScaling": False},
        "failSwapOn": False,
        "oomScoreAdj": 0,  # no CAP_SYS_RESOURCE here: an oom_score_adj cannot be lowered
        "clusterDNS": [NODE_IP],
        "clusterDomain": cp_mod.CLUSTER_DOMAIN,
        "resolvConf": "",
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "0%",
            "nodefs.inodesFree": "0%",
            "imagefs.available": "0%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "podLogsDir": str(pod_logs_dir),
        "serializeImagePulls": False,
        "maxPods": 110,
    }


def kube_proxy_config(kubeconfig: Path, healthz_port: int, metrics_port: int) -> dict:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "clusterCIDR": CLUSTER_CIDR,
        "hostnameOverride": NODE_NAME,
        "bindAddress": NODE_IP,
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "nodePortAddresses": [f"{NODE_IP}/32"],
        "conntrack": {"maxPerCore": 0, "min": 0},
    }


def corefile(kubeconfig: Path) -> str:
    # No `forward`: names outside the cluster get no answer from us, so Pods never reach out.
    lines = [
        ".:53 {",
        f"    bind {NODE_IP}",
        "    errors",
        # every answer, with its code and how long it took: an answer a Pod missed (EAI_AGAIN on
        # the loaded CI node) is then explained by the log (timed out, or NXDOMAIN: a watch behind)
        '    log . "{name} {type} {rcode} {duration}"',
        f"    kubernetes {cp_mod.CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{",
        f"        kubeconfig {kubeconfig}",
        "        pods insecure",
        "        fallthrough in-addr.arpa ip6.arpa",
        "    }",
        "    cache 5",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _cni_conflist(ipam_dir: Path) -> dict:
    return {
        "cniVersion": "1.0.0",
        "name": "mysqlop",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(ipam_dir),
                    "ranges": [[{"subnet": POD_SUBNET, "rangeStart": POD_RANGE_START, "gateway": NODE_IP}]],
                    # no default route: Pods reach the cluster's ranges and nothing else
                    "routes": [{"dst": CLUSTER_CIDR}, {"dst": SERVICE_CIDR}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


COREDNS_RULES = [
    {
        "apiGroups": [""],
        "resources": ["endpoints", "services", "pods", "namespaces"],
        "verbs": ["list", "watch"],
    },
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
]
# kube-router's informers (firewall only): it reads its Node once and watches the rest.
NETPOL_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods", "namespaces", "services"], "verbs": ["list", "watch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["list", "watch"]},
]
PROVISIONER_RULES = [
    {
        "apiGroups": [""],
        "resources": ["nodes", "persistentvolumeclaims", "configmaps", "pods", "pods/log"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": [""],
        "resources": ["persistentvolumes"],
        "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["update", "patch"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get", "list", "watch"]},
]


def local_path_objects(volumes_dir: Path, helper_image: str) -> list[dict]:
    ns = "local-path-storage"
    helper_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "helper-pod"},
        "spec": {
            "priorityClassName": "system-node-critical",
            "containers": [{"name": "helper-pod", "image": helper_image, "imagePullPolicy": "Never"}],
        },
    }
    config = {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [str(volumes_dir)]}]}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "local-path-provisioner", "namespace": ns},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "local-path-config", "namespace": ns},
            "data": {
                "config.json": json.dumps(config),
                "setup": '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n',
                "teardown": '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n',
                "helperPod.yaml": yaml.safe_dump(helper_pod),
            },
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "rancher.io/local-path",
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete",
        },
    ]


# -------------------------------------------------------------------- small effects
# What kube-router's firewall creates (its chains in the filter table, its ipsets); nothing else
# on the machine carries these names (one cluster per machine: we hold the lock).
NETPOL_CHAIN_PREFIXES = ("KUBE-ROUTER-", "KUBE-NWPLCY-", "KUBE-POD-FW-")
NETPOL_IPSET_PREFIXES = (
    "KUBE-SRC-",
    "KUBE-DST-",
    "kube-router-local-pods",
    "inet6:KUBE-SRC-",
    "inet6:KUBE-DST-",
    "inet6:kube-router-local-pods",
)


def network_policy_ready(health_port: int) -> bool:
    """kube-router answers healthy and has finished a full sync (the tail chain is jumped to)."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/healthz", timeout=2) as r:
        if r.status != 200:
            return False
    rules = _run("iptables", "-w", "-t", "filter", "-S", "KUBE-ROUTER-FORWARD", check=False)
    return rules.returncode == 0 and "-j KUBE-NWPLCY-TAIL" in rules.stdout


def remove_network_policy_rules() -> None:
    """Remove kube-router's jumps from INPUT/FORWARD/OUTPUT, then its chains and its ipsets
    (what `kube-router --cleanup-config` does for the firewall, without that command's IPVS and
    routing cleanup, which would touch the machine's own)."""
    import shlex

    if shutil.which("iptables") is None:
        return

    def ours(chain: str) -> bool:
        return chain.startswith(NETPOL_CHAIN_PREFIXES)

    saved = _run("iptables-save", "-t", "filter", check=False).stdout.splitlines()
    chains = [line[1:].split()[0] for line in saved if line.startswith(":") and ours(line[1:].split()[0])]
    for line in saved:
        words = shlex.split(line)
        if (
            len(words) > 2
            and words[0] == "-A"
            and not ours(words[1])
            and "-j" in words
            and ours(words[words.index("-j") + 1])
        ):
            _run("iptables", "-w", "-t", "filter", "-D", *words[1:], check=False)
    for chain in chains:
        _run("iptables", "-w", "-t", "filter", "-F", chain, check=False)
    for chain in chains:
        _run("iptables", "-w", "-t", "filter", "-X", chain, check=False)
    if shutil.which("ipset") is None:
        return
    for name in _run("ipset", "list", "-n", check=False).stdout.split():
        if name.startswith(NETPOL_IPSET_PREFIXES):
            _run("ipset", "destroy", name, check=False)


def create_or_keep(api, obj: dict) -> None:
    """Create one object from its manifest; one that exists already is kept as it is."""
    from kubernetes import client, utils

    try:
        utils.create_from_dict(api, obj)
    except utils.FailToCreateError as e:
        if not all(getattr(x, "status", None) == 409 for x in e.api_exceptions):
            raise
    except client.ApiException as e:
        if e.status != 409:
            raise


def _kill_processes_mentioning(prefix: str) -> None:
    """SIGKILL every process whose command line names a path under `prefix`, with all its
    descendants: exactly what a cluster in that folder started (components, containerd, shims
    and the containers they serve), nothing else."""
    me = os.getpid()
    argv, parent = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv[int(entry.name)] = (entry / "cmdline").read_bytes().decode(errors="replace")
            parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    doomed = {pid for pid, cmd in argv.items() if prefix in cmd and pid != me}
    grew = True
    while grew:
        more = {pid for pid, ppid in parent.items() if ppid in doomed and pid not in doomed}
        doomed |= more
        grew = bool(more)
    for pid in doomed - {me}:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _bridge_ports(bridge: str) -> list[str]:
    d = Path(f"/sys/class/net/{bridge}/brif")
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return "?"


def _product_images() -> tuple[str, ...]:
    """PRODUCT_IMAGES, or the ones IMAGES_ENV names (the e2e tests push the others when they reuse
    such a cluster)."""
    named = os.environ.get(IMAGES_ENV, "").split()
    unknown = set(named) - set(PRODUCT_IMAGES)
    if unknown:
        raise ClusterError(f"{IMAGES_ENV}: {sorted(unknown)} are not among {PRODUCT_IMAGES}")
    return tuple(named) or PRODUCT_IMAGES


def push_images(registry, images: dict) -> None:
    """Push hack/build-images.sh images to the registry under registry_ref (a blob it has already
    is not sent again)."""
    for image in images.values():
        ref = registry_ref(image.ref)
        repo, tag = ref.removeprefix(f"{registry.address}/").rsplit(":", 1)
        registry.push(image.archive, repo, tag)


def refresh_images(state: dict) -> list[str]:
    """For a reused cluster: build the images (quick when cached), import the node's whose archive
    (keyed by content) differs from what containerd has, push the product's (those IMAGES_ENV
    names, else all; a few requests each when the registry has them). The names of the images
    that changed."""
    from tests.support.containerd import Containerd, build_images
    from tests.support.registry import Registry

    product = _product_images()
    images = build_images(*NODE_IMAGES, *product)
    had = state.get("images", {})
    changed = sorted(n for n, i in images.items() if had.get(n) != str(i.archive))
    node = {n: images[n] for n in changed if n in NODE_IMAGES}
    if node:
        Containerd(Path(state["containerd_socket"]).parent).import_images(node)  # the running one
    push_images(Registry.from_state(state["registry"]), {n: images[n] for n in product})
    if changed:
        state["images"] = {**had, **{n: str(i.archive) for n, i in images.items()}}
        (state_dir() / "state.json").write_text(json.dumps(state, indent=2))
    return changed


def written_state() -> dict:
    """state.json of the cluster on this machine (one at a time), whoever runs it: `make
    cluster-up`'s supervisor or a test session."""
    return json.loads((state_dir() / "state.json").read_text())


def running_state() -> dict | None:
    """state.json of a cluster whose supervisor is alive, else None."""
    state = state_dir() / "state.json"
    if not state.exists():
        return None
    s = json.loads(state.read_text())
    try:  # alive, and still our supervisor (not a reused pid)
        cmdline = Path(f"/proc/{s['pid']}/cmdline").read_bytes()
    except OSError:
        return None
    return s if b"tests.support.cluster" in cmdline else None


# -------------------------------------------------------------------- CLI
def main(argv: list[str]) -> int:
    cmd = argv[1] if len(argv) > 1 else "up"
    if cmd == "serve":  # the detached supervisor started by `up`
        cluster = Cluster()
        stop: list[int] = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        try:
            cluster.up()
        except Exception as e:  # noqa: BLE001
            print(f"cluster failed: {e}", file=sys.stderr)
            return 1
        print(json.dumps(cluster.timings), file=sys.stderr, flush=True)
        while not stop and all(c.alive() for c in cluster.cp.components):
            time.sleep(0.5)
        for c in cluster.cp.components:
            if not c.alive():
                print(f"{c.name} exited:\n{c.log_tail()}", file=sys.stderr)
        cluster.down()
        return 0
    if cmd == "up":
        running = running_state()
        if running is not None:
            print(f"the local cluster is already running (pid {running['pid']})", file=sys.stderr)
            # the images asked for now (`make demo FLAVOR=mariadb` after a MySQL demo): pushed
            changed = refresh_images(running)
            if changed:
                print(f"images imported or pushed: {', '.join(changed)}", file=sys.stderr)
            print(f"export KUBECONFIG={running['kubeconfig']}")
            return 0
        log = Path("/var/tmp/mysqlop-cluster.log")
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.support.cluster", "serve"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=cp_mod.REPO,
            )
        state = state_dir() / "state.json"
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                print(log.read_text(errors="replace")[-4000:], file=sys.stderr)
                return 1
            if state.exists() and json.loads(state.read_text())["pid"] == proc.pid:
                s = json.loads(state.read_text())
                print(f"cluster ready in {s['timings']['ready']:.1f}s (log: {log})", file=sys.stderr)
                print(f"export KUBECONFIG={s['kubeconfig']}")
                return 0
            time.sleep(0.5)
        print("cluster not ready after 600s", file=sys.stderr)
        return 1
    if cmd == "down":
        state = state_dir() / "state.json"
        if not state.exists():
            print("no local cluster is running", file=sys.stderr)
            return 0
        pid = json.loads(state.read_text())["pid"]
        t0 = time.monotonic()
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            Cluster().down()  # supervisor died: clean up what it left
            return 0
        while time.monotonic() - t0 < 120:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                print(f"cluster stopped in {time.monotonic() - t0:.1f}s", file=sys.stderr)
                return 0
            time.sleep(0.2)
        print(f"cluster supervisor {pid} did not stop", file=sys.stderr)
        return 1
    print("usage: python -m tests.support.cluster up|down", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
