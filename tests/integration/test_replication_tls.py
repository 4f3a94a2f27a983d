"""Replication over TLS on real servers of both flavors, MariaDB 10.11 and MySQL 9.7 (every test
runs once per flavor; its id names it), that present a certificate from a test CA
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

from mysql_operator import certificates, executor, tls
from mysql_operator import topology as t
from mysql_operator.db.flavor import Flavor
from mysql_operator.db.instance import Instance
from mysql_operator.db.observation import InstanceError
from mysql_operator.db.connection import tls_context
from mysql_operator.writes import ReloadTLS
from mysql_operator.members import Credentials, Member
from mysql_operator.replication import ReplicationEngine
from tests.integration.helpers_replication import APP, DB, REPL, Cluster, new_factory, wait_replicated
from tests.support.mariadb import OPERATOR_USER
from tests.support.mysql import MySQLServer, in_root
from tests.support.pki import write_pki
from tests.support.wait import wait_for


@pytest.fixture(scope="module", params=["mariadb", "mysql"])
def factory(request):
    """Servers of each flavor. The tests write the servers' PEM files inside the factory's folder:
    MySQL's servers run chrooted into the image's root (tests/support/mysql.py), which holds it."""
    f = new_factory(request.param)
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
def ca_file(factory, ca) -> str:
    """The CA certificate every replica verifies its source with (TLS_CA in a Pod), by the path
    the servers read it at (MySQL's: inside the root they are chrooted into)."""
    path = factory.workdir / "ca.crt"
    path.write_text(ca.cert_pem)
    return in_root(factory.rootfs, path) if factory.flavor is Flavor.MYSQL else str(path)


@pytest.fixture
def folder(factory, tmp_path) -> Path:
    """The test's folder for its servers' PEM files, inside the factory's (see `factory`)."""
    return factory.workdir / tmp_path.name


def tls_servers(factory, folder, n, prefix, ca, names=(HOST,)):
    """`n` servers, each with its own certificate files (a renewal replaces one server's)."""
    servers = []
    for k in range(n):
        d = write_pki(folder / f"{prefix}-{k}", ca, tls.server_certificate(ca, list(names), NOW))
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
        tls_ca_path=ca_file,
        tls=tls_context(ca_pem) if ca_pem else None,
    )


# what the tests read of SHOW REPLICA STATUS: key -> its column on MariaDB, on MySQL
STATUS = {
    "io": ("Slave_IO_Running", "Replica_IO_Running"),
    "sql": ("Slave_SQL_Running", "Replica_SQL_Running"),
    "ssl": ("Master_SSL_Allowed", "Source_SSL_Allowed"),
    "verify": ("Master_SSL_Verify_Server_Cert", "Source_SSL_Verify_Server_Cert"),
    "ca_file": ("Master_SSL_CA_File", "Source_SSL_CA_File"),
    "host": ("Master_Host", "Source_Host"),
    "io_errno": ("Last_IO_Errno", "Last_IO_Errno"),
    "io_error": ("Last_IO_Error", "Last_IO_Error"),
    "received": ("Gtid_IO_Pos", "Retrieved_Gtid_Set"),
}


def replica_status(server) -> dict:
    """The replica's status under STATUS's keys; {} when it has no source."""
    conn = server.connect()
    try:
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("SHOW REPLICA STATUS")  # MariaDB's alias of SHOW SLAVE STATUS
            row = cur.fetchone()
    finally:
        conn.close()
    mysql = isinstance(server, MySQLServer)
    return {key: row[columns[mysql]] for key, columns in STATUS.items()} if row else {}


def aborted_connects(server) -> int:
    """How many connections the server saw fail before they were established (a client that
    gave up in the TLS handshake counts)."""
    return int(server.query("SHOW GLOBAL STATUS LIKE 'Aborted_connects'")[0][1])


def replicating_over_tls(server, ca_file) -> bool:
    s = replica_status(server)
    want = {"io": "Yes", "sql": "Yes", "ssl": "Yes", "verify": "Yes", "ca_file": ca_file, "host": HOST}
    return all(s.get(k) == v for k, v in want.items())


def write_rows(c: Cluster, ids) -> None:
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE IF NOT EXISTS {DB}.t (id INT PRIMARY KEY, note VARCHAR(40))")
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'x')", [(i,) for i in ids])


def binlogged(c: Cluster) -> list[str]:
    """Each server's binary log as GTIDs (MariaDB: gtid_binlog_state, MySQL: gtid_executed)."""
    return [i.scalar(i.dialect.executed_gtids_sql()) for i in c.engine.instances.values()]


def tls_moves(c: Cluster) -> list[str]:
    return [
        d.name for d in c.decisions if isinstance(d, t.ConfigureReplica) and d.reason.endswith(TLS_REASON)
    ]


# ---- tests ---------------------------------------------------------------------------------------
def test_the_engine_sets_replication_up_over_verified_tls(factory, folder, ca, ca_file):
    servers = tls_servers(factory, folder, 3, "tlsnew", ca)
    c = Cluster(servers, engine_for(factory, servers, ca_file, ca.cert_pem))
    c.converge()
    write_rows(c, range(1, 11))
    wait_replicated(c, set(range(1, 11)))
    for r in servers[1:]:
        assert replicating_over_tls(r, ca_file), replica_status(r)
    assert tls_moves(c) == []  # configured with TLS from the start: nothing to move
    # the operator's own connections are over TLS too (verifying the CA)
    for name, inst in c.engine.instances.items():
        assert inst.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")[0][1].startswith("TLSv1"), name
    for _ in range(5):
        assert isinstance(c.reconcile().decision, t.Healthy)


def test_a_replica_configured_without_tls_is_reconfigured_exactly_once(factory, folder, ca, ca_file):
    servers = tls_servers(factory, folder, 3, "tlsold", ca)
    before = Cluster(servers, engine_for(factory, servers))  # the operator before TLS
    before.converge()
    write_rows(before, range(1, 6))
    wait_replicated(before, set(range(1, 6)))
    for r in servers[1:]:
        s = replica_status(r)
        assert (s["io"], s["verify"]) == ("Yes", "No"), s
        # MariaDB's statement says MASTER_SSL=0; MySQL 9.7's SOURCE_SSL is 1 unless said otherwise
        # (encrypted, the source's certificate unverified)
        assert s["ssl"] == ("Yes" if factory.flavor is Flavor.MYSQL else "No"), s
    before.engine.close()

    c = Cluster(servers, engine_for(factory, servers, ca_file, ca.cert_pem), state=before.state)
    deadline = time.monotonic() + 30
    while not all(replicating_over_tls(r, ca_file) for r in servers[1:]):
        assert time.monotonic() < deadline, (c.decisions[-5:], [replica_status(r) for r in servers[1:]])
        c.reconcile()
        time.sleep(0.1)
    for _ in range(20):  # settled: never again
        assert isinstance(c.reconcile().decision, t.Healthy), c.decisions[-1]
        time.sleep(0.05)
    assert sorted(tls_moves(c)) == ["db-1", "db-2"], c.decisions
    assert not [d for d in c.decisions if not isinstance(d, (t.Healthy, t.ConfigureReplica))], c.decisions
    write_rows(c, range(6, 11))
    wait_replicated(c, set(range(1, 11)))


def test_a_source_with_another_cas_certificate_is_refused(factory, folder, ca, other_ca, ca_file):
    (impostor,) = tls_servers(factory, folder, 1, "tlsimp", other_ca)
    (replica,) = tls_servers(factory, folder, 1, "tlsrep", ca)
    impostor.query("SET GLOBAL read_only = OFF")
    impostor.query(f"CREATE USER '{REPL.user}'@'%' IDENTIFIED BY '{REPL.password}'")
    impostor.query(f"GRANT REPLICATION SLAVE ON *.* TO '{REPL.user}'@'%'")
    impostor.query("CREATE DATABASE secret")
    inst = Instance(
        replica.host, replica.port, OPERATOR_USER, factory.admin_password, tls=tls_context(ca.cert_pem)
    )
    inst.point_at(HOST, impostor.port, REPL.user, REPL.password, tls_ca=ca_file)
    s = wait_for(
        lambda: (st := replica_status(replica)) and st["io_errno"] and st,
        20,
        "the replica's IO thread to fail",
    )
    assert s["io"] != "Yes" and s["io_errno"] == 2026, s  # SSL connection error
    assert "SSL connection error" in s["io_error"], s["io_error"]
    # its retries (every second) never get through either: two more refused by the impostor
    refused = aborted_connects(impostor)
    wait_for(
        lambda: aborted_connects(impostor) >= refused + 2, 20, "two more of the replica's retries to fail"
    )
    assert replica_status(replica)["received"] == ""
    assert not impostor.query(f"SELECT 1 FROM information_schema.PROCESSLIST WHERE USER = '{REPL.user}'")
    assert not replica.query("SHOW DATABASES LIKE 'secret'")
    inst.close()


def test_a_source_reached_by_a_name_its_certificate_lacks_is_refused(factory, folder, ca, ca_file):
    (source,) = tls_servers(factory, folder, 1, "tlsname", ca, names=("db-0.other.svc",))
    (replica,) = tls_servers(factory, folder, 1, "tlsnrep", ca)
    source.query("SET GLOBAL read_only = OFF")
    source.query(f"CREATE USER '{REPL.user}'@'%' IDENTIFIED BY '{REPL.password}'")
    source.query(f"GRANT REPLICATION SLAVE ON *.* TO '{REPL.user}'@'%'")
    inst = Instance(replica.host, replica.port, OPERATOR_USER, factory.admin_password)
    inst.point_at(HOST, source.port, REPL.user, REPL.password, tls_ca=ca_file)
    s = wait_for(
        lambda: (st := replica_status(replica)) and st["io_errno"] and st,
        20,
        "the replica's IO thread to fail",
    )
    assert s["io"] != "Yes" and s["io_errno"] == 2026, s
    assert not source.query(f"SELECT 1 FROM information_schema.PROCESSLIST WHERE USER = '{REPL.user}'")
    inst.close()


def test_a_renewed_certificate_is_served_after_reload_tls(factory, folder, ca, ca_file):
    servers = tls_servers(factory, folder, 2, "tlsrenew", ca)
    c = Cluster(servers, engine_for(factory, servers, ca_file, ca.cert_pem))
    c.converge()
    # the operator's account: RELOAD is enough for MariaDB's FLUSH SSL, CONNECTION_ADMIN for MySQL's
    # ALTER INSTANCE RELOAD TLS
    primary = c.engine.instances["db-0"]
    binlogs_before = binlogged(c)
    first = primary.tls_not_after()
    assert first == tls.not_after((folder / "tlsrenew-0" / "tls.crt").read_text())

    renewed = tls.server_certificate(ca, [HOST], NOW + dt.timedelta(minutes=1), dt.timedelta(days=200))
    write_pki(folder / "tlsrenew-0", ca, renewed)
    assert primary.tls_not_after() == first  # the files alone change nothing
    primary.reload_tls()
    assert primary.tls_not_after() == tls.not_after(renewed.cert_pem) > first
    # the reconcile loop's effect finds both servers current once the other is reloaded too
    other = tls.server_certificate(ca, [HOST], NOW + dt.timedelta(minutes=1), dt.timedelta(days=200))
    write_pki(folder / "tlsrenew-1", ca, other)
    # (as tls_upkeep does: what each server serves read, the older ones reloaded; the next check sees them)
    instances, until = c.engine.instances, tls.not_after(other.cert_pem)
    served = {name: inst.tls_not_after() for name, inst in instances.items()}
    pending, reloads = certificates.reloads(instances, served, until)
    assert pending == ["db-1"] and reloads == [ReloadTLS("db-1")]
    assert all(d.made for d in executor.carry_out(None, {}, reloads, servers=instances))
    served = {name: inst.tls_not_after() for name, inst in instances.items()}
    assert certificates.reloads(instances, served, until) == ([], [])
    assert c.engine.instances["db-1"].tls_not_after() == tls.not_after(other.cert_pem)
    # a reload is no transaction: nothing in any binary log (on a replica it would be errant)
    assert binlogged(c) == binlogs_before

    # the replica reconnects to the source's new certificate, still verifying it
    replica = c.server("db-1")
    replica.query("STOP REPLICA IO_THREAD")
    replica.query("START REPLICA IO_THREAD")
    wait_for(
        lambda: replicating_over_tls(replica, ca_file),
        20,
        "db-1 replicating over TLS again",
        describe=lambda: repr(replica_status(replica)),
    )
    write_rows(c, range(1, 4))
    wait_replicated(c, {1, 2, 3})
    assert isinstance(c.reconcile().decision, t.Healthy), c.decisions[-1]


def test_the_operator_verifies_the_servers_ca(factory, folder, ca, other_ca):
    (s,) = tls_servers(factory, folder, 1, "tlsop", ca)
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
    # a server without TLS: no certificate date (TLS off: MySQL would serve one it generates itself)
    (plain,) = factory.create(1, start=False, prefix="tlsplain")
    plain.extra["tls_version"] = ""
    plain.start()
    assert Instance(plain.host, plain.port, OPERATOR_USER, factory.admin_password).tls_not_after() is None
