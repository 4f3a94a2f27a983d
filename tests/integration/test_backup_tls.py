"""The backup and restore Jobs' connections over TLS, against real MariaDB servers that refuse
plaintext clients (require_secure_transport=ON) and present a certificate for `localhost` signed by
a test CA: given the CA (`--tls-ca`), `run_backup` and `restore_all` verify the chain and the host
name and succeed; without it, with another CA, or reaching the server by a name its certificate
does not carry, they fail with a message naming TLS or the certificate (never a password). The
dump tool and the loading client verify the server themselves too (their own TLS flags)."""

from __future__ import annotations

import datetime as dt
import re
import subprocess

import pytest

from mysql_operator import tls
from mysql_operator.backup import commands
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.pipeline import option_file
from mysql_operator.backup.restore_types import Source, Target
from mysql_operator.backup.restore_job import restore_all
from mysql_operator.backup.backup_types import BackupError, BackupRequest, Candidate
from mysql_operator.backup.run import run_backup
from mysql_operator.db.flavor import Flavor, ServerVersion
from tests.support.backups import checksums, creds, s3cfg, sql, writable
from tests.support.mariadb import ADMIN_USER, BACKUP_USER

HOST = "localhost"  # the name the servers' certificate carries (they listen on 127.0.0.1)
MARIADB = ServerVersion(Flavor.MARIADB, 10, 11, 0)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """ca.crt signs the servers' certificate (SAN localhost); other-ca.crt is another cluster's."""
    d = tmp_path_factory.mktemp("pki")
    now = dt.datetime.now(dt.timezone.utc)
    ca = tls.new_ca("tls-test", now)
    server = tls.server_certificate(ca, [HOST], now)
    (d / "ca.crt").write_text(ca.cert_pem)
    (d / "other-ca.crt").write_text(tls.new_ca("tls-test", now).cert_pem)  # same name, another key
    (d / "tls.crt").write_text(server.cert_pem)
    (d / "tls.key").write_text(server.key_pem)
    (d / "tls.key").chmod(0o600)
    (d / "empty.crt").write_text("")
    return d


def tls_servers(factory, pki, n, prefix):
    return factory.create(
        n,
        prefix=prefix,
        ssl_ca=pki / "ca.crt",
        ssl_cert=pki / "tls.crt",
        ssl_key=pki / "tls.key",
        require_secure_transport=True,
    )


@pytest.fixture(scope="module")
def source(factory, pki):
    (src,) = tls_servers(factory, pki, 1, "tlssrc")
    assert src.query("SELECT @@require_secure_transport")[0][0] == 1
    writable(src)
    sql(
        src,
        "CREATE DATABASE shop",
        "CREATE TABLE shop.orders (id INT PRIMARY KEY, total DECIMAL(10,2)) ENGINE=InnoDB",
        "INSERT INTO shop.orders SELECT seq, seq * 1.25 FROM mysql.seq_1_to_2000",
    )
    return src


@pytest.fixture(scope="module")
def s3(s3server):
    return s3cfg(s3server, s3server.create_bucket("bk-tls"))


def backup_request(server, s3, ca, name="b1", host=HOST) -> BackupRequest:
    return BackupRequest(
        cluster="c1",
        namespace="ns",
        backup=name,
        s3=s3,
        tls_ca=ca and str(ca),
        candidates=(Candidate(server.name, Endpoint(host, server.port, BACKUP_USER)),),
    )


@pytest.fixture(scope="module")
def stored(factory, s3server, source, s3, pki):
    """A backup taken over verified TLS (the server refuses anything else)."""
    m = run_backup(
        backup_request(source, s3, pki / "ca.crt", name="nightly"), creds(s3server), factory.admin_password
    )
    return m


@pytest.fixture(scope="module")
def refusing_target(factory, pki):
    """A TLS-only target the failing restores never get to write to."""
    (t,) = tls_servers(factory, pki, 1, "tlsnot")
    return t


def restore(factory, s3server, s3, m, servers, ca, host=HOST):
    targets = {
        s.name: Target(host, s.port, ADMIN_USER, factory.admin_password, tls_ca=ca and str(ca))
        for s in servers
    }
    return restore_all(targets, Source(s3, f"s3://{s3.bucket}/{m.data_key}"), creds(s3server), None)


def user_databases(server) -> list[str]:
    return commands.user_databases([r[0] for r in server.query("SHOW DATABASES")])


def test_backup_and_restore_over_tls_verifying_the_ca_and_host_name(
    factory, s3server, source, s3, stored, pki
):
    assert stored.databases == ("shop",) and stored.source_instance == source.name
    targets = tls_servers(factory, pki, 2, "tlsdst")
    result = restore(factory, s3server, s3, stored, targets, pki / "ca.crt")
    assert result["ok"], result["message"]
    for t in targets:
        assert checksums(t) == checksums(source)
        assert t.query("SELECT @@read_only")[0][0] == 1  # read-only again afterwards


@pytest.mark.parametrize(
    "case, expected",
    [
        # MariaDB refuses a plaintext client as it does a wrong password
        (
            "no CA",
            r"Access denied .*\(using password: YES\).*connected without TLS, which a server that requires "
            r"TLS refuses: give --tls-ca",
        ),
        ("another CA", r"CERTIFICATE_VERIFY_FAILED\] certificate verify failed"),
        ("a name the certificate lacks", r"certificate verify failed: IP address mismatch"),
        (
            "an empty CA file",
            r"the CA certificate .*empty.crt cannot be used for TLS: it holds no PEM certificate",
        ),
        ("a missing CA file", r"the CA certificate .*missing.crt cannot be used for TLS: .*No such file"),
    ],
)
def test_without_the_right_ca_backup_and_restore_fail_naming_tls(
    factory, s3server, source, s3, stored, pki, refusing_target, case, expected
):
    ca, host = {
        "no CA": (None, HOST),
        "another CA": (pki / "other-ca.crt", HOST),
        "a name the certificate lacks": (pki / "ca.crt", "127.0.0.1"),
        "an empty CA file": (pki / "empty.crt", HOST),
        "a missing CA file": (pki / "missing.crt", HOST),
    }[case]
    with pytest.raises((BackupError, commands.CommandError), match=expected) as e:
        run_backup(
            backup_request(source, s3, ca, name="never", host=host), creds(s3server), factory.admin_password
        )
    assert factory.admin_password not in str(e.value)
    result = restore(factory, s3server, s3, stored, [refusing_target], ca, host)
    assert not result["ok"] and result["message"].startswith(f"{refusing_target.name}: ")
    assert re.search(expected, result["message"]), result["message"]
    assert factory.admin_password not in result["message"]
    assert user_databases(refusing_target) == [] and refusing_target.query("SELECT @@read_only")[0][0] == 1


@pytest.mark.parametrize("tool", ["dump", "client"])
def test_the_dump_tool_and_the_client_verify_the_server_themselves(factory, source, pki, tool):
    """Their TLS flags alone (no pymysql before them): the right CA and name connect; another CA or
    another name is refused by the tool, naming TLS or the certificate."""

    def run(ca, host=HOST):
        ep = Endpoint(host, source.port, ADMIN_USER)
        with option_file(ADMIN_USER, factory.admin_password) as options:
            argv = (
                commands.dump_command(MARIADB, ep, options, ["shop"], str(ca))
                if tool == "dump"
                else commands.client_command(MARIADB, ep, options, str(ca)) + ["-e", "SELECT 1"]
            )
            return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)

    ok = run(pki / "ca.crt")
    assert ok.returncode == 0, ok.stderr
    for bad in (run(pki / "other-ca.crt"), run(pki / "ca.crt", host="127.0.0.1")):
        assert bad.returncode != 0
        assert "TLS" in bad.stderr or "certificate" in bad.stderr.lower(), bad.stderr
        assert factory.admin_password not in bad.stderr
