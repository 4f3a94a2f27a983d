"""Replication over TLS on real MariaDB servers that present a certificate from a test CA
(mysql_operator/tls.py) naming `localhost`, the name replicas reach their source by here (as Pods
reach theirs by `<pod>.<cluster>-headless.<ns>.svc`; the servers listen on 127.0.0.1). The engine
sets replicas up over TLS verifying the CA and the host name; a replica configured before TLS is
reconfigured exactly once; a source with another CA's certificate, or reached by a name its
certificate does not carry, is refused; a renewed certificate is served after `reload_tls()`;
the operator's connections verify the CA."""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

import pymysql
import pytest

from mysql_operator import certificates, tls
from mysql_operator import topology as t
from mysql_operator.db.instance import Instance, InstanceError, tls_context
from mysql_operator.replication import Credentials, Member, ReplicationEngine
from tests.integration.helpers_replication import APP, DB, REPL, Cluster, wait_replicated
from tests.integration.test_replication import new_factory
from tests.support.mariadb import OPERATOR_USER, missing_binaries
from tests.support.wait import wait_for

pytestmark = pytest.mark.skipif(
    bool(missing_binaries()),
    reason=f"MariaDB server binaries missing ({', '.join(missing_binaries())}): run hack/install-deps.sh",
)


@pytest.fixture(scope="module")
def factory(request):
    """MariaDB servers (these tests write the servers' PEM files where MariaDB reads them; the
    MySQL servers of tests/support/mysql.py read theirs inside the image's root)."""
    f = new_factory("mariadb")
    failed_before = request.session.testsfailed
    yield f
    if request.session.testsfailed > failed_before:
        print("\n" + f.logs_report(40), file=sys.stderr)
    f.close()


HOST = "localhost"  # resolves to 127.0.0.1; the only name the servers' certificates carry
TLS_REASON = "replicates without verified TLS"
NOW = dt.datetime.now(dt.timezone.utc)


@pytest.fixture(scope="module")
def ca():
    return tls.new_ca("tls-repl", NOW)


@pytest.fixture(scope="module")
def other_ca():
    return tls.new_ca("tls-repl", NOW)  # same name, another key: another cluster's CA


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory, ca):
    """The CA certificate every replica verifies its source with (TLS_CA in a Pod)."""
    path = tmp_path_factory.mktemp("ca") / "ca.crt"
    path.write_text(ca.cert_pem)
    return path


def write_pki(folder: Path, ca: tls.KeyPair, cert: tls.KeyPair) -> Path:
    """ca.crt, tls.crt, tls.key in `folder`, as the `<name>-tls` Secret is mounted in a Pod."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ca.crt").write_text(ca.cert_pem)
    (folder / "tls.crt").write_text(cert.cert_pem)
    (folder / "tls.key").write_text(cert.key_pem)
    (folder / "tls.key").chmod(0o600)
    return folder


def tls_servers(factory, tmp_path, n, prefix, ca, names=(HOST,)):
    """`n` servers, each with its own certificate files (a renewal replaces one server's)."""
    servers = []
    for k in range(n):
        d = write_pki(tmp_path / f"{prefix}-{k}", ca, tls.server_certificate(ca, list(names), NOW))
        (s,) = factory.create(
            1,
            start=False,
            prefix=f"{prefix}{len(factory.servers)}",
            ssl_ca=d / "ca.crt",
            ssl_cert=d / "tls.crt",
            ssl_key=d / "tls.key",
        )
        s.extra["report_host"] = HOST
        s.name = f"db-{k}"
        servers.append(s.start())
    return servers


def engine_for(factory, servers, ca_file=None, ca_pem=None, source_host=HOST):
    members = [Member(s.name, k, s.host, s.port, source_host=source_host) for k, s in enumerate(servers)]
    return ReplicationEngine(
        members,
        Credentials(OPERATOR_USER, factory.admin_password, "127.0.0.1"),
        REPL,
        t.Settings(instances=len(servers), failover_delay_seconds=1.0, replication_tls=ca_file is not None),
        app=APP,
        app_database=DB,
        apply_timeout=20,
        tls_ca_path=str(ca_file) if ca_file else None,
        tls=tls_context(ca_pem) if ca_pem else None,
    )


def slave_status(server) -> dict:
    conn = server.connect()
    try:
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("SHOW SLAVE STATUS")
            return cur.fetchone() or {}
    finally:
        conn.close()


def replicating_over_tls(server, ca_file) -> bool:
    s = slave_status(server)
    return (
        s.get("Slave_IO_Running"),
        s.get("Slave_SQL_Running"),
        s.get("Master_SSL_Allowed"),
        s.get("Master_SSL_Verify_Server_Cert"),
        s.get("Master_SSL_CA_File"),
        s.get("Master_Host"),
    ) == ("Yes", "Yes", "Yes", "Yes", str(ca_file), HOST)


def write_rows(c: Cluster, ids) -> None:
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE IF NOT EXISTS {DB}.t (id INT PRIMARY KEY, note VARCHAR(40))")
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'x')", [(i,) for i in ids])


def tls_moves(c: Cluster) -> list[str]:
    return [
        d.name for d in c.decisions if isinstance(d, t.ConfigureReplica) and d.reason.endswith(TLS_REASON)
    ]


# ---- tests ---------------------------------------------------------------------------------------
def test_the_engine_sets_replication_up_over_verified_tls(factory, tmp_path, ca, ca_file):
    servers = tls_servers(factory, tmp_path, 3, "tlsnew", ca)
    c = Cluster(servers, engine_for(factory, servers, ca_file, ca.cert_pem))
    c.converge()
    write_rows(c, range(1, 11))
    wait_replicated(c, set(range(1, 11)))
    for r in servers[1:]:
        assert replicating_over_tls(r, ca_file), slave_status(r)
    assert tls_moves(c) == []  # configured with TLS from the start: nothing to move
    # the operator's own connections are over TLS too (verifying the CA)
    for name, inst in c.engine.instances.items():
        assert inst.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")[0][1].startswith("TLSv1"), name
    for _ in range(5):
        assert isinstance(c.reconcile().decision, t.Healthy)


def test_a_replica_configured_without_tls_is_reconfigured_exactly_once(factory, tmp_path, ca, ca_file):
    servers = tls_servers(factory, tmp_path, 3, "tlsold", ca)
    before = Cluster(servers, engine_for(factory, servers))  # the operator before TLS
    before.converge()
    write_rows(before, range(1, 6))
    wait_replicated(before, set(range(1, 6)))
    for r in servers[1:]:
        s = slave_status(r)
        assert (s["Slave_IO_Running"], s["Master_SSL_Verify_Server_Cert"]) == ("Yes", "No"), s
        assert s["Master_SSL_Allowed"] == "No", s
    before.engine.close()

    c = Cluster(servers, engine_for(factory, servers, ca_file, ca.cert_pem), state=before.state)
    deadline = time.monotonic() + 30
    while not all(replicating_over_tls(r, ca_file) for r in servers[1:]):
        assert time.monotonic() < deadline, (c.decisions[-5:], [slave_status(r) for r in servers[1:]])
        c.reconcile()
        time.sleep(0.1)
    for _ in range(20):  # settled: never again
        assert isinstance(c.reconcile().decision, t.Healthy), c.decisions[-1]
        time.sleep(0.05)
    assert sorted(tls_moves(c)) == ["db-1", "db-2"], c.decisions
    assert not [d for d in c.decisions if not isinstance(d, (t.Healthy, t.ConfigureReplica))], c.decisions
    write_rows(c, range(6, 11))
    wait_replicated(c, set(range(1, 11)))


def test_a_source_with_another_cas_certificate_is_refused(factory, tmp_path, ca, other_ca, ca_file):
    (impostor,) = tls_servers(factory, tmp_path, 1, "tlsimp", other_ca)
    (replica,) = tls_servers(factory, tmp_path, 1, "tlsrep", ca)
    impostor.query("SET GLOBAL read_only = OFF")
    impostor.query(f"CREATE USER '{REPL.user}'@'%' IDENTIFIED BY '{REPL.password}'")
    impostor.query(f"GRANT REPLICATION SLAVE ON *.* TO '{REPL.user}'@'%'")
    impostor.query("CREATE DATABASE secret")
    inst = Instance(
        replica.host, replica.port, OPERATOR_USER, factory.admin_password, tls=tls_context(ca.cert_pem)
    )
    inst.point_at(HOST, impostor.port, REPL.user, REPL.password, tls_ca=str(ca_file))
    s = wait_for(
        lambda: (st := slave_status(replica)) and st["Last_IO_Errno"] and st,
        20,
        "the replica's IO thread to fail",
    )
    assert s["Slave_IO_Running"] != "Yes" and s["Last_IO_Errno"] == 2026, s  # SSL connection error
    assert "SSL connection error" in s["Last_IO_Error"], s["Last_IO_Error"]
    time.sleep(2)  # its retries never get through either
    assert slave_status(replica)["Gtid_IO_Pos"] == ""
    assert not impostor.query(f"SELECT 1 FROM information_schema.PROCESSLIST WHERE USER = '{REPL.user}'")
    assert not replica.query("SHOW DATABASES LIKE 'secret'")
    inst.close()


def test_a_source_reached_by_a_name_its_certificate_lacks_is_refused(factory, tmp_path, ca, ca_file):
    (source,) = tls_servers(factory, tmp_path, 1, "tlsname", ca, names=("db-0.other.svc",))
    (replica,) = tls_servers(factory, tmp_path, 1, "tlsnrep", ca)
    source.query("SET GLOBAL read_only = OFF")
    source.query(f"CREATE USER '{REPL.user}'@'%' IDENTIFIED BY '{REPL.password}'")
    source.query(f"GRANT REPLICATION SLAVE ON *.* TO '{REPL.user}'@'%'")
    inst = Instance(replica.host, replica.port, OPERATOR_USER, factory.admin_password)
    inst.point_at(HOST, source.port, REPL.user, REPL.password, tls_ca=str(ca_file))
    s = wait_for(
        lambda: (st := slave_status(replica)) and st["Last_IO_Errno"] and st,
        20,
        "the replica's IO thread to fail",
    )
    assert s["Slave_IO_Running"] != "Yes" and s["Last_IO_Errno"] == 2026, s
    assert not source.query(f"SELECT 1 FROM information_schema.PROCESSLIST WHERE USER = '{REPL.user}'")
    inst.close()


def test_a_renewed_certificate_is_served_after_reload_tls(factory, tmp_path, ca, ca_file):
    servers = tls_servers(factory, tmp_path, 2, "tlsrenew", ca)
    c = Cluster(servers, engine_for(factory, servers, ca_file, ca.cert_pem))
    c.converge()
    primary = c.engine.instances["db-0"]  # the operator's account: RELOAD is enough for FLUSH SSL
    binlogs_before = [s.query("SELECT @@gtid_binlog_state")[0][0] for s in servers]
    first = primary.tls_not_after()
    assert first == tls.not_after((tmp_path / "tlsrenew-0" / "tls.crt").read_text())

    renewed = tls.server_certificate(ca, [HOST], NOW + dt.timedelta(minutes=1), dt.timedelta(days=200))
    write_pki(tmp_path / "tlsrenew-0", ca, renewed)
    assert primary.tls_not_after() == first  # the files alone change nothing
    primary.reload_tls()
    assert primary.tls_not_after() == tls.not_after(renewed.cert_pem) > first
    # the reconcile loop's effect finds both servers current once the other is reloaded too
    other = tls.server_certificate(ca, [HOST], NOW + dt.timedelta(minutes=1), dt.timedelta(days=200))
    write_pki(tmp_path / "tlsrenew-1", ca, other)
    assert certificates.serve_current(c.engine.instances, tls.not_after(other.cert_pem)) == []
    assert c.engine.instances["db-1"].tls_not_after() == tls.not_after(other.cert_pem)
    # a reload is no transaction: nothing in any binary log (on a replica it would be errant)
    assert [s.query("SELECT @@gtid_binlog_state")[0][0] for s in servers] == binlogs_before

    # the replica reconnects to the source's new certificate, still verifying it
    replica = c.server("db-1")
    replica.query("STOP SLAVE IO_THREAD")
    replica.query("START SLAVE IO_THREAD")
    wait_for(
        lambda: replicating_over_tls(replica, ca_file),
        20,
        "db-1 replicating over TLS again",
        describe=lambda: repr(slave_status(replica)),
    )
    write_rows(c, range(1, 4))
    wait_replicated(c, {1, 2, 3})
    assert isinstance(c.reconcile().decision, t.Healthy), c.decisions[-1]


def test_the_operator_verifies_the_servers_ca(factory, tmp_path, ca, other_ca):
    (s,) = tls_servers(factory, tmp_path, 1, "tlsop", ca)
    good = Instance(s.host, s.port, OPERATOR_USER, factory.admin_password, tls=tls_context(ca.cert_pem))
    assert good.observe().reachable
    assert good.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")[0][1].startswith("TLSv1")
    good.close()
    bad = Instance(
        s.host,
        s.port,
        OPERATOR_USER,
        factory.admin_password,
        tls=tls_context(other_ca.cert_pem),
        connect_attempts=1,
    )
    o = bad.observe()
    assert not o.reachable and "certificate verify failed" in o.error, o.error
    with pytest.raises(InstanceError, match="certificate verify failed"):
        bad.tls_not_after()
    # a server without TLS: no certificate date
    (plain,) = factory.create(1, prefix="tlsplain")
    assert Instance(plain.host, plain.port, OPERATOR_USER, factory.admin_password).tls_not_after() is None
