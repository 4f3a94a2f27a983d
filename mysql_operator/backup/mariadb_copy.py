"""A physical copy of a running MariaDB server, for a backup: asked of the `seed-donor` sidecar of
the instance's Pod (manifests/sh/seed.sh donate), which streams `mariadb-backup --backup
--stream=xbstream` of its server. The copy is not prepared here: a restore prepares it.

    with requested(host, SEED_PORT, backup_password, tls) as offer:
        for piece in offer.pieces(): ...        # the xbstream (backup/xbstream.py reads it)

mariadb-backup reads the server's files, so it runs beside the server, never in the Job; the Job
connects to the sidecar over TLS, verifying its certificate (the server's, the cluster CA's)
and its name, and proves it may have a copy with the backup account's password (the sidecar
mounts it from the credentials Secret). The sidecar answers "OK <bytes> <gtid_binlog_state>"
then streams.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from dataclasses import dataclass
from typing import Iterator

from mysql_operator.backup.pipeline import CHUNK

ANSWER_LIMIT = 64 * 1024  # an answer line longer than this is no answer


class CopyError(Exception):
    pass


@dataclass
class Offer:
    size: int  # about what the copy holds (the donor's data files), 0 if it did not say
    state: str  # the donor's gtid_binlog_state when it accepted
    conn: ssl.SSLSocket
    first: bytes  # stream bytes that came with the answer

    def pieces(self) -> Iterator[bytes]:
        """The stream, until the donor ends it."""
        if self.first:
            yield self.first
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while True:
            try:
                n = self.conn.recv_into(view)
            except ssl.SSLEOFError:  # closed without TLS's goodbye: the xbstream tells if it is whole
                return
            if not n:
                return
            yield bytes(view[:n])


def parse_answer(line: str) -> tuple[int, str]:
    """Pure: the donor's answer "OK <bytes> <state>" as (bytes, state); CopyError for a refusal."""
    if not line.startswith("OK"):
        raise CopyError(f"the donor refused the copy: {line.strip()[:200] or 'no answer'}")
    rest = line[2:].strip()
    first, _, state = rest.partition(" ")
    if first.isdigit():
        return int(first), state.strip()
    return 0, rest


@contextlib.contextmanager
def requested(
    host: str, port: int, password: str, tls: ssl.SSLContext, timeout: float = 600.0
) -> Iterator[Offer]:
    """A copy of the server of `host` (its Pod's name), from its sidecar on `port`. Raises
    CopyError (never with the password) when it cannot be had."""
    try:
        raw = socket.create_connection((host, port), timeout=30)
    except OSError as e:
        raise CopyError(f"connecting to the copy service of {host}:{port}: {e}") from None
    try:
        try:
            conn = tls.wrap_socket(raw, server_hostname=host)
        except (ssl.SSLError, OSError) as e:
            raise CopyError(f"TLS with the copy service of {host}:{port}: {e}") from None
        raw = conn
        conn.settimeout(timeout)  # a copy pauses while the donor waits for a moment without commits
        try:
            conn.sendall(password.encode() + b"\n")
            got = b""
            while b"\n" not in got and len(got) < ANSWER_LIMIT:
                piece = conn.recv(4096)
                if not piece:
                    break
                got += piece
        except OSError as e:
            raise CopyError(f"asking {host}:{port} for a copy: {e}") from None
        line, _, first = got.partition(b"\n")
        size, state = parse_answer(line.decode(errors="replace"))
        yield Offer(size, state, conn, first)
    finally:
        raw.close()
