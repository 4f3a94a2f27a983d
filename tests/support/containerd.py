"""A containerd 1.6 owned by one test or cluster session, configured by the project.

Everything it keeps lives under one work dir: its root, its state, its gRPC socket, the CNI
conf dir and the runc state of CRI containers, so it never collides with a system containerd or
another session. `stop()` ends exactly what `start()` started: its tasks, their shims (found by
the `-address <our socket>` on their command line) and the containerd process.

    cd = Containerd(workdir)
    cd.start()                       # waits until the gRPC API answers
    cd.import_images(build_images()) # the archives of hack/build-images.sh, pinned
    cd.socket                        # for a kubelet: --container-runtime-endpoint unix://<socket>
    cd.stop()

    python -m tests.support.containerd   # start one, import all images, run until Ctrl-C
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.wait import wait_for

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "k8s.io"  # the CRI plugin's namespace: images imported here are visible to a kubelet
PAUSE_IMAGE = "localhost/pause:catatonit"  # must equal what hack/build-images.sh names it
PINNED_LABEL = "io.cri-containerd.pinned=pinned"
CNI_BIN_DIR = "/usr/lib/cni"  # Debian's containernetworking-plugins
MAX_UNIX_SOCKET_PATH = 107
# Open-file limit for containerd and so its shims and containers, like containerd.service's
# LimitNOFILE (a database server needs more than the usual 1024).
NOFILE_LIMIT = 1048576


class ContainerdError(RuntimeError):
    pass


@dataclass(frozen=True)
class Image:
    """One line of `hack/build-images.sh` output."""

    name: str  # base, pause, busybox, mariadb, operator
    ref: str  # localhost/NAME:TAG
    archive: Path  # OCI archive in the per-user cache


def parse_build_output(text: str) -> dict[str, Image]:
    """`NAME REF ARCHIVE` lines → {name: Image}; anything else is an error naming the line."""
    images = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 3:
            raise ValueError(f"unexpected line from hack/build-images.sh: {line!r} (want NAME REF ARCHIVE)")
        images[parts[0]] = Image(parts[0], parts[1], Path(parts[2]))
    return images


def build_images(*names: str, timeout: float = 1800) -> dict[str, Image]:
    """Run hack/build-images.sh (quick when the cache is warm) and return its images by name."""
    cmd = [str(REPO / "hack" / "build-images.sh"), *(names or ("all",))]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise ContainerdError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    sys.stderr.write(proc.stderr)
    return parse_build_output(proc.stdout)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def to_toml(data: dict, _prefix: tuple[str, ...] = ()) -> str:
    """A nested dict as TOML: scalars first, then one [table] per nested dict (dotted, quoted keys)."""

    def key(k: str) -> str:
        return k if k.replace("_", "").replace("-", "").isalnum() else _toml_value(k)

    lines = [f"{key(k)} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    out = []
    if _prefix and lines:
        out.append("[" + ".".join(key(k) for k in _prefix) + "]")
    out.extend(lines)
    for k, v in data.items():
        if isinstance(v, dict):
            sub = to_toml(v, (*_prefix, k))
            if sub:
                out.append(sub)
    return "\n".join(out)


def containerd_config(workdir: Path, pause_image: str = PAUSE_IMAGE) -> dict:
    """The project's containerd configuration (version 2) for a work dir, as a dict."""
    cri = "io.containerd.grpc.v1.cri"
    return {
        "version": 2,
        "root": str(workdir / "root"),
        "state": str(workdir / "state"),
        "grpc": {"address": str(workdir / "containerd.sock")},
        "ttrpc": {"address": str(workdir / "containerd.sock.ttrpc")},
        "debug": {"address": "", "level": "info"},
        "metrics": {"address": ""},
        "plugins": {
            cri: {
                "sandbox_image": pause_image,  # imported, never pulled
                # The exec/attach/port-forward server on loopback, a free port each time.
                "stream_server_address": "127.0.0.1",
                "stream_server_port": "0",
                "enable_selinux": False,
                # This VM's bounding set lacks CAP_SYS_RESOURCE: no process may lower its
                # oom_score_adj, so the pause container's -998 must be clamped (kind does this
                # for nested nodes too).
                "restrict_oom_score_adj": True,
                "containerd": {
                    "snapshotter": "overlayfs",
                    "default_runtime_name": "runc",
                    "runtimes": {
                        "runc": {
                            "runtime_type": "io.containerd.runc.v2",
                            # cgroupfs (no systemd here); runc state under the work dir.
                            "options": {"SystemdCgroup": False, "Root": str(workdir / "runc")},
                        }
                    },
                },
                "cni": {"bin_dir": CNI_BIN_DIR, "conf_dir": str(workdir / "cni" / "net.d")},
                # per registry: certs.d/<HOST:PORT>/hosts.toml (the test registry's, with its CA)
                "registry": {"config_path": str(workdir / "certs.d")},
            },
            "io.containerd.internal.v1.opt": {"path": str(workdir / "opt")},
        },
    }


def missing_tools() -> list[str]:
    return [t for t in ("containerd", "ctr", "runc", "containerd-shim-runc-v2") if not shutil.which(t)]


def cannot_run_reason() -> str | None:
    """Why containerd cannot run containers here, or None."""
    missing = missing_tools()
    if missing:
        return f"missing {', '.join(missing)}: run `hack/install-deps.sh images` as root"
    if os.geteuid() != 0:
        return "containerd and runc need root here"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlay filesystem (the overlayfs snapshotter needs it)"
    return None


class Containerd:
    def __init__(self, workdir: Path | str | None = None, pause_image: str = PAUSE_IMAGE):
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="mysqlop-ctd-"))
        self.pause_image = pause_image
        self.socket = self.workdir / "containerd.sock"
        self.config_path = self.workdir / "config.toml"
        self.log_path = self.workdir / "containerd.log"
        self.cni_conf_dir = self.workdir / "cni" / "net.d"
        self.proc: subprocess.Popen | None = None
        self.timings: dict[str, float] = {}
        if len(str(self.socket)) > MAX_UNIX_SOCKET_PATH:
            raise ContainerdError(
                f"socket path {self.socket} is longer than {MAX_UNIX_SOCKET_PATH} bytes: use a shorter workdir"
            )

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout: float = 30) -> None:
        reason = cannot_run_reason()
        if reason:
            raise ContainerdError(reason)
        started = time.monotonic()
        self.cni_conf_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(to_toml(containerd_config(self.workdir, self.pause_image)) + "\n")
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            ["containerd", "--config", str(self.config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_raise_nofile_limit,
        )
        log.close()
        try:
            self.wait_ready(timeout)
        except Exception:
            self.stop(remove=False)
            raise
        self.timings["ready"] = time.monotonic() - started

    def wait_ready(self, timeout: float = 30) -> None:
        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise ContainerdError(f"containerd exited ({self.proc.returncode}):\n{self.log_tail()}")
            return self.ctr("version", check=False, timeout=5).returncode == 0

        try:
            wait_for(ready, timeout, f"containerd to answer on {self.socket}")
        except ContainerdError:
            raise
        except AssertionError as e:
            raise ContainerdError(f"{e}\n{self.log_tail()}") from None

    def stop(self, remove: bool | None = None, timeout: float = 20) -> None:
        """Kill our tasks, stop containerd, kill any shim left with our socket, unmount, clean up."""
        if self.proc is not None and self.proc.poll() is None:
            for ns in self._namespaces():
                for task in self._tasks(ns):
                    self.ctr("-n", ns, "tasks", "kill", "-s", "SIGKILL", task, check=False, timeout=10)
                    self.ctr("-n", ns, "tasks", "delete", "-f", task, check=False, timeout=10)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        for pid in self.shim_pids():
            _kill_tree(pid)
        self._unmount_under_workdir()
        if remove if remove is not None else self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # --- helpers -----------------------------------------------------------------------------
    def ctr(self, *args: str, check: bool = True, timeout: float = 120, input: str | None = None):
        cmd = ["ctr", "--address", str(self.socket), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)
        if check and proc.returncode != 0:
            raise ContainerdError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def import_images(self, images: dict[str, Image] | list[Image], namespace: str = NAMESPACE) -> None:
        """Load OCI archives under their localhost/NAME:TAG refs, labelled pinned (kubelet GC skips them)."""
        for image in images.values() if isinstance(images, dict) else images:
            started = time.monotonic()
            repo = image.ref.rsplit(":", 1)[0]
            # An OCI archive names its image by tag only: --base-name restores the repository.
            self.ctr(
                "-n", namespace, "images", "import", "--base-name", repo, str(image.archive), timeout=600
            )
            if image.ref not in self.image_refs(namespace):
                raise ContainerdError(f"importing {image.archive} did not create {image.ref}")
            self.ctr("-n", namespace, "images", "label", image.ref, PINNED_LABEL)
            self.timings[f"import {image.name}"] = time.monotonic() - started

    def image_refs(self, namespace: str = NAMESPACE) -> list[str]:
        out = self.ctr("-n", namespace, "images", "list", "--quiet").stdout
        return [line.strip() for line in out.splitlines() if line.strip()]

    def shim_pids(self) -> list[int]:
        """containerd-shim processes serving this containerd (and no other)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if not argv or not os.path.basename(argv[0]).startswith(b"containerd-shim"):
                continue
            if b"-address" in argv:
                i = argv.index(b"-address")
                if i + 1 < len(argv) and argv[i + 1].decode(errors="replace") == str(self.socket):
                    pids.append(int(entry.name))
        return pids

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no containerd log)"

    def _namespaces(self) -> list[str]:
        proc = self.ctr("namespaces", "list", "--quiet", check=False, timeout=10)
        return proc.stdout.split() if proc.returncode == 0 else []

    def _tasks(self, ns: str) -> list[str]:
        proc = self.ctr("-n", ns, "tasks", "list", "--quiet", check=False, timeout=10)
        return proc.stdout.split() if proc.returncode == 0 else []

    def _unmount_under_workdir(self) -> None:
        prefix = str(self.workdir.resolve()) + "/"
        mounts = []
        for line in Path("/proc/self/mounts").read_text().splitlines():
            target = line.split()[1].replace("\\040", " ")
            if target.startswith(prefix):
                mounts.append(target)
        for target in sorted(mounts, key=len, reverse=True):  # deepest first
            subprocess.run(["umount", "-l", target], capture_output=True)


def _raise_nofile_limit() -> None:
    """Soft open-file limit up to NOFILE_LIMIT, within the hard limit (raising that needs
    CAP_SYS_RESOURCE, which a sandboxed root may lack)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = NOFILE_LIMIT if hard == resource.RLIM_INFINITY else min(NOFILE_LIMIT, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _kill_tree(pid: int) -> None:
    """SIGKILL a process and all its descendants (a shim and the containers it still serves)."""
    pending, seen = [pid], []
    while pending:
        p = pending.pop()
        seen.append(p)
        pending.extend(_children(p))
    for p in reversed(seen):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main() -> int:
    images = build_images()
    cd = Containerd()
    cd.start()
    try:
        cd.import_images(images)
        print(f"containerd ready: unix://{cd.socket}  (ctr --address {cd.socket} -n {NAMESPACE} ...)")
        print("images:", ", ".join(cd.image_refs()))
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        cd.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
