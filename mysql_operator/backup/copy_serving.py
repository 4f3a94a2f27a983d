"""The restore Job's server of a MariaDB physical copy (backup/restore_mariadb_physical.py step 2):
TLS with the Job's certificate, and the copy only to a requester whose certificate chains to the
new cluster's CA AND names one of its instances (peer_named), AND whose first line is the new
cluster's operator password (Peers.token); anyone else gets "ERR refused" and not a byte. Each
accepted connection gets "OK <bytes> <position>", the backup's xbstream (`pieces()`: downloaded,
decrypted and decompressed again for each), its chunks checked as they pass, and - only once the
whole object matched its manifest - one more file, the new cluster's accounts as SQL
(RESTORE_SQL)."""

from __future__ import annotations

import contextlib
import hmac
import socket
import ssl
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator

from mysql_operator.backup import xbstream
from mysql_operator.backup.restore_types import Donor, RestoreError

RESTORE_SQL = "mysql-operator-restore.sql"  # what sh/seed.sh receive looks for (RESTORE_SQL)


@dataclass(frozen=True)
class Peers:
    """Who may have the copy: a requester whose first line is `token` and whose certificate names
    one of `hosts` (the new cluster's instances)."""

    token: str = field(repr=False)
    hosts: frozenset[str]


def _dns_names(cert: dict) -> list[str]:
    """Pure: the DNS names of a certificate as ssl's getpeercert() gives it (its SANs; its
    common name only when it has none, as TLS clients do)."""
    sans = [v for kind, v in cert.get("subjectAltName", ()) if kind == "DNS"]
    if sans:
        return sans
    return [v for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"]


def _matches(name: str, host: str) -> bool:
    """Pure: whether certificate name `name` covers `host` (a wildcard covers one label, the first)."""
    name, host = name.lower().rstrip("."), host.lower().rstrip(".")
    if name.startswith("*."):
        first, dot, rest = host.partition(".")
        return bool(first) and bool(dot) and rest == name[2:]
    return name == host


def peer_named(cert: dict | None, hosts: frozenset[str]) -> bool:
    """Pure: whether the peer's certificate (getpeercert()) names one of `hosts`."""
    return cert is not None and any(_matches(n, h) for n in _dns_names(cert) for h in hosts)


class CopyServer:
    """Serves the copy to the new cluster's instances (sh/seed.sh receive), each connection in a
    thread, until closed: a certificate of the cluster's CA naming one of `peers.hosts` and the
    first line `peers.token`, or "ERR refused" and nothing."""

    def __init__(
        self,
        donor: Donor,
        peers: Peers,
        pieces: Callable[[], Iterator[bytes]],
        answer: str,
        init_sql: bytes,
    ):
        self.pieces, self.answer, self.init_sql = pieces, answer.encode(), init_sql
        self.peers = peers
        self.refused = 0  # requesters turned away (no byte of the copy reached them)
        d = donor.tls_dir
        self.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=f"{d}/ca.crt")
        self.tls.load_cert_chain(f"{d}/tls.crt", f"{d}/tls.key")
        self.tls.verify_mode = ssl.CERT_REQUIRED
        self.listener = socket.create_server(("", donor.port), family=socket.AF_INET, reuse_port=False)
        self.served = 0
        self.last_error = ""
        self.fatal = ""  # the backup itself is bad: no instance can ever be served
        self._closed = threading.Event()

    def __enter__(self) -> "CopyServer":
        threading.Thread(target=self._accept, daemon=True, name="copy-server").start()
        return self

    def __exit__(self, *exc) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self.listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name="copy").start()

    def _serve(self, raw: socket.socket) -> None:
        """One copy. A connection that is no TLS client of the cluster (the kubelet's readiness
        check, anyone else) ends at the handshake."""
        try:
            raw.settimeout(30)
            with self.tls.wrap_socket(raw, server_side=True) as conn:
                conn.settimeout(600)
                why = self._refusal(conn.getpeercert(), _read_line(conn))
                if why:
                    self.refused += 1
                    self.last_error = why
                    conn.sendall(b"ERR refused\n")
                    return
                conn.sendall(self.answer)
                reader = xbstream.Reader()
                for piece in self.pieces():
                    reader.feed(piece)
                    conn.sendall(piece)
                reader.finish()  # (and the object matched its manifest: pieces raised otherwise)
                conn.sendall(xbstream.file_chunks(RESTORE_SQL, self.init_sql))
                self.served += 1
        except (ssl.SSLError, ConnectionError, socket.timeout):
            pass  # not a client of the cluster, or it went away: it asks again
        except (RestoreError, xbstream.StreamError) as e:
            self.fatal = self.last_error = str(e)
        except OSError as e:
            self.last_error = str(e)
        finally:
            with contextlib.suppress(OSError):
                raw.close()

    def _refusal(self, cert: dict | None, line: bytes) -> str:
        """Why this requester gets nothing ("" when it is one of the new cluster's instances);
        never the line it sent."""
        if not peer_named(cert, self.peers.hosts):
            names = ", ".join(_dns_names(cert or {})[:4]) or "no name"
            return f"refused a copy to a certificate for {names[:300]}: not an instance of this cluster"
        if not hmac.compare_digest(line.rstrip(b"\r\n"), self.peers.token.encode()):
            return "refused a copy to a requester without the new cluster's operator password"
        return ""


def _read_line(conn, limit: int = 4096) -> bytes:
    got = b""
    while not got.endswith(b"\n") and len(got) < limit:
        piece = conn.recv(1)
        if not piece:
            break
        got += piece
    return got
