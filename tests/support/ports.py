"""Ports for the servers the tests and benchmarks start on this host.

A port the kernel picks (`bind(("127.0.0.1", 0))`) comes from its ephemeral range, the range every
outgoing connection on the host takes its local port from. Between the moment a test learns such a
port and the moment its server binds it, any of the thousands of connections the suite makes (the
e2e tests beside it included) may take it, and the server cannot listen: a CI run lost a seed
copy's progress port that way (tests/integration/test_manifests_scripts.py). So the ports handed
out here lie below the ephemeral range and above the fixed ports of this host, where no connection
takes one, and each is claimed across processes by an advisory lock on a file named after it, held
while the process lives (the kernel drops it when the process ends, however it ends).
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
from pathlib import Path

# below Linux's default ephemeral range (32768-60999) and Kubernetes' NodePort range (30000-32767)
FIRST, LAST = 20000, 29999
_LOCKS = Path(tempfile.gettempdir()) / "mysqlop-ports"
_held: dict[int, int] = {}  # port -> the descriptor of its lock file, open while the process lives
_span = LAST - FIRST + 1
_next = os.getpid() * 7919 % _span  # processes start apart and seldom meet


def ephemeral_range() -> tuple[int, int]:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def _bindable(port: int) -> bool:
    """Nothing listens on the port and no connection uses it (on any address)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port no other process of the suite holds and nothing uses now, this process's from now on.
    Ports are handed out in turn, so one comes back only after all the others did (a server given
    one and still starting is not given a neighbour on the same port)."""
    global _next
    low, high = ephemeral_range()
    if not (LAST < low or FIRST > high):
        raise RuntimeError(
            f"the kernel's ephemeral ports ({low}-{high}) overlap the tests' ({FIRST}-{LAST}): "
            "a test server's port could be taken by any outgoing connection; set "
            "net.ipv4.ip_local_port_range to start above 30000"
        )
    _LOCKS.mkdir(mode=0o1777, exist_ok=True)
    for _ in range(_span):
        port = FIRST + _next
        _next = (_next + 1) % _span
        if port in _held:  # handed out by this process 10,000 ports ago: again, if it is free
            if _bindable(port):
                return port
            continue
        fd = os.open(_LOCKS / str(port), os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if not _bindable(port):
            os.close(fd)
            continue
        _held[port] = fd
        return port
    raise RuntimeError(f"no free port left in {FIRST}-{LAST}")
