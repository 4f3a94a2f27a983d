"""Effects: child processes wired together with bounded buffers, and the client option file."""

from __future__ import annotations

import fcntl
import os
import ssl
import subprocess
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from mysql_operator.backup.commands import CommandError, client_option_file, tool_too_old
from mysql_operator.db.flavor import ServerVersion
from mysql_operator.db.instance import Instance
from mysql_operator.db.connection import tls_context
from mysql_operator.redaction import redact

CHUNK = 1024 * 1024
PIPE_SIZE = 1024 * 1024  # the default maximum of an unprivileged pipe (/proc/sys/fs/pipe-max-size)


class TailBuffer:
    """The last `limit` bytes written (for a child's stderr in an error message)."""

    def __init__(self, limit: int = 4096):
        self.limit = limit
        self.data = b""

    def add(self, b: bytes) -> None:
        self.data = (self.data + b)[-self.limit :]

    def text(self, secrets: tuple[str, ...] = ()) -> str:
        return redact(self.data.decode(errors="replace").strip(), secrets)


def tool_check(
    launch: Callable[[list[str]], Any], tool: str, server: ServerVersion, image: str = ""
) -> tuple[str | None, str]:
    """(why the client tool `tool`, started by `launch` - a local process or the sidecar's - must
    not work on `server`'s data, its version line). Why: its `--version` fails (not in the image,
    does not run) or names an older release series (commands.tool_too_old); None when it may."""
    proc = launch([tool, "--version"])
    if getattr(proc, "stdin", None) is not None:
        proc.stdin.close()
    err = TailBuffer()
    reader = drain(proc.stderr, err)
    out = proc.stdout.read(4096).decode(errors="replace").strip()
    code = proc.wait(60)
    reader.join(5)
    if code != 0:
        where = f" (tool image {image})" if image else ""
        return f"`{tool} --version` failed{where} with exit status {code}: {err.text() or 'no message'}", out
    return tool_too_old(tool, out, server, image), out


def drain(stream, into: TailBuffer) -> threading.Thread:
    def run() -> None:
        try:
            for line in iter(lambda: stream.read(4096), b""):
                into.add(line)
        except (ValueError, OSError):  # closed under it: the process was stopped
            pass

    t = threading.Thread(target=run, daemon=True, name="stderr")
    t.start()
    return t


@contextmanager
def option_file(user: str, password: str, directory: str | None = None) -> Iterator[str]:
    """A [client] option file with the password, mode 0600, removed afterwards (in a new folder
    under `directory`, by default the temporary folder)."""
    with tempfile.TemporaryDirectory(prefix="mysql-operator-", dir=directory) as tmp:
        path = Path(tmp) / "client.cnf"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(client_option_file(user, password))
        yield str(path)


def verified_instance(host: str, port: int, user: str, password: str, ca_file: str | None, **kw) -> Instance:
    """An Instance over TLS verifying the server with the CA in `ca_file` (plaintext without one)."""
    tls = server_tls(ca_file)
    return Instance(host, port, user, password, tls=tls, plaintext=tls is None, **kw)


def server_tls(ca_file: str | None) -> ssl.SSLContext | None:
    """TLS for the Job's own connections: the CA certificate in `ca_file` (the cluster's) verifies
    the server's chain and host name (Jobs reach servers by DNS name). None without a file."""
    if not ca_file:
        return None
    try:
        pem = Path(ca_file).read_text()
        if "-----BEGIN CERTIFICATE-----" not in pem:  # an empty cadata would trust the system's CAs
            raise ValueError("it holds no PEM certificate")
        return tls_context(pem, check_hostname=True)
    except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
        raise CommandError(f"the CA certificate {ca_file} cannot be used for TLS: {e}") from None


def enlarge_pipes(*files) -> bool:
    """Best effort: make these pipes hold PIPE_SIZE bytes (64 KiB by default), so that the
    processes on both ends wake up less often. False when the kernel refused (limits)."""
    try:
        for f in files:
            fcntl.fcntl(f.fileno(), fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        return True
    except OSError:
        return False


def spawn(argv: list[str], **kw) -> subprocess.Popen:
    try:
        return subprocess.Popen(argv, **kw)
    except FileNotFoundError:
        raise RuntimeError(f"{argv[0]} is not installed: the backup needs it on PATH") from None


def stop(*procs: subprocess.Popen | None) -> None:
    """Kill the children that still run (after a failure) and reap them."""
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
    for p in procs:
        if p is not None:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass


def pass_on(src, dst, change: Callable[[bytes], bytes] | None = None) -> threading.Thread:
    """Copy `src` to `dst` until the end of `src` (or `dst` is closed: the reader ended), then close
    `dst` so its reader sees the end of its input. `change`: what each piece read becomes (called
    with b"" at the end for what it holds back)."""

    def run() -> None:
        try:
            for chunk in iter(lambda: src.read(CHUNK), b""):
                view = memoryview(change(chunk) if change else chunk)
                while view:
                    view = view[dst.write(view) :]
            view = memoryview(change(b"") if change else b"")
            while view:
                view = view[dst.write(view) :]
        except (BrokenPipeError, ValueError, OSError):
            pass  # the client ended: its exit status says why
        finally:
            for f in (dst, src):
                try:
                    f.close()
                except OSError:
                    pass

    t = threading.Thread(target=run, daemon=True, name="pass-on")
    t.start()
    return t
