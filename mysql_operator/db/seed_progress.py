"""How far a MariaDB re-seed is: the recipient's `seed` init container (sh/seed.sh receive)
answers on a port with one line "<receiving|preparing> <bytes received> <bytes expected>".

The line comes from a Pod in the tenant's namespace: only a short line of that exact shape is
accepted (digits, bounded), anything else counts as no answer, and nothing of it is logged."""

from __future__ import annotations

import re
import socket

LINE = re.compile(rb"(receiving|preparing) ([0-9]{1,15}) ([0-9]{1,15})\n?")
MAX_LINE = 64


def parse(line: bytes) -> tuple[int, int] | None:
    """(bytes received, bytes expected) of a progress line, or None when it is not one."""
    m = LINE.fullmatch(line)
    return (int(m.group(2)), int(m.group(3))) if m else None


def read(host: str, port: int, timeout: float = 0.5) -> tuple[int, int] | None:
    """The progress of the copy received at host:port; None when nothing answers there (no copy
    under way, the Pod has no address yet) or the answer is not a progress line."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            data = b""
            while len(data) <= MAX_LINE and not data.endswith(b"\n"):
                chunk = s.recv(MAX_LINE + 1 - len(data))
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    return parse(data) if len(data) <= MAX_LINE else None
