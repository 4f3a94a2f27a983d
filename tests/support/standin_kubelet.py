"""A stand-in kubelet for a control plane without nodes (tests/support/controlplane.py): it writes
the status of the Pods it is given an address for (phase Running, a loopback podIP, Ready and
ContainersReady as the server behind it answers) through the /status subresource, as a kubelet
would. Linux routes all of 127.0.0.0/8 to this host, so every Pod gets its own 127.0.N.M.

What runs behind an address is the caller's: `HostServer` runs a Pod's real server on the host
the way its containers would (the Pod's own init.sh and start.sh from its ConfigMap, its env from
its Secret, its certificate from the TLS Secret), as the mysql user, in a mount namespace of its
own whose /etc/hosts resolves the cluster's Pod names (replicas reach their source by
`<pod>.<cluster>-headless.<ns>.svc`). Pods without an address are left alone (Pending, as with
no node).

    kubelet = StandInKubelet(api, ns)
    kubelet.serve("db", ["127.0.100.1", ...], ready=lambda ordinal: ...)
    kubelet.start() ... kubelet.stop()
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import shutil
import signal
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kubernetes import client

from mysql_operator.manifests import TLS_DIR
from mysql_operator.pods import pod_ordinal

OWNED = "app.kubernetes.io/managed-by=mysql-operator"
TLS_MOUNT = Path(
    TLS_DIR
)  # where the server's my.cnf (and the operator's CHANGE MASTER) expect the certificate
RUN_AS = "mysql"  # the host's account for the servers (a Pod runs them as non-root too)


def pod_status(ip: str, ready: bool, started: str, restarts: int = 0) -> dict[str, Any]:
    """What a kubelet reports of a Pod whose server runs (ready: it answers)."""
    flag = "True" if ready else "False"
    state = {"running": {"startedAt": started}} if ready else {"waiting": {"reason": "ContainerCreating"}}
    return {
        "phase": "Running",
        "hostIP": "127.0.0.1",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": started,
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": flag},
            {"type": "Ready", "status": flag},
        ],
        "containerStatuses": [
            {
                "name": "mysqld",
                "ready": ready,
                "started": ready,
                "restartCount": restarts,
                "image": "host",
                "imageID": "",
                "state": state,
            }
        ],
    }


@dataclass
class Served:
    addresses: list[str]
    ready: Callable[[int], bool]
    on_pod: Callable[[int, dict], None] | None = None  # a new Pod (uid) of that ordinal
    uids: dict[int, str] = field(default_factory=dict)
    written: dict[str, dict] = field(default_factory=dict)


class StandInKubelet:
    def __init__(self, api: client.ApiClient, namespace: str, interval: float = 0.3):
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.interval = interval
        self.clusters: dict[str, Served] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="standin-kubelet", daemon=True)
        self._started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def serve(
        self,
        cluster: str,
        addresses: list[str],
        ready: Callable[[int], bool],
        on_pod: Callable[[int, dict], None] | None = None,
    ) -> None:
        with self._lock:
            self.clusters[cluster] = Served(addresses, ready, on_pod)

    def forget(self, cluster: str) -> None:
        with self._lock:
            self.clusters.pop(cluster, None)

    def start(self) -> "StandInKubelet":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sync()
            except Exception as e:  # noqa: BLE001 - a kubelet keeps going; the error is kept
                self.errors.append(f"{type(e).__name__}: {e}"[:500])

    def sync(self) -> None:
        with self._lock:
            clusters = dict(self.clusters)
        if not clusters:
            return
        selector = f"{OWNED},app.kubernetes.io/instance in ({','.join(sorted(clusters))})"
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=selector).to_dict()["items"]
        for pod in pods:
            meta = pod["metadata"]
            cluster = (meta.get("labels") or {}).get("app.kubernetes.io/instance", "")
            served = clusters.get(cluster)
            ordinal = pod_ordinal(meta["name"], cluster)
            if (
                served is None
                or ordinal is None
                or ordinal >= len(served.addresses)
                or meta.get("deletion_timestamp")
            ):
                continue
            if served.uids.get(ordinal) != meta["uid"]:
                served.uids[ordinal] = meta["uid"]
                if served.on_pod is not None:
                    served.on_pod(ordinal, pod)
            want = pod_status(served.addresses[ordinal], served.ready(ordinal), self._started)
            now = pod.get("status") or {}
            current = (now.get("phase"), now.get("pod_ip"))
            if served.written.get(meta["uid"]) != want or current != ("Running", want["podIP"]):
                self.core.patch_namespaced_pod_status(meta["name"], self.namespace, {"status": want})
                served.written[meta["uid"]] = want


def _env(core: client.CoreV1Api, ns: str, pod: dict, container: dict) -> dict[str, str]:
    """A container's environment as the kubelet resolves it (value, Secret and field refs)."""
    out: dict[str, str] = {}
    for e in container.get("env") or []:
        if e.get("value") is not None:
            out[e["name"]] = e["value"]
            continue
        ref = e.get("value_from") or {}
        if ref.get("secret_key_ref"):
            r = ref["secret_key_ref"]
            data = core.read_namespaced_secret(r["name"], ns).data or {}
            if r["key"] in data:
                out[e["name"]] = base64.b64decode(data[r["key"]]).decode()
        elif ref.get("field_ref"):
            path = ref["field_ref"]["field_path"]
            out[e["name"]] = {"metadata.name": pod["metadata"]["name"], "metadata.namespace": ns}[path]
    return out


class HostServer:
    """One Pod's server on this host, started as its containers would be (see the module)."""

    def __init__(self, core: client.CoreV1Api, ns: str, root: Path, ip: str, hosts: str, extra: list[str]):
        self.core, self.ns, self.root, self.ip, self.hosts, self.extra = core, ns, root, ip, hosts, extra
        self.proc: subprocess.Popen | None = None
        self.pod: dict | None = None
        self.held = False  # kept down (a crash the benchmark made) until start() is called again

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    @property
    def socket(self) -> Path:
        return self.run_dir / "mysqld.sock"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ready(self) -> bool:
        """Alive and answering on its socket (not TCP: a server counts TCP connections that never
        log in against the client's host)."""
        if not self.alive():
            return False
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(0.5)
                s.connect(str(self.socket))
                return bool(s.recv(1))
        except OSError:
            return False

    def _files(self, pod: dict) -> tuple[dict[str, str], dict[str, str]]:
        """Writes the ConfigMap and TLS Secret where the container mounts would be; (init env,
        server env)."""
        spec = pod["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        config = self.core.read_namespaced_config_map(volumes["config"]["config_map"]["name"], self.ns)
        tls = self.core.read_namespaced_secret(volumes["tls"]["secret"]["secret_name"], self.ns)
        for d in ("config", "tls", "data", "run", "tmp"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        for name, text in (config.data or {}).items():
            (self.root / "config" / name).write_text(text)
        for name, b64 in (tls.data or {}).items():
            (self.root / "tls" / name).write_bytes(base64.b64decode(b64))
        (self.root / "hosts").write_text(self.hosts)
        shutil.chown(self.root, RUN_AS, RUN_AS)
        for p in self.root.rglob("*"):
            shutil.chown(p, RUN_AS, RUN_AS)
        init = next(c for c in spec["init_containers"] if c["name"] == "init-datadir")
        server = next(c for c in spec["containers"] if c["name"] == "mysqld")
        return _env(self.core, self.ns, pod, init), _env(self.core, self.ns, pod, server)

    def _environment(self, env: dict[str, str]) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            "HOME": str(self.root),
            "MYSQL_OPERATOR_DATA_ROOT": str(self.root / "data"),
            "MYSQL_OPERATOR_RUN_DIR": str(self.run_dir),
            "MYSQL_OPERATOR_CONFIG_DIR": str(self.root / "config"),
            "TMPDIR": str(self.root / "tmp"),  # the Pod's own /tmp (an emptyDir): servers share none
            **env,
        }

    def start(self, pod: dict | None = None) -> None:
        """Init (once: the data directory is kept, as a volume is) and start the server."""
        self.held = False
        self.pod = pod or self.pod
        assert self.pod is not None
        init_env, server_env = self._files(self.pod)
        log = open(self.root / "server.log", "ab")
        user = ["setpriv", f"--reuid={RUN_AS}", f"--regid={RUN_AS}", "--clear-groups"]
        subprocess.run(
            [*user, "/bin/bash", str(self.root / "config" / "init.sh")],
            env=self._environment(init_env),
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
            timeout=300,
        )
        TLS_MOUNT.mkdir(parents=True, exist_ok=True)  # an empty mount point on the host
        mounts = f'mount --bind "{self.root / "hosts"}" /etc/hosts && mount --bind "{self.root / "tls"}" {TLS_MOUNT}'
        argv = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            f'{mounts} && exec "$@"',
            "sh",
            *user,
            "/bin/bash",
            str(self.root / "config" / "start.sh"),
            f"--bind-address={self.ip}",
            *self.extra,
        ]
        self.proc = subprocess.Popen(
            argv,
            env=self._environment(server_env),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()

    def kill9(self) -> None:
        """A crash: SIGKILL to the server and its start.sh; kept down until start()."""
        self.held = True
        if self.alive():
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
