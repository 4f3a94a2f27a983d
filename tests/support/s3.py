"""A real S3 server on 127.0.0.1 for the backup tests: MinIO built from its Go module
(`hack/build-binaries.sh s3`, test-only, AGPL: never shipped).

Each server gets a free port, its own temporary data directory and random root credentials, runs in
its own process group, and `stop()` kills exactly that process group.

    python -m tests.support.s3      # start one, print endpoint and keys, run until Ctrl-C
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from botocore.config import Config

from mysql_operator.backup.storage import new_session

from tests.support.controlplane import bin_dir, versions
from tests.support.ports import free_port
from tests.support.wait import wait_for


def minio_binary() -> Path:
    return bin_dir() / f"minio-{versions()['MINIO_VERSION']}" / "minio"


def missing() -> str | None:
    """Why no S3 server can start here, or None."""
    if not minio_binary().exists():
        return f"MinIO is not built ({minio_binary()}): run `hack/build-binaries.sh s3`"
    return None


@dataclass
class S3Server:
    root: Path
    port: int = field(default_factory=free_port)
    console_port: int = field(default_factory=free_port)
    access_key: str = field(default_factory=lambda: "test" + secrets.token_hex(6))
    secret_key: str = field(default_factory=lambda: secrets.token_hex(20), repr=False)
    proc: subprocess.Popen | None = field(default=None, repr=False)
    # 127.0.0.1 for host-side tests; the local cluster's node address when Pods must reach it
    host: str = "127.0.0.1"
    # server-side encryption: a static KMS key of this name (SSE-S3 and SSE-KMS with it)
    kms_key: str | None = None
    # https with this folder's public.crt/private.key (SSE-C needs it), for `tls_name`, which
    # resolves to `host`; clients verify it with `ca_file`
    certs_dir: Path | None = None
    tls_name: str = "localhost"

    @property
    def endpoint(self) -> str:
        if self.certs_dir is not None:
            return f"https://{self.tls_name}:{self.port}"
        return f"http://{self.host}:{self.port}"

    @property
    def ca_file(self) -> str | None:
        return str(self.certs_dir / "CAs" / "ca.crt") if self.certs_dir is not None else None

    def start(self, timeout: float = 60) -> "S3Server":
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root),
            "MINIO_ROOT_USER": self.access_key,
            "MINIO_ROOT_PASSWORD": self.secret_key,
            "MINIO_BROWSER": "off",
            "MINIO_UPDATE": "off",
            "MINIO_CI_CD": "1",
        }
        if self.kms_key:
            env["MINIO_KMS_SECRET_KEY"] = f"{self.kms_key}:{base64.b64encode(os.urandom(32)).decode()}"
        tls = ["--certs-dir", str(self.certs_dir)] if self.certs_dir is not None else []
        log = open(self.root / "minio.log", "ab")
        self.proc = subprocess.Popen(
            [
                str(minio_binary()),
                "server",
                "--quiet",
                "--address",
                f"{self.host}:{self.port}",
                "--console-address",
                f"127.0.0.1:{self.console_port}",
                *tls,
                str(self.root / "data"),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        wait_for(self._ready, timeout, f"MinIO to answer on {self.endpoint}")
        return self

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"MinIO exited: {self.log_tail()}")
        try:
            context = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else None
            with urllib.request.urlopen(
                f"{self.endpoint}/minio/health/ready", timeout=2, context=context
            ) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def client(self, access_key: str | None = None, secret_key: str | None = None):
        return new_session().client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=access_key or self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
            verify=self.ca_file,
            config=Config(
                region_name="us-east-1", s3={"addressing_style": "path"}, retries={"max_attempts": 1}
            ),
        )

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join((self.root / "minio.log").read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def start(root: Path | None = None, host: str = "127.0.0.1") -> S3Server:
    reason = missing()
    if reason:
        raise RuntimeError(reason)
    return S3Server(root=Path(root or tempfile.mkdtemp(prefix="s3-test-")), host=host).start()


def main() -> int:
    server = start()
    print(f"endpoint {server.endpoint} access key {server.access_key} secret key {server.secret_key}")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
