"""TLS on the local cluster, with this checkout's operator as a host process: a cluster with
`spec.tls.required: true` accepts a TLS client that verifies the published CA, refuses a plaintext
one, replicates over TLS with the CA verified, and its server certificate is renewed (short
validity) under write load without a restart and with no acknowledged write lost."""

from __future__ import annotations

import base64
import datetime as dt
import ssl
import time

import pymysql
import pytest
from cryptography import x509
from kubernetes import client

from e2e.helpers import FLAVORS, Cluster, writer_to, cluster_spec, lost_rows, query, try_query
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster

VALIDITY = 240  # seconds: renewed when a third is left, i.e. about 160 s after it was issued


# MySQL 8.4+ names SHOW REPLICA STATUS's columns for sources and replicas; MariaDB keeps the old names
REPLICA_STATUS_NAMES = {
    "Source_SSL_Allowed": "Master_SSL_Allowed",
    "Source_SSL_Verify_Server_Cert": "Master_SSL_Verify_Server_Cert",
    "Source_SSL_CA_File": "Master_SSL_CA_File",
    "Replica_IO_Running": "Slave_IO_Running",
    "Source_Host": "Master_Host",
}


def secret_text(api, ns, name, key) -> str:
    return base64.b64decode(client.CoreV1Api(api).read_namespaced_secret(name, ns).data[key]).decode()


def served_certificate(ip: str, password: str, ca_pem: str) -> x509.Certificate:
    """The certificate a server presents, as a client verifying the CA sees it (a new connection)."""
    conn = pymysql.connect(
        host=ip, port=3306, user="mysql-operator", password=password, connect_timeout=3, ssl=verifying(ca_pem)
    )
    try:
        der = conn._sock.getpeercert(binary_form=True)
    finally:
        conn.close()
    return x509.load_der_x509_certificate(der)


def verifying(ca_pem: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem)
    ctx.check_hostname = False  # from the host we reach Pods and Services by IP
    return ctx


@pytest.mark.parametrize("flavor", FLAVORS)
def test_required_tls_refuses_plaintext_replicates_verified_and_renews_under_load(host_operator, flavor):
    ns, api, _, _ = host_operator
    c = Cluster(api, ns, "tls").create(
        cluster_spec(3, flavor, tls={"required": True, "certificateValiditySeconds": VALIDITY})
    )
    c.wait_ready(300, instances=3)
    ca_pem = secret_text(api, ns, "tls-ca-bundle", "ca.crt")
    assert "PRIVATE KEY" not in ca_pem and set(
        client.CoreV1Api(api).read_namespaced_secret("tls-ca-bundle", ns).data
    ) == {"ca.crt"}  # applications get the CA certificate only
    tls = verifying(ca_pem)
    rw, pw = c.service_ip("rw"), c.password()

    # a TLS client verifying the CA is accepted; a plaintext one is refused
    seen = []

    def over_tls():
        seen[:] = [try_query(rw, "app", pw, "SELECT 1"), tls_try(rw, pw, tls)]
        return seen[0] is None and seen[1]

    wait_for(over_tls, 60, "-rw over TLS only", describe=lambda: f"plaintext, TLS cipher: {seen}")
    with pytest.raises(pymysql.err.OperationalError) as refused:
        query(rw, "app", pw, "SELECT 1")
    # MariaDB answers a plaintext client of a require_secure_transport server with "access
    # denied" (1045); MySQL with "insecure transport" (3159). The same password works over TLS.
    assert refused.value.args[0] in (1045, 3159), refused.value
    assert query(rw, "app", pw, "SELECT 1", tls=tls) == ((1,),)

    # replicas replicate over TLS, verifying their source's certificate against the CA
    op_pw = c.password("operator-password")
    primary = c.status()["currentPrimary"]
    for p in c.pods():
        if p.metadata.name == primary:
            continue
        conn = pymysql.connect(
            host=p.status.pod_ip,
            user="mysql-operator",
            password=op_pw,
            ssl=tls,
            cursorclass=pymysql.cursors.DictCursor,
            connect_timeout=3,
        )
        with conn, conn.cursor() as cur:
            cur.execute("SHOW REPLICA STATUS" if flavor == "mysql" else "SHOW SLAVE STATUS")
            st = {REPLICA_STATUS_NAMES.get(k, k): v for k, v in cur.fetchone().items()}
        assert (st["Master_SSL_Allowed"], st["Master_SSL_Verify_Server_Cert"]) == ("Yes", "Yes"), st
        assert st["Master_SSL_CA_File"] == "/etc/mysql-operator/tls/ca.crt"
        assert st["Slave_IO_Running"] == "Yes" and st["Master_Host"].endswith(f".tls-headless.{ns}.svc")

    # renewal under write load: every server ends up serving the new certificate, no restart
    first = x509.load_pem_x509_certificate(secret_text(api, ns, "tls-tls", "tls.crt").encode())
    uids = {p.metadata.name: (p.metadata.uid, p.status.container_statuses[0].restart_count) for p in c.pods()}
    query(rw, "app", pw, "CREATE TABLE app.writes (id INT PRIMARY KEY)", tls=tls)
    writer = writer_to(rw, "app", pw, tls=tls)
    writer.start()
    t0 = time.monotonic()
    try:

        def renewed():
            now = x509.load_pem_x509_certificate(secret_text(api, ns, "tls-tls", "tls.crt").encode())
            return now.serial_number != first.serial_number and now

        second = wait_for(renewed, VALIDITY, "the server certificate renewed", interval=2)
        renewed_after = time.monotonic() - t0

        def everyone_serves_it():
            return all(
                served_certificate(p.status.pod_ip, op_pw, ca_pem).serial_number == second.serial_number
                for p in c.pods()
            )

        wait_for(everyone_serves_it, 150, "every server serving the renewed certificate", interval=2)
        served_after = time.monotonic() - t0
        served_at = dt.datetime.now(dt.timezone.utc)
        acked_before = len(writer.acked)  # the writer goes on through the new certificate
        wait_for(lambda: len(writer.acked) > acked_before + 50, 30, "writes after the rotation")
    finally:
        writer.stop()
    assert second.not_valid_after_utc > first.not_valid_after_utc
    assert served_at < first.not_valid_after_utc, "the old certificate expired before every server reloaded"
    assert lost_rows(rw, pw, writer, tls) == [], "acknowledged writes lost"
    after = {
        p.metadata.name: (p.metadata.uid, p.status.container_statuses[0].restart_count) for p in c.pods()
    }
    assert after == uids, "a server restarted for the renewal"
    assert any(e.reason == "CertificateRenewed" for e in c.events())
    print(
        f"\nTLS: renewed {renewed_after:.0f}s and served everywhere {served_after:.0f}s into the load; "
        f"{len(writer.acked)} writes acknowledged, {writer.failures} failed attempts, 0 lost"
    )


def tls_try(host, pw, tls):
    try:
        return query(host, "app", pw, "SHOW SESSION STATUS LIKE 'Ssl_cipher'", tls=tls)[0][1]
    except pymysql.MySQLError as e:
        return repr(e)
