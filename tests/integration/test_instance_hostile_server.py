"""A tenant's server cannot stall, exhaust or read the operator (issue 53): the project's own
`Instance` and `ReplicationEngine` against a fake MySQL server on a real TCP socket
(tests/support/fake_mysql.py), for the faults no real server produces on demand: a 200 MB answer,
an answer dripped a byte at a time, a server that offers no TLS when TLS is required, a switch to
cleartext authentication, values that do not parse. Each is refused within its deadline as that
server's failure, its message naming the server, never carrying the password or the value.

A certificate for the wrong name: the server speaks TLS with a certificate the cluster's CA
signed, for another Pod's name; the operator, connecting by IP, checks the name it knows the
server by (ServerTLS.for_name)."""

from __future__ import annotations

import datetime as dt
import ssl
import time

import pytest

from mysql_operator import tls as pki
from mysql_operator import topology as t
from mysql_operator.db.observation import GTID_TEXT_CHARS, InstanceError
from mysql_operator.db.instance import Instance
from mysql_operator.db.connection import tls_context
from mysql_operator.members import Credentials, Member
from mysql_operator.replication import ReplicationEngine
from tests.support.fake_mysql import (
    OK,
    Drip,
    FakeMySQL,
    Huge,
    Rows,
    default_answer,
    on_version,
    version_rows,
)

PASSWORD = "s3cret-operator-pw"


def instance(server: FakeMySQL, **kw) -> Instance:
    kw.setdefault("read_timeout", 2.0)
    kw.setdefault("connect_attempts", 1)
    return Instance("127.0.0.1", server.port, "operator", PASSWORD, **kw)


def answering(**overrides) -> object:
    """default_answer, with server_state (observe's first statement) answered by `overrides`."""
    state = {
        "@@server_id": "1",
        "uuid": "3e11fa47-71ca-11e1-9e33-c80aa9429562",
        "read_only": "0",
        "hostname": "db-0",
        "report_host": "db-0",
        "executed": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5",
        "purged": "",
    } | overrides

    def answer(sql: str):
        if "@@server_id" in sql:
            return Rows(tuple(state), [tuple(state.values())])
        return default_answer(sql)

    return answer


def rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def assert_short_and_named(error: str, server: FakeMySQL) -> None:
    assert server.name in error, error
    assert PASSWORD not in error
    assert len(error) < 700, f"{len(error)} characters: {error[:200]}..."


def test_the_fake_server_answers_a_well_behaved_client():
    """The refusals below are the operator's: the same fake server serves a plain exchange."""
    with FakeMySQL() as server:
        inst = instance(server, plaintext=True)
        assert inst.dialect.version.flavor.value == "mysql"
        assert server.logins == 1 and any("VERSION()" in q for q in server.queries)
        inst.close()


def test_an_oversized_answer_is_refused_and_memory_stays_small():
    """A 200 MB VERSION(): refused at the first packet header past the cap, as that server's
    failure; the process's peak RSS barely moves (the reproduction in issue 53 went from 56 to
    629 MiB and put the whole value in the message)."""
    with FakeMySQL(answer=on_version(Huge(200 * 1024 * 1024))) as server:
        inst = instance(server, plaintext=True)
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM, the peak, to the current RSS
            reset = True
        except OSError:
            reset = False
        before = rss_kib("VmRSS")
        began = time.monotonic()
        o = inst.observe()
        took = time.monotonic() - began
        grew = (rss_kib("VmHWM" if reset else "VmRSS") - before) / 1024
        print(
            f"200 MB answer: refused in {took:.2f}s, RSS {before / 1024:.0f} MiB, "
            f"{'peak' if reset else 'now'} +{grew:.1f} MiB: {o.error}"
        )
        assert not o.reachable
        assert "larger than 16777216 bytes" in (o.error or "")
        assert "8888888888" not in (o.error or "")
        assert_short_and_named(o.error or "", server)
        assert grew < 48, f"RSS grew by {grew:.0f} MiB"
        with pytest.raises(InstanceError) as raised:  # not only observe(): every statement
            instance(server, plaintext=True).scalar("SELECT VERSION()")
        assert raised.value.errno == 2020 and server.name in str(raised.value)


@pytest.mark.parametrize("where", ["answer", "greeting"])
def test_a_dripping_server_is_cut_at_the_deadline(where):
    """A byte every second never trips the 2 s read timeout; the exchange's deadline (2 s; the
    login's: connect_timeout 1 s + 2 s) cuts it, without a retry: the old code read on for as
    long as the server kept dripping (past 90 s in issue 53's reproduction)."""
    kw = (
        {"answer": on_version(Drip(version_rows(), every=1.0))}
        if where == "answer"
        else {"greeting_every": 1.0}
    )
    with FakeMySQL(**kw) as server:
        inst = instance(server, plaintext=True, connect_attempts=3, connect_timeout=1.0)
        began = time.monotonic()
        o = inst.observe()
        took = time.monotonic() - began
        print(f"drip in the {where}: cut after {took:.2f}s: {o.error}")
        assert not o.reachable
        assert "the deadline" in (o.error or "") and "(2013" in (o.error or "")
        assert_short_and_named(o.error or "", server)
        limit = 2.0 if where == "answer" else 3.0
        assert limit - 0.1 <= took < limit + 3, took  # the margin: a loaded machine schedules late
        assert server.logins == (1 if where == "answer" else 0)  # not retried


def test_a_server_without_tls_is_refused_when_tls_is_required():
    """The operator connects with a TLS context: a server whose greeting offers no TLS gets
    nothing, not even the user name (pymysql 1.1 went on in plaintext)."""
    with FakeMySQL(tls_offered=False) as server:
        inst = instance(server, tls=ssl.create_default_context())
        o = inst.observe()
        print(f"no TLS offered: {o.error}")
        assert not o.reachable and "offers no TLS" in (o.error or "")
        assert_short_and_named(o.error or "", server)
        assert server.logins == 0 and bytes(server.received) == b""


def server_tls(ca: pki.KeyPair, names: list[str], folder) -> ssl.SSLContext:
    """A server's TLS: a certificate for `names` signed by `ca`."""
    cert = pki.server_certificate(ca, names, dt.datetime.now(dt.timezone.utc))
    (folder / "tls.crt").write_text(cert.cert_pem)
    (folder / "tls.key").write_text(cert.key_pem)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(folder / "tls.crt", folder / "tls.key")
    return ctx


def test_a_certificate_for_another_name_is_refused_though_the_cluster_ca_signed_it(tmp_path):
    """The server at db-0's address presents a certificate of the cluster's CA made out to
    db-1 (a tenant's server with another Pod's certificate, an address reused by another Pod):
    the operator checks the name it knows db-0 by, not only the chain. The password is never
    sent; the right name gets in; without a name only the chain is checked (as before)."""
    ca = pki.new_ca("cluster-ca", dt.datetime.now(dt.timezone.utc))
    ctx = tls_context(ca.cert_pem)
    db0, db1 = "db-0.db-headless.ns.svc", "db-1.db-headless.ns.svc"
    with FakeMySQL(tls=server_tls(ca, ["*.other-headless.ns.svc", db1], tmp_path)) as server:
        o = instance(server, tls=ctx, tls_name=db0).observe()
        print(f"certificate for another name: {o.error}")
        assert not o.reachable and "certificate" in (o.error or "") and db0 in (o.error or "")
        assert_short_and_named(o.error or "", server)
        assert server.logins == 0 and PASSWORD.encode() not in bytes(server.received)
    with FakeMySQL(answering(), tls=server_tls(ca, ["*.db-headless.ns.svc"], tmp_path)) as server:
        assert instance(server, tls=ctx, tls_name=db0).observe().reachable
        assert server.logins == 1
    with FakeMySQL(answering(), tls=server_tls(ca, [db1], tmp_path)) as server:
        assert (
            instance(server, tls=ctx).observe().reachable
        )  # the chain only, as a caller without a name asks
        # the engine checks each member for its Pod's DNS name (Member.source_host, where its
        # replicas reach it), connecting to its address
        engine = ReplicationEngine(
            [Member("db-0", 0, "127.0.0.1", server.port, source_host=db0)],
            Credentials("operator", PASSWORD),
            Credentials("repl", "repl-pw"),
            t.Settings(instances=1),
            tls=ctx,
        )
        (seen,) = engine.observe()
        engine.close()
        assert not seen.reachable and "Hostname mismatch" in engine.observer.last_error["db-0"]
        assert server.logins == 1  # the chain-only login above; none from the engine


@pytest.mark.parametrize("plugin", ["mysql_clear_password", "dialog"])
def test_a_switch_to_cleartext_authentication_is_refused(plugin):
    """The server answers the login with a switch to a plugin that sends the password itself:
    refused, and the server never receives the password (pymysql alone sends it)."""
    with FakeMySQL(auth_switch=plugin) as server:
        inst = instance(server, plaintext=True)
        o = inst.observe()
        print(f"switch to {plugin}: {o.error}")
        assert not o.reachable and "clear text" in (o.error or "") and plugin in (o.error or "")
        assert_short_and_named(o.error or "", server)
        assert server.logins == 1
        assert PASSWORD.encode() not in bytes(server.received)


@pytest.mark.parametrize(
    "state, expected",
    [
        ({"@@server_id": "not-a-number"}, "invalid literal"),
        ({"executed": "not a GTID set " * 40}, "not a MySQL server uuid"),
        ({"executed": "x" * (GTID_TEXT_CHARS + 1)}, "longer than 1048576 characters"),
    ],
)
def test_values_that_do_not_parse_are_that_servers_failure(state, expected):
    """Before, anything but InstanceError (a ValueError of int(), a GtidParseError) escaped
    observe() and ended the pass; a set longer than the cap is refused, never read in part."""
    with FakeMySQL(answer=answering(**state)) as server:
        o = instance(server, plaintext=True).observe()
        print(o.error)
        assert not o.reachable and expected in (o.error or "")
        assert_short_and_named(o.error or "", server)


@pytest.mark.parametrize(
    "call, asked, rows",
    [
        ("binary_logs", "SHOW BINARY LOGS", Rows(("Log_name", "File_size"), [("binlog.000001", "big")])),
        ("kill_client_connections", "PROCESSLIST", Rows(("ID", "USER", "COMMAND"), [("x", "app", "Query")])),
        ("dialect", "VERSION()", version_rows("banana")),
    ],
)
def test_other_answers_that_do_not_parse_are_instance_errors(call, asked, rows):
    """Beyond observe(): what a pass calls per server (purging binary logs, fencing, the
    flavor) raises that server's InstanceError, which the pass handles, never a ValueError."""

    def answer(sql: str):
        if asked in sql:
            return rows
        return Rows(("id",), [("7",)]) if "CONNECTION_ID" in sql else answering()(sql)

    with FakeMySQL(answer=answer) as server:
        inst = instance(server, plaintext=True)
        with pytest.raises(InstanceError) as raised:
            getattr(inst, call)() if call != "dialect" else inst.dialect
        print(raised.value)
        assert "does not parse" in str(raised.value)
        assert_short_and_named(str(raised.value), server)


def test_one_pass_observes_every_server_whatever_each_one_sends():
    """ReplicationEngine.observe (every pass's first step, a thread per server): a huge answer,
    a drip, a value that does not parse and a healthy fake, side by side: every server gets a
    state, the hostile ones unreachable, within the drip's deadline - no exception leaves."""
    answers = {
        "db-0": answering(),
        "db-1": on_version(Huge(64 * 1024 * 1024)),
        "db-2": on_version(Drip(version_rows(), every=1.0)),
        "db-3": answering(**{"@@server_id": "x"}),
    }
    servers = {name: FakeMySQL(answer=a) for name, a in answers.items()}
    try:
        for s in servers.values():
            s.__enter__()
        members = [Member(name, i, "127.0.0.1", s.port) for i, (name, s) in enumerate(servers.items())]
        engine = ReplicationEngine(
            members,
            Credentials("operator", PASSWORD),
            Credentials("repl", "repl-pw"),
            t.Settings(instances=len(members)),
            read_timeout=2.0,
        )
        began = time.monotonic()
        states = {s.name: s for s in engine.observe()}
        took = time.monotonic() - began
        engine.close()
    finally:
        for s in servers.values():
            s.__exit__(None, None, None)
    print(
        f"one pass over {len(states)} servers: {took:.2f}s; "
        + "; ".join(f"{n}: {engine.observer.last_error.get(n, 'ok')}" for n in sorted(states))
    )
    assert sorted(states) == sorted(answers)
    assert states["db-0"].reachable
    assert not any(states[n].reachable for n in ("db-1", "db-2", "db-3"))
    for n in ("db-1", "db-2", "db-3"):
        assert n in engine.observer.last_error[n] and PASSWORD not in engine.observer.last_error[n]
    assert took < 2.0 + 3, took


def test_ok_replies_keep_the_fake_honest():
    """SET statements get OK (the driver's SET NAMES and autocommit ride on it)."""
    assert isinstance(default_answer("SET NAMES utf8mb4"), OK)
