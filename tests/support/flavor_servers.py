"""MariaDB or MySQL servers for tests, with their dump tools and client (MySQL's over verified TLS)."""

from __future__ import annotations

import shutil

import pytest

from tests.support import mariadb as mdb
from tests.support.mysql import MySQLFactory, client_tools_sidecar, mysql_unavailable
from tests.support.pki import new_pki


def tls_servers(mysql, pki, n, prefix):
    return mysql.create(
        n,
        prefix=prefix,
        ssl_ca=pki / "ca.crt",
        ssl_cert=pki / "tls.crt",
        ssl_key=pki / "tls.key",
        require_secure_transport=True,
    )


HOST = "localhost"  # the name the MySQL servers' certificate carries (they listen on 127.0.0.1)


def servers_and_tools(flavor: str, tmp_path_factory):
    """(flavor, factory, the folder shared with the client-tools sidecar or None, its CA or None):
    MySQL's dump tool and client are the image's own, run by the sidecar over verified TLS, as in
    the restore Job; MariaDB's are the host's."""
    if flavor == "mariadb":
        missing = mdb.missing_binaries() + [
            b for b in ("mariadb-dump", "mariadb", "zstd") if not shutil.which(b)
        ]
        if missing:
            pytest.skip(reason=f"MariaDB tools missing ({', '.join(missing)}): run hack/install-deps.sh")
        f = mdb.MariaDBFactory()
        yield "mariadb", f, None, None
        f.close()
        return
    why = mysql_unavailable()
    if why:
        pytest.skip(reason=f"no MySQL 9.7 server: {why}")
    f = MySQLFactory()
    pki = new_pki(f.workdir / "pki", [HOST], "events-test")
    shared = tmp_path_factory.mktemp("client-tools")
    shutil.copy(pki / "ca.crt", shared / "ca.crt")
    with client_tools_sidecar(shared):
        yield "mysql", f, shared, pki
    f.close()


def servers(env, n: int, prefix: str):
    flavor, f, _, pki = env
    return f.create(n, prefix=prefix) if flavor == "mariadb" else tls_servers(f, pki, n, prefix)


SETUP_TIMEOUT = 60  # a hang guard, not a target: loading test data on a loaded 2-core CI node took over 5 s


def run(server, *statements):
    with server.connect(timeout=SETUP_TIMEOUT) as conn, conn.cursor() as cur:
        for s in statements:
            cur.execute(s)
        return cur.fetchall()


def writable(flavor: str) -> list[str]:
    """As the operator makes a primary writable (MySQL: super_read_only off leaves read_only on)."""
    off = ["SET GLOBAL read_only = OFF"]
    return ["SET GLOBAL super_read_only = OFF", *off] if flavor == "mysql" else off
