"""A real OCI registry for the tests: CNCF distribution built from its Go module
(`hack/build-binaries.sh registry`, test-only), with TLS (its own CA, a certificate for the address
it listens on) and basic auth (htpasswd, one user with a random password).

    reg = Registry(root, host="10.244.0.1", port=5000).start()
    ref = reg.push(image)                     # an OCI archive of hack/build-images.sh -> its ref
    reg.hosts_toml()                          # containerd's certs.d entry for it (trusts its CA)
    reg.docker_config()                       # the .dockerconfigjson of a pull Secret

Pushing speaks the registry's HTTP API directly (blobs, then the manifest under its tag); a blob
the registry has already is not sent again, so pushing an unchanged image again costs a few
requests. Its storage directory may outlive the process (the local cluster keeps it in the cache).

    python -m tests.support.registry ROOT      # start one on 127.0.0.1, print it, run until Ctrl-C
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import os
import secrets
import ssl
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from tests.support.controlplane import bin_dir, stop_group, versions
from tests.support.ports import free_port
from tests.support.wait import wait_for

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    # a multi-architecture image (hack/release.sh pushes one per image)
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)


def registry_binary() -> Path:
    return bin_dir() / f"registry-{versions()['REGISTRY_VERSION']}" / "registry"


def missing() -> str | None:
    """Why no registry can start here, or None."""
    if not registry_binary().exists():
        return f"the registry is not built ({registry_binary()}): run `hack/build-binaries.sh registry`"
    return None


class RegistryError(RuntimeError):
    pass


def _certificates(host: str) -> tuple[str, str, str]:
    """(CA certificate, server certificate, server key) PEMs; the server's for `host` (an IP)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    from mysql_operator import tls

    now = dt.datetime.now(dt.timezone.utc)
    ca = tls.new_ca("test registry", now)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    key = tls.new_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.IPAddress(ipaddress.ip_address(host)),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return ca.cert_pem, cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem


@dataclass
class Registry:
    root: Path  # its certificates, htpasswd and configuration; storage under root/data
    host: str = "127.0.0.1"  # the local cluster's node address when containerd pulls from it
    port: int = field(default_factory=free_port)
    username: str = "pusher"
    password: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)
    # no authentication at all (as a public registry's pulls): anyone may pull, and push
    public: bool = False
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        """What image references start with: HOST:PORT."""
        return f"{self.host}:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.root / "ca.crt"

    def start(self, timeout: float = 30) -> "Registry":
        import bcrypt

        self.root.mkdir(parents=True, exist_ok=True)
        ca, cert, key = _certificates(self.host)
        self.ca_file.write_text(ca)
        (self.root / "tls.crt").write_text(cert)
        (self.root / "tls.key").write_text(key)
        (self.root / "tls.key").chmod(0o600)
        hashed = bcrypt.hashpw(self.password.encode(), bcrypt.gensalt(rounds=10)).decode()
        (self.root / "htpasswd").write_text(f"{self.username}:{hashed}\n")
        config = {
            "version": 0.1,
            "log": {"level": "info", "formatter": "text", "accesslog": {"disabled": True}},
            "storage": {
                "filesystem": {"rootdirectory": str(self.root / "data")},
                "delete": {"enabled": True},
            },
            "http": {
                "addr": self.address,
                "tls": {"certificate": str(self.root / "tls.crt"), "key": str(self.root / "tls.key")},
            },
        }
        if not self.public:
            config["auth"] = {
                "htpasswd": {"realm": "mysql-operator tests", "path": str(self.root / "htpasswd")}
            }
        (self.root / "config.yml").write_text(yaml.safe_dump(config))
        log = open(self.root / "registry.log", "ab")  # noqa: SIM115 - the process keeps it
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.root)}
        self.proc = subprocess.Popen(
            [str(registry_binary()), "serve", str(self.root / "config.yml")],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        wait_for(self._ready, timeout, f"the registry to answer on {self.address}")
        return self

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RegistryError(f"the registry exited: {self.log_tail()}")
        try:
            return self._request("GET", "/v2/")[0] == 200
        except (urllib.error.URLError, OSError):
            return False

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Registry":
        """The running registry a cluster's state.json describes (its "registry" entry)."""
        return cls(**{**state, "root": Path(state["root"])})

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc)
        self.proc = None

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join((self.root / "registry.log").read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return "(no log)"

    # ------------------------------------------------------------------------------ the HTTP API
    def _request(
        self,
        method: str,
        path: str,
        body: bytes | BinaryIO | None = None,
        headers: dict[str, str] | None = None,
        auth: bool = True,
    ) -> tuple[int, dict[str, str], bytes]:
        url = path if path.startswith("https://") else f"https://{self.address}{path}"
        req = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
        if auth:
            token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            req.add_header("Authorization", f"Basic {token}")
        context = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(req, context=context, timeout=120) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def _expect(self, status: int, want: int, what: str, body: bytes) -> None:
        if status != want:
            raise RegistryError(f"{what}: HTTP {status}: {body[:300]!r}")

    def manifest_digest(self, repo: str, tag: str, auth: bool = True) -> str | None:
        """The digest of repo:tag, or None when the registry has no such tag; RegistryError on
        anything else (e.g. 401 without credentials)."""
        status, headers, body = self._request(
            "HEAD", f"/v2/{repo}/manifests/{tag}", headers={"Accept": ", ".join(MANIFEST_TYPES)}, auth=auth
        )
        if status == 404:
            return None
        self._expect(status, 200, f"HEAD {repo}:{tag}", body)
        return headers.get("Docker-Content-Digest")

    def manifest(self, repo: str, reference: str) -> dict[str, Any]:
        """The manifest (or index) of repo:reference (a tag or a digest), as JSON."""
        status, _, body = self._request(
            "GET", f"/v2/{repo}/manifests/{reference}", headers={"Accept": ", ".join(MANIFEST_TYPES)}
        )
        self._expect(status, 200, f"GET {repo}:{reference}", body)
        return json.loads(body)

    def push(self, archive: Path, repo: str, tag: str) -> str:
        """Push the single image of an OCI archive as repo:tag; returns HOST:PORT/repo:tag."""
        with tarfile.open(archive) as tar:

            def blob(digest: str):
                member = tar.getmember(f"blobs/{digest.replace(':', '/')}")
                return member.size, tar.extractfile(member)

            index = json.load(tar.extractfile("index.json"))
            (entry,) = index["manifests"]
            if entry["mediaType"] not in MANIFEST_TYPES:
                raise RegistryError(f"{archive}: not one image manifest ({entry['mediaType']})")
            _, f = blob(entry["digest"])
            manifest_bytes = f.read()
            manifest = json.loads(manifest_bytes)
            for desc in [manifest["config"], *manifest["layers"]]:
                self._push_blob(repo, desc["digest"], *blob(desc["digest"]))
            status, _, body = self._request(
                "PUT",
                f"/v2/{repo}/manifests/{tag}",
                manifest_bytes,
                {"Content-Type": entry["mediaType"]},
            )
            self._expect(status, 201, f"PUT manifest {repo}:{tag}", body)
        return f"{self.address}/{repo}:{tag}"

    def _push_blob(self, repo: str, digest: str, size: int, data: BinaryIO) -> None:
        status, _, _ = self._request("HEAD", f"/v2/{repo}/blobs/{digest}")
        if status == 200:
            return
        status, headers, body = self._request("POST", f"/v2/{repo}/blobs/uploads/")
        self._expect(status, 202, f"start upload of {digest}", body)
        location = headers["Location"]
        if not location.startswith("https://"):
            location = f"https://{self.address}{location}"
        sep = "&" if "?" in location else "?"
        status, _, body = self._request(
            "PUT",
            f"{location}{sep}digest={digest}",
            data,
            {"Content-Type": "application/octet-stream", "Content-Length": str(size)},
        )
        self._expect(status, 201, f"upload of {digest}", body)

    # -------------------------------------------------------------------------- what clients need
    def hosts_toml(self) -> str:
        """containerd's certs.d/<HOST:PORT>/hosts.toml: pull and resolve over TLS, its CA trusted
        (credentials come from the Pod's pull Secret, through the kubelet)."""
        return (
            f'server = "https://{self.address}"\n\n'
            f'[host."https://{self.address}"]\n'
            f'  capabilities = ["pull", "resolve"]\n'
            f'  ca = "{self.ca_file}"\n'
        )

    def pull_secret(self, name: str) -> dict[str, Any]:
        """A kubernetes.io/dockerconfigjson Secret `name` with this registry's credentials."""
        config = json.dumps(self.docker_config()).encode()
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(config).decode()},
        }

    def docker_config(self, username: str | None = None, password: str | None = None) -> dict[str, Any]:
        """A kubernetes.io/dockerconfigjson Secret's .dockerconfigjson for this registry."""
        user, pw = username or self.username, password or self.password
        auth = base64.b64encode(f"{user}:{pw}".encode()).decode()
        return {"auths": {self.address: {"auth": auth}}}


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path("/tmp/mysqlop-registry")
    reg = Registry(root).start()
    print(f"registry on https://{reg.address} (CA {reg.ca_file}), user {reg.username}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        reg.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
