"""The command lines of a physical copy (backup/physical.py): the throwaway server a copy is
received into or served from (its folders, its plugins checked against what the donor loads, its
initialisation), and the tar that carries the copy."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence


# a plugin library a donor may have loaded (information_schema.PLUGINS.PLUGIN_LIBRARY)
_LIBRARY = re.compile(r"^[A-Za-z0-9_.-]{1,64}\.so$")
# started as root the server drops to the image's mysql user; started as another user (the Job's
# sidecar runs as the Job's), mysqld ignores this with a warning in its log
AS_MYSQL = "--user=mysql"


@dataclass(frozen=True)
class Paths:
    """What the recipient writes in the shared folder `base`."""

    base: Path

    @property
    def recipient(self) -> Path:  # the throwaway server's own data directory
        return self.base / "clone-recipient"

    @property
    def data(self) -> Path:  # the copy
        return self.base / "clone-data"

    @property
    def socket(self) -> Path:  # a unix socket path has room for ~100 bytes
        return self.base / "clone.sock"

    @property
    def init_log(self) -> Path:
        return self.base / "clone-init.log"

    @property
    def log(self) -> Path:
        return self.base / "clone-error.log"

    def remove(self) -> None:
        for d in (self.recipient, self.data):
            shutil.rmtree(d, ignore_errors=True)
        for f in (
            self.socket,
            self.init_log,
            self.log,
            self.base / "clone.pid",
            self.base / "clone.sock.lock",
        ):
            f.unlink(missing_ok=True)


class PhysicalError(Exception):
    pass


def recipient_plugins(donor_libraries: Sequence[str]) -> list[str]:
    """Pure: the plugin libraries the recipient loads - those active on the donor (CLONE refuses
    a recipient lacking one), the clone plugin always. A name that is not a plain library file
    name is refused (the list comes from a tenant's server)."""
    out = ["mysql_clone.so"]
    for lib in donor_libraries:
        if not _LIBRARY.match(lib):
            raise PhysicalError(f"the donor's plugin library {lib[:80]!r} is not a library file name")
        if lib not in out:
            out.append(lib)
    return out


def init_command(p: Paths) -> list[str]:
    """Pure: a new, empty data directory for the recipient (root without a password)."""
    return [
        "mysqld",
        "--no-defaults",
        "--initialize-insecure",
        AS_MYSQL,
        f"--datadir={p.recipient}",
        "--skip-log-bin",
        "--innodb-buffer-pool-size=32M",
        "--innodb-redo-log-capacity=16M",
        f"--log-error={p.init_log}",
    ]


def server_command(
    p: Paths,
    plugins: Sequence[str],
    copy: bool = False,
    donor_port: int | None = None,
    tls_dir: str | None = None,
) -> list[str]:
    """Pure: a throwaway server on the recipient's data directory, or on the `copy`, whose accounts
    are the donor's (so without their checks: its root has a password): no TCP port, a socket in
    the shared folder, the donor's plugins, no file import or export. With `donor_port`: a server
    on the copy, its accounts checked, that listens on that port for the restored instances to
    clone it (with GTIDs on, as theirs are), over TLS only, with the certificate in `tls_dir`
    (tls.crt, tls.key, ca.crt) if given, else one the server makes up."""
    if donor_port is not None:
        where = [
            f"--datadir={p.data}",
            f"--port={int(donor_port)}",
            "--bind-address=*",
            "--gtid-mode=ON",
            "--enforce-gtid-consistency=ON",
            "--require-secure-transport=ON",
        ]
        if tls_dir:
            where += [
                f"--ssl-{o}={tls_dir}/{f}"
                for o, f in (("ca", "ca.crt"), ("cert", "tls.crt"), ("key", "tls.key"))
            ]
    elif copy:
        where = [f"--datadir={p.data}", "--skip-grant-tables", "--skip-networking"]
    else:
        where = [f"--datadir={p.recipient}", "--skip-networking"]
    return [
        "mysqld",
        "--no-defaults",
        AS_MYSQL,
        *where,
        f"--socket={p.socket}",
        f"--pid-file={p.base / 'clone.pid'}",
        f"--log-error={p.log}",
        f"--tmpdir={p.base}",
        "--mysqlx=OFF",
        "--skip-log-bin",
        "--secure-file-priv=NULL",
        "--innodb-buffer-pool-size=32M",
        "--innodb-redo-log-capacity=16M",
        f"--plugin-load-add={';'.join(plugins)}",
    ]


def tar_command(data: Path) -> list[str]:
    """Pure: the cloned data directory as a tar stream on stdout (numeric owners: the restore
    sets its own)."""
    return ["tar", "--numeric-owner", "-C", str(data), "-cf", "-", "."]


def untar_command(data: Path) -> list[str]:
    """Pure: a copy sent as tar_command made it, read on stdin and unpacked into `data`."""
    return ["tar", "-C", str(data), "-xf", "-"]


def donor_libraries(inst) -> list[str]:
    """The shared libraries of the plugins active on the donor (an Instance)."""
    rows = inst.execute(
        "SELECT DISTINCT PLUGIN_LIBRARY FROM information_schema.PLUGINS "
        "WHERE PLUGIN_LIBRARY IS NOT NULL AND PLUGIN_STATUS = 'ACTIVE' ORDER BY PLUGIN_LIBRARY"
    )
    return [str(r[0]) for r in rows]
