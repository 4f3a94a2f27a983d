"""TLS files for test servers, as the `<name>-tls` Secret is mounted in a Pod: ca.crt, tls.crt,
tls.key (0600) in one folder."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from mysql_operator import tls


def write_pki(folder: Path, ca: tls.KeyPair, cert: tls.KeyPair) -> Path:
    """ca.crt, tls.crt, tls.key in `folder` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ca.crt").write_text(ca.cert_pem)
    (folder / "tls.crt").write_text(cert.cert_pem)
    (folder / "tls.key").write_text(cert.key_pem)
    (folder / "tls.key").chmod(0o600)
    return folder


def new_pki(folder: Path, names: list[str], ca_name: str) -> Path:
    """A new CA named `ca_name` and a server certificate for `names` it signed, in `folder`."""
    now = dt.datetime.now(dt.timezone.utc)
    ca = tls.new_ca(ca_name, now)
    return write_pki(folder, ca, tls.server_certificate(ca, names, now))
