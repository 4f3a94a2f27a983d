"""The ConfigMap's init/start/probe scripts, run against a real MariaDB server (Debian's mariadbd).

The scripts run as an unprivileged user (like uid 999 in the Pod), with the paths the StatefulSet
would mount redirected into a temporary folder, and the my.cnf the builder makes for a MariaDB
cluster. MySQL's branch of the scripts needs the mysql image and is exercised by the e2e tests.
"""

from __future__ import annotations

import datetime as dt
import os
import pwd
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
from pathlib import Path

import pymysql
import pytest

from mysql_operator import manifests as m
from mysql_operator import tls
from mysql_operator.api import parse
from mysql_operator.db import accounts, seed_progress
from mysql_operator.db import grant_plans
from mysql_operator.db.flavor import Flavor
from tests.support.ports import free_port
from tests.support.wait import wait_for

pytestmark = pytest.mark.skipif(
    any(shutil.which(b) is None for b in ("mariadbd", "mariadb-install-db", "mariadb", "mariadb-admin")),
    reason="needs Debian's mariadb-server and mariadb-client (apt-get install mariadb-server)",
)

PASSWORDS = {
    "MYSQL_ROOT_PASSWORD": "r00t'quote\"dq\\bs$dollar",
    "MYSQL_OPERATOR_PASSWORD": "op\"er'ator\\pw",
    "MYSQL_REPLICATION_PASSWORD": "repl-pw-1",
    "MYSQL_APP_PASSWORD": "app pw with spaces",
    "MYSQL_BACKUP_PASSWORD": "backup'pw",
    "MYSQL_RESTORE_PASSWORD": "restore-pw",
    "MYSQL_SQL_PASSWORD": "sql\\objects'pw",
}


@pytest.fixture
def env(tmp_path_factory):
    root = Path(tempfile.mkdtemp(prefix="mysqlop-scripts-"))  # short: socket paths are limited
    c = parse(
        {
            "metadata": {"name": "db", "namespace": "prod"},
            "spec": {
                "instances": 3,
                "flavor": "mariadb",
                "database": {"name": "shop", "user": "shopper"},
                "restore": {"fromBackup": {"name": "nightly"}},
            },
        }
    )
    cm = m.config_map(c)["data"]
    # the init container's plain values (users, privileges) as the StatefulSet sets them
    init = next(
        x
        for x in m.statefulset(c)["spec"]["template"]["spec"]["initContainers"]
        if x["name"] == "init-datadir"
    )
    plain = {v["name"]: v["value"] for v in init["env"] if "value" in v}
    config = root / "config"
    config.mkdir()
    # the Secret <name>-tls as the Pod mounts it: a certificate from the cluster's CA
    tls_dir = root / "tls"
    tls_dir.mkdir()
    ca = tls.new_ca("db", dt.datetime.now(dt.timezone.utc))
    # (and localhost: a backup Job here reaches the servers by that name, verifying it)
    cert = tls.server_certificate(ca, [*m.server_dns_names(c), "localhost"], dt.datetime.now(dt.timezone.utc))
    (root / "ca.key").write_text(ca.key_pem)  # (a test issues the restore Job's certificate)
    for name, text in (("ca.crt", ca.cert_pem), ("tls.crt", cert.cert_pem), ("tls.key", cert.key_pem)):
        (tls_dir / name).write_text(text)
        (tls_dir / name).chmod(0o644)
    for name, text in cm.items():
        (config / name).write_text(text.replace(m.TLS_DIR, str(tls_dir)))
    (root / "volume").mkdir()
    (root / "run").mkdir()
    user = None
    if os.geteuid() == 0:  # run as a user without privileges, as in the Pod
        user = pwd.getpwnam("nobody")
        for p in (root / "volume", root / "run"):
            os.chown(p, user.pw_uid, user.pw_gid)
        os.chmod(root, 0o755)
    e = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin",
        "HOME": str(root),
        "MYSQL_OPERATOR_FLAVOR": "mariadb",
        "MYSQL_OPERATOR_DATA_ROOT": str(root / "volume"),
        "MYSQL_OPERATOR_RUN_DIR": str(root / "run"),
        "MYSQL_OPERATOR_CONFIG_DIR": str(config),
        "MYSQL_OPERATOR_USER": m.OPERATOR_USER,
        "MYSQL_REPLICATION_USER": m.REPLICATION_USER,
        "MYSQL_APP_DATABASE": "shop",
        "MYSQL_APP_USER": "shopper",
        **plain,
        **PASSWORDS,
    }
    procs: list[subprocess.Popen] = []
    yield root, config, e, user, procs
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(60)
    shutil.rmtree(root, ignore_errors=True)


def run(script: Path, env: dict, user, *args, check=True) -> subprocess.CompletedProcess:
    argv = ["/bin/bash", str(script), *args]
    if user is not None:
        argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", *argv]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"{script.name} {' '.join(args)} exited {r.returncode}: {r.stderr[-3000:]}")
    return r


def start(config: Path, env: dict, user, procs, port: int, pod: str) -> subprocess.Popen:
    argv = [
        "/bin/bash",
        str(config / "start.sh"),
        "--bind-address=127.0.0.1",
        "--innodb-buffer-pool-size=16M",
    ]
    if user is not None:
        argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", *argv]
    server_env = {k: v for k, v in env.items() if k != "MYSQL_ROOT_PASSWORD"}
    server_env.update(
        {
            "POD_NAME": pod,
            "POD_NAMESPACE": "prod",
            "HEADLESS_SERVICE": "db-headless",
            "MYSQL_OPERATOR_PORT": str(port),
        }
    )
    p = subprocess.Popen(
        argv, env=server_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    procs.append(p)
    return p


def connect(port, user, password):
    return pymysql.connect(
        host="127.0.0.1", port=port, user=user, password=password, connect_timeout=3, autocommit=True
    )


def test_init_start_and_probes_on_a_real_mariadb(env):
    root, config, e, user, procs = env
    first = run(config / "init.sh", e, user)
    datadir = root / "volume" / "data"
    assert (datadir / "mysql").is_dir()
    assert not (root / "volume" / "data.initialising").exists()
    assert list((root / "run").iterdir()) == []  # bootstrap SQL and option file removed
    for pw in PASSWORDS.values():
        assert pw not in first.stdout + first.stderr

    # a second run never touches an initialised data directory
    marker = datadir / "marker"
    marker.write_text("keep")
    again = run(config / "init.sh", e, user)
    assert "already initialised" in again.stderr and marker.read_text() == "keep"

    port = free_port()
    proc = start(config, e, user, procs, port, pod="db-2")

    def up():
        assert proc.poll() is None, proc.stderr.read().decode(errors="replace")[-2000:]
        return connect(port, m.OPERATOR_USER, PASSWORDS["MYSQL_OPERATOR_PASSWORD"])

    conn = wait_for(up, 60, "the server started by start.sh to accept the operator's account")
    with conn.cursor() as cur:
        cur.execute(
            "SELECT @@server_id, @@read_only, @@gtid_strict_mode, @@log_bin, @@log_slave_updates,"
            " @@binlog_format, @@report_host, @@gtid_binlog_pos, @@rpl_semi_sync_master_wait_point"
        )
        row = cur.fetchone()
    assert row == (3, 1, 1, 1, 1, "ROW", "db-2.db-headless.prod.svc", "", "AFTER_SYNC")

    app = connect(port, "shopper", PASSWORDS["MYSQL_APP_PASSWORD"])
    with app.cursor() as cur:
        cur.execute("SHOW DATABASES")
        assert "shop" in {r[0] for r in cur.fetchall()}
    repl = connect(port, m.REPLICATION_USER, PASSWORDS["MYSQL_REPLICATION_PASSWORD"])
    repl.close()
    with pytest.raises(pymysql.err.OperationalError):  # root is local-only
        connect(port, "root", PASSWORDS["MYSQL_ROOT_PASSWORD"])

    client_cnf = root / "run" / "client.cnf"
    assert oct(client_cnf.stat().st_mode & 0o777) == "0o600"
    probe_env = {k: v for k, v in e.items() if not k.endswith("PASSWORD")}
    assert run(config / "probe.sh", probe_env, user, "alive").returncode == 0
    assert run(config / "probe.sh", probe_env, user, "ready").returncode == 0
    assert run(config / "probe.sh", probe_env, user, "bogus", check=False).returncode == 2
    # the operator password rotated (ALTER USER) after the container started: still ready
    op = connect(port, m.OPERATOR_USER, PASSWORDS["MYSQL_OPERATOR_PASSWORD"])
    with op.cursor() as cur:
        cur.execute("ALTER USER CURRENT_USER() IDENTIFIED BY %s", ("rotated-Op-pw-2",))
    op.close()
    assert run(config / "probe.sh", probe_env, user, "ready").returncode == 0
    assert run(config / "probe.sh", probe_env, user, "alive").returncode == 0

    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(60)
    assert run(config / "probe.sh", probe_env, user, "ready", check=False).returncode != 0


def test_init_refuses_to_run_without_a_password(env):
    root, config, e, user, _ = env
    e = {**e, "MYSQL_REPLICATION_PASSWORD": ""}
    r = run(config / "init.sh", e, user, check=False)
    assert r.returncode == 1
    assert "MYSQL_REPLICATION_PASSWORD is empty" in r.stderr
    assert not (root / "volume" / "data").exists()


@pytest.mark.parametrize("bad", ["first\nhost=evil", "trailing\r"])
def test_start_refuses_an_operator_password_with_a_line_break(env, bad):
    root, config, e, user, _ = env
    e = {**e, "MYSQL_OPERATOR_PASSWORD": bad, "POD_NAME": "db-0"}
    r = run(config / "start.sh", e, user, check=False)
    assert r.returncode == 1
    assert "MYSQL_OPERATOR_PASSWORD contains a line break" in r.stderr
    assert bad.strip() not in r.stdout + r.stderr and "evil" not in r.stderr
    assert not (root / "run" / "client.cnf").exists()


def _serve(config, env, user, procs) -> int:
    """Start the initialised server with start.sh; its port once the operator's account logs in."""
    port = free_port()
    proc = start(config, env, user, procs, port, pod="db-0")

    def up():
        assert proc.poll() is None, proc.stderr.read().decode(errors="replace")[-2000:]
        return connect(port, m.OPERATOR_USER, PASSWORDS["MYSQL_OPERATOR_PASSWORD"])

    wait_for(up, 60, "the server started by start.sh").close()
    return port


def _show_grants(port, user):
    conn = connect(port, m.OPERATOR_USER, PASSWORDS["MYSQL_OPERATOR_PASSWORD"])
    with conn.cursor() as cur:
        cur.execute("SHOW GRANTS FOR %s@'%%'", (user,))
        return grant_plans.parse_show_grants([r[0] for r in cur.fetchall()], Flavor.MARIADB)


def test_init_gives_every_account_exactly_its_documented_privileges(env):
    root, config, e, user, procs = env
    run(config / "init.sh", e, user)
    port = _serve(config, e, user, procs)
    v = Flavor.MARIADB
    want = {
        m.OPERATOR_USER: accounts.operator_grants(v, "shop"),
        m.REPLICATION_USER: accounts.replication_grants(v),
        m.BACKUP_USER: accounts.backup_grants(v),
        m.SQL_USER: accounts.sql_grants(v),
        "shopper": accounts.app_grants(v, "shop"),
    }
    for name, grants in want.items():
        assert _show_grants(port, name) == grant_plans.expected(grants), name
    assert "ALL PRIVILEGES" not in _show_grants(port, m.OPERATOR_USER)["*.*"][0]
    # the restore account: ALL on *.* but what restore_revokes takes back, WITH GRANT OPTION (it
    # grants the load account its databases; no dump runs as it)
    held, option = _show_grants(port, m.RESTORE_USER)["*.*"]
    (revoked,) = accounts.restore_revokes(v)
    assert option and not held & set(revoked.privileges), held
    assert {"SUPER", "CREATE", "INSERT", "SET USER", "EVENT", "TRIGGER", "CREATE ROUTINE"} <= held, held
    for name, key in (
        (m.BACKUP_USER, "MYSQL_BACKUP_PASSWORD"),
        (m.RESTORE_USER, "MYSQL_RESTORE_PASSWORD"),
        (m.SQL_USER, "MYSQL_SQL_PASSWORD"),
    ):
        connect(port, name, PASSWORDS[key]).close()


def test_init_skips_the_backup_restore_and_sql_accounts_without_their_passwords(env):
    root, config, e, user, procs = env
    skipped = ("MYSQL_BACKUP_PASSWORD", "MYSQL_RESTORE_PASSWORD", "MYSQL_SQL_PASSWORD")
    e = {k: v for k, v in e.items() if k not in skipped}
    run(config / "init.sh", e, user)
    conn = connect(_serve(config, e, user, procs), m.OPERATOR_USER, PASSWORDS["MYSQL_OPERATOR_PASSWORD"])
    with conn.cursor() as cur:
        cur.execute("SELECT User FROM mysql.user WHERE User LIKE 'mysql-operator%'")
        assert {r[0] for r in cur.fetchall()} == {m.OPERATOR_USER}


def test_init_refuses_to_run_without_the_privilege_lists(env):
    root, config, e, user, _ = env
    r = run(config / "init.sh", {**e, "MYSQL_OPERATOR_GRANTS": ""}, user, check=False)
    assert r.returncode == 1 and "MYSQL_OPERATOR_GRANTS is empty" in r.stderr
    assert not (root / "volume" / "data").exists()


def _instance(root: Path, e: dict, user, name: str) -> dict:
    """The environment of another Pod's server: its own volume and run folder."""
    for p in (root / f"volume-{name}", root / f"run-{name}"):
        p.mkdir()
        if user is not None:
            os.chown(p, user.pw_uid, user.pw_gid)
    return {
        **e,
        "MYSQL_OPERATOR_DATA_ROOT": str(root / f"volume-{name}"),
        "MYSQL_OPERATOR_RUN_DIR": str(root / f"run-{name}"),
        "POD_NAME": name,
    }


def _up(config, env, user, procs, pod: str):
    port = free_port()
    proc = start(config, env, user, procs, port, pod=pod)

    def up():
        assert proc.poll() is None, proc.stderr.read().decode(errors="replace")[-3000:]
        return connect(port, m.OPERATOR_USER, PASSWORDS["MYSQL_OPERATOR_PASSWORD"])

    return port, proc, wait_for(up, 90, f"{pod}'s server started by start.sh")


def _rows(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def _one(conn, sql):
    return _rows(conn, sql)[0][0]


def _writable_donor(root: Path, config: Path, e: dict, user, procs):
    """db-0 started by start.sh, writable, with an empty table shop.t: its environment, port and
    a connection as the operator account."""
    donor = _instance(root, e, user, "db-0")
    run(config / "init.sh", donor, user)
    port, _, conn = _up(config, donor, user, procs, "db-0")
    with conn.cursor() as cur:
        cur.execute("SET GLOBAL read_only = OFF")
        cur.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    return donor, port, conn


def _seed_sidecar(root: Path, config: Path, donor: dict, recipient: dict, user, procs) -> tuple[dict, Path]:
    """The donor's seed sidecar (`seed.sh serve`) and a request for a copy for db-1, as the
    operator makes it: the recipient's init container's environment and the sidecar's log."""
    seed_port = free_port()
    # the credentials Secret's operator-password, mounted as a file in both Pods
    token, backup_token = root / "token", root / "backup-token"
    token.write_text(PASSWORDS["MYSQL_OPERATOR_PASSWORD"])
    backup_token.write_text(PASSWORDS["MYSQL_BACKUP_PASSWORD"])  # and its backup-password
    for f in (token, backup_token):
        f.chmod(0o644)
    serve_env = {
        **donor,
        "MYSQL_OPERATOR_SEED_PORT": str(seed_port),
        "MYSQL_OPERATOR_SEED_TOKEN_FILE": str(token),
        "MYSQL_OPERATOR_SEED_BACKUP_TOKEN_FILE": str(backup_token),
        "TMPDIR": str(Path(donor["MYSQL_OPERATOR_DATA_ROOT"])),
    }
    argv = ["/bin/bash", str(config / "seed.sh"), "serve"]
    if user is not None:
        argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", *argv]
    serve_log = root / "serve.log"
    with open(serve_log, "w") as log:
        procs.append(subprocess.Popen(argv, env=serve_env, stderr=log, start_new_session=True))
    wait_for(
        lambda: socket.create_connection(("127.0.0.1", seed_port), 1).close() or True, 30, "the donor sidecar"
    )
    (root / "reseed").mkdir()
    (root / "reseed" / "db-1").write_text("db-0.db-headless.prod.svc 20261125230000\n")
    receive_env = {
        **recipient,
        "MYSQL_OPERATOR_SEED_PORT": str(seed_port),
        "MYSQL_OPERATOR_SEED_ADDRESS": "127.0.0.1",
        "MYSQL_OPERATOR_RESEED_DIR": str(root / "reseed"),
        "MYSQL_OPERATOR_SEED_TOKEN_FILE": str(token),
        "MYSQL_OPERATOR_SEED_PROGRESS_PORT": str(free_port()),
    }
    return receive_env, serve_log


needs_seed_tools = pytest.mark.skipif(
    any(shutil.which(b) is None for b in ("socat", "mariadb-backup", "mbstream")),
    reason="needs socat and mariadb-backup (apt-get install socat mariadb-backup)",
)


@needs_seed_tools
def test_seed_replaces_a_replicas_data_by_a_copy_of_a_running_donor_which_then_replicates(env):
    """seed.sh on real servers: the donor's sidecar streams mariadb-backup over TLS to the
    recipient's init container, which replaces the recipient's data (an errant write included) by
    the prepared copy; start.sh gives the server the copy's GTID state once; the copy then
    replicates from the donor from exactly where it was made. While it works, the recipient's
    progress port tells the operator's reader how many bytes came of how many. A requester without
    the operator password gets nothing and the recipient keeps its data."""
    root, config, e, user, procs = env
    donor, donor_port, d = _writable_donor(root, config, e, user, procs)
    with d.cursor() as cur:
        cur.executemany("INSERT INTO shop.t VALUES (%s)", [(i,) for i in range(1, 301)])
        # ~40 MiB that does not compress: the copy's extraction and prepare outlast its transfer
        # (the connection closes before they end, and must not take them with it)
        cur.execute("CREATE TABLE shop.big (id INT AUTO_INCREMENT PRIMARY KEY, pad VARBINARY(1024))")
        cur.execute("SET SESSION max_recursive_iterations = 50000")
        cur.execute(
            "INSERT INTO shop.big (pad) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
            "WHERE i < 40000) SELECT RANDOM_BYTES(1000) FROM n"
        )
    recipient = _instance(root, e, user, "db-1")
    run(config / "init.sh", recipient, user)
    _, proc, r = _up(config, recipient, user, procs, "db-1")
    with r.cursor() as cur:  # an errant write: the copy discards it
        cur.execute("SET GLOBAL read_only = OFF")
        cur.execute("CREATE TABLE shop.errant (id INT PRIMARY KEY)")
    r.close()
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(60)

    receive_env, serve_log = _seed_sidecar(root, config, donor, recipient, user, procs)
    wrong = root / "wrong-token"
    wrong.write_text("not-it")
    wrong.chmod(0o644)
    refused = run(
        config / "seed.sh",
        {**receive_env, "MYSQL_OPERATOR_SEED_TOKEN_FILE": str(wrong)},
        user,
        "receive",
        check=False,
    )
    assert refused.returncode == 1 and "the donor refused the copy: ERR refused" in refused.stderr, (
        refused.stderr
    )
    assert "refused a copy to a requester that holds neither" in serve_log.read_text()
    assert (root / "volume-db-1" / "data" / "shop" / "errant.frm").exists()  # nothing replaced

    state_before = _one(d, "SELECT @@gtid_binlog_state")
    progress_port = int(receive_env["MYSQL_OPERATOR_SEED_PROGRESS_PORT"])
    readings: list[tuple[int, int]] = []
    receiving = threading.Event()

    def poll() -> None:  # what the operator's pass does each second, here as often as it can
        while not receiving.is_set():
            got = seed_progress.read("127.0.0.1", progress_port, 0.2)
            if got is not None:
                readings.append(got)
            receiving.wait(0.05)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        got = run(config / "seed.sh", receive_env, user, "receive", check=False)
    finally:
        receiving.set()
        poller.join()
    assert got.returncode == 0, f"{got.stderr}\n-- the donor's sidecar:\n{serve_log.read_text()}"
    # the donor's data directory (without its logs) is what was expected: the 40 MiB table and
    # more; the bytes received grew to about that
    assert readings, f"the recipient's progress port never answered during the copy:\n{got.stderr}"
    assert "was not served" not in got.stderr, got.stderr
    totals = {total for _, total in readings}
    assert len(totals) == 1 and totals.pop() > 40 * 2**20, readings
    assert max(c for c, _ in readings) > 40 * 2**20, readings
    assert seed_progress.read("127.0.0.1", progress_port) is None  # closed with the copy done
    # the old data was set aside and removed while the copy arrived: none of it is left
    assert sorted(p.name for p in (root / "volume-db-1").iterdir() if p.name.startswith("data")) == ["data"]
    assert not (root / "volume-db-1" / "data" / "shop" / "errant.frm").exists()
    for pw in PASSWORDS.values():
        assert pw not in got.stdout + got.stderr
    again = run(config / "seed.sh", receive_env, user, "receive")
    assert "in place already" in again.stderr
    with d.cursor() as cur:  # written after the copy: replication brings them
        cur.executemany("INSERT INTO shop.t VALUES (%s)", [(i,) for i in range(301, 401)])

    run(config / "init.sh", recipient, user)  # an initialised data directory: untouched
    _, _, r = _up(config, recipient, user, procs, "db-1")
    assert _one(r, "SELECT COUNT(*) FROM shop.t") == 300
    assert _one(r, "SELECT COUNT(*) FROM shop.big") == 40000
    assert _one(r, "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'errant'") == 0
    assert _one(r, "SELECT @@gtid_binlog_state") == state_before
    assert _one(r, "SELECT @@gtid_slave_pos") == _one(r, "SELECT @@gtid_binlog_pos") == state_before
    assert not (root / "volume-db-1" / "reseed-init.sql").exists()  # given to one start only
    with r.cursor() as cur:
        cur.execute(
            "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %s, MASTER_USER = %s, "
            "MASTER_PASSWORD = %s, MASTER_USE_GTID = slave_pos",
            (donor_port, m.REPLICATION_USER, PASSWORDS["MYSQL_REPLICATION_PASSWORD"]),
        )
        cur.execute("START SLAVE")
    wait_for(
        lambda: _one(r, "SELECT COUNT(*) FROM shop.t") == 400, 30, "the copy to replicate from the donor"
    )
    assert _one(r, "SELECT @@gtid_binlog_state") == _one(d, "SELECT @@gtid_binlog_state")


@needs_seed_tools
def test_seed_from_a_primary_whose_commits_wait_for_an_acknowledgement_only_the_copy_can_give(env):
    """A semi-sync primary (never falling back to asynchronous replication) whose replicas are all
    gone is the only donor left, and its clients' commits wait for an acknowledgement: a copy
    waits for commits to end, so neither would ever end. The donor closes those connections:
    each client gets an error, none an acknowledgement; the copy completes, with their rows."""
    root, config, e, user, procs = env
    donor, port, d = _writable_donor(root, config, e, user, procs)
    with d.cursor() as cur:
        cur.execute("SET GLOBAL rpl_semi_sync_master_wait_point = 'AFTER_SYNC'")
        cur.execute("SET GLOBAL rpl_semi_sync_master_timeout = 4294967295")
        cur.execute("SET GLOBAL rpl_semi_sync_master_enabled = ON")
    outcomes: dict[int, str] = {}

    def write(k: int) -> None:
        conn = connect(port, m.OPERATOR_USER, PASSWORDS["MYSQL_OPERATOR_PASSWORD"])
        try:
            with conn.cursor() as cur:
                cur.execute("INSERT INTO shop.t VALUES (%s)", (k,))
            outcomes[k] = "acknowledged"
        except pymysql.err.OperationalError as err:
            outcomes[k] = f"error {err.args[0]}"

    writers = [threading.Thread(target=write, args=(k,)) for k in range(1, 4)]
    for w in writers:
        w.start()
    waiting = (
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE LIKE 'Waiting for semi-sync ACK%'"
    )
    wait_for(lambda: _one(d, waiting) >= 1, 30, "a commit waiting for an acknowledgement")
    recipient = _instance(root, e, user, "db-1")
    receive_env, serve_log = _seed_sidecar(root, config, donor, recipient, user, procs)

    got = run(config / "seed.sh", receive_env, user, "receive", check=False)
    assert got.returncode == 0, f"{got.stderr}\n-- the donor's sidecar:\n{serve_log.read_text()}"
    for w in writers:
        w.join(30)
    assert outcomes and all(o.startswith("error") for o in outcomes.values()), outcomes
    assert "closed connection" in serve_log.read_text() and "not an acknowledgement" in serve_log.read_text()
    run(config / "init.sh", recipient, user)
    _, _, r = _up(config, recipient, user, procs, "db-1")
    state = _one(d, "SELECT @@gtid_binlog_state")
    assert _one(r, "SELECT @@gtid_binlog_state") == state  # nothing the donor wrote is missing
    copied = {row[0] for row in _rows(r, "SELECT id FROM shop.t")}
    assert copied == {row[0] for row in _rows(d, "SELECT id FROM shop.t")} and copied, copied


@needs_seed_tools
def test_a_donor_gives_another_namespaces_pod_no_byte_of_its_copy(env):
    """Issue 53: clusters whose certificates come from one issuer (a cert-manager ClusterIssuer
    shared by tenants). A Pod of another namespace - a valid certificate of that issuer for the
    same cluster name, its own cluster's operator or backup password - asks this cluster's
    donor sidecar for a copy: "ERR refused" and nothing else, and the donor says why."""
    root, config, e, user, procs = env
    donor, _, _ = _writable_donor(root, config, e, user, procs)
    receive_env, serve_log = _seed_sidecar(root, config, donor, _instance(root, e, user, "db-1"), user, procs)
    port = int(receive_env["MYSQL_OPERATOR_SEED_PORT"])
    ca = tls.KeyPair((root / "tls" / "ca.crt").read_text(), (root / "ca.key").read_text())
    other = parse(
        {"metadata": {"name": "db", "namespace": "tenant-b"}, "spec": {"instances": 3, "flavor": "mariadb"}}
    )
    pair = tls.server_certificate(ca, m.server_dns_names(other), dt.datetime.now(dt.timezone.utc))
    client_tls = root / "tenant-b"
    client_tls.mkdir()
    (client_tls / "tls.crt").write_text(pair.cert_pem)
    (client_tls / "tls.key").write_text(pair.key_pem)
    ctx = ssl.create_default_context(cafile=str(root / "tls" / "ca.crt"))
    ctx.load_cert_chain(str(client_tls / "tls.crt"), str(client_tls / "tls.key"))
    ctx.check_hostname = False  # (the donor's certificate names prod's Pods: verified by its CA here)

    def ask(line: str) -> bytes:
        got = b""
        with socket.create_connection(("127.0.0.1", port), 10) as raw, ctx.wrap_socket(raw) as c:
            c.sendall(line.encode() + b"\n")
            while piece := c.recv(65536):
                got += piece
        return got

    for line in ("tenant-b's operator password", "tenant-b's backup password", ""):
        assert ask(line) == b"ERR refused\n"
    assert serve_log.read_text().count("refused a copy to a requester that holds neither") == 3


@needs_seed_tools
def test_a_physical_backup_of_mariadb_is_the_donor_sidecars_copy_streamed_to_the_bucket(env, s3server):
    """method physical on MariaDB: the backup Job asks the Pod's seed-donor sidecar for a copy
    with the backup account's password (over TLS, the certificate verified for the name it
    connects to), reads its xbstream as it passes (checksums, the copy's binary log position)
    and uploads it compressed. The object, extracted and prepared, is a data directory a server
    starts on with the donor's rows; the manifest's GTID position is the copy's. A sidecar
    that does not hold the backup account's password refuses, and nothing is stored."""
    from mysql_operator.backup.commands import Endpoint
    from mysql_operator.backup.backup_types import BackupError, BackupRequest, Candidate
    from mysql_operator.backup.run import run_backup
    from tests.support.backups import creds, s3cfg

    root, config, e, user, procs = env
    donor, donor_port, d = _writable_donor(root, config, e, user, procs)
    with d.cursor() as cur:
        cur.executemany("INSERT INTO shop.t VALUES (%s)", [(i,) for i in range(1, 1001)])
    receive_env, _ = _seed_sidecar(root, config, donor, _instance(root, e, user, "db-1"), user, procs)
    s3 = s3cfg(s3server, s3server.create_bucket("bk-mariadb-physical"))

    def request(name: str) -> BackupRequest:
        return BackupRequest(
            cluster="db",
            namespace="prod",
            backup=name,
            s3=s3,
            tls_ca=str(root / "tls" / "ca.crt"),
            candidates=(Candidate("db-0", Endpoint("localhost", donor_port, m.BACKUP_USER)),),
            method="physical",
            seed_port=int(receive_env["MYSQL_OPERATOR_SEED_PORT"]),
        )

    # a sidecar that does not know this password (a Secret of the user's without backup-password)
    (root / "backup-token").write_text("")
    with pytest.raises(BackupError, match="refused the copy"):
        run_backup(request("refused"), creds(s3server), PASSWORDS["MYSQL_BACKUP_PASSWORD"])
    assert (
        s3server.client().list_objects_v2(Bucket=s3.bucket, Prefix="backups/db/refused").get("KeyCount") == 0
    )
    (root / "backup-token").write_text(PASSWORDS["MYSQL_BACKUP_PASSWORD"])

    position = _one(d, "SELECT @@gtid_binlog_pos")
    got = run_backup(request("p1"), creds(s3server), PASSWORDS["MYSQL_BACKUP_PASSWORD"])

    assert got.method == "physical" and got.data_key.endswith("/backup.xbstream.zst")
    assert got.gtid_position == position and got.flavor == "mariadb"
    assert got.tables is None and got.tables_note is None  # not asked (a cluster without drills)
    body = s3server.client().get_object(Bucket=s3.bucket, Key=got.data_key)["Body"].read()
    assert got.compressed_size == len(body)
    stream = subprocess.run(["zstd", "-dc"], input=body, capture_output=True, check=True).stdout
    assert got.uncompressed_size == len(stream)
    copy = root / "copy"
    copy.mkdir()
    subprocess.run(["mbstream", "-x", "-C", str(copy)], input=stream, check=True)
    subprocess.run(["mariadb-backup", "--prepare", f"--target-dir={copy}"], capture_output=True, check=True)
    if user is not None:
        subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(copy)], check=True)
    restored = _instance(root, e, user, "db-2")
    shutil.rmtree(Path(restored["MYSQL_OPERATOR_DATA_ROOT"]) / "data", ignore_errors=True)
    shutil.move(str(copy), Path(restored["MYSQL_OPERATOR_DATA_ROOT"]) / "data")
    _, _, r = _up(config, restored, user, procs, "db-2")
    assert _rows(r, "SELECT COUNT(*), SUM(id) FROM shop.t") == ((1000, 500500),)


@pytest.fixture
def mariadb_tools(tmp_path_factory):
    """The backup and restore Jobs' client-tools sidecar, from the MariaDB tool image's root (the
    host's series, 10.11: its mariadb-backup prepares the host donor's copies), serving a folder."""
    from tests.support.mysql import client_tools_sidecar, mysql_rootfs

    try:
        mysql_rootfs("mariadb-tools")
    except RuntimeError as e:
        pytest.skip(reason=f"no MariaDB tool image root: {e}")
    shared = tmp_path_factory.mktemp("tools")
    with client_tools_sidecar(shared, "mariadb-tools"):
        yield shared


@needs_seed_tools
def test_a_physical_backup_of_mariadb_restores_through_the_seed_init_container(
    env, s3server, monkeypatch, mariadb_tools
):
    """restore_all of a MariaDB physical backup: the restore Job serves the copy (TLS with its own
    certificate of the cluster's CA, only to clients presenting one) and each new instance's
    `seed` init container, asked for a "restore" copy, receives it, prepares it, and its server
    starts on it: the backup's rows, the backup's GTID position, the new cluster's accounts
    (an account only it had is there), the restore account gone, read-only again. A client
    without a certificate of the cluster gets nothing, nor does an instance that does not send the
    new cluster's operator password (the Job's $MYSQL_OPERATOR_SEED_TOKEN).

    Asked for its table digests (a cluster with drills), the backup Job's sidecar unpacked the copy
    as it streamed, prepared it and dumped a server started on it: the same tables, rows and
    digests as a logical backup of the same data records; the restore checks the primary against
    them before anything else writes (tablesChecked) and says where it spent its time."""
    from mysql_operator.backup.commands import Endpoint
    from mysql_operator.backup.restore_types import Donor, Source, Target
    from mysql_operator.backup.restore_job import restore_all
    from mysql_operator.backup.backup_types import BackupRequest, Candidate
    from mysql_operator.backup.run import run_backup
    from mysql_operator.backup.table_check import recorded_tables
    from tests.support.backups import creds, s3cfg

    root, config, e, user, procs = env
    donor, donor_port, d = _writable_donor(root, config, e, user, procs)
    with d.cursor() as cur:
        cur.executemany("INSERT INTO shop.t VALUES (%s)", [(i,) for i in range(1, 501)])
        cur.execute("CREATE TABLE shop.notes (id INT, note TEXT)")  # no primary key
        cur.execute("INSERT INTO shop.notes VALUES (1, 'it''s ü'), (2, NULL), (2, NULL)")
        cur.execute("CREATE TABLE shop.`odd``name` (id INT PRIMARY KEY)")
        cur.execute("CREATE USER 'reporting'@'%' IDENTIFIED BY 'from-the-backup'")
    receive_env, _ = _seed_sidecar(root, config, donor, _instance(root, e, user, "db-1"), user, procs)
    s3 = s3cfg(s3server, s3server.create_bucket("bk-mariadb-physical-restore"))
    ca = str(root / "tls" / "ca.crt")
    shutil.copy(ca, mariadb_tools / "ca.crt")  # the Job mounts the CA in its sidecar too

    def request(name: str, method: str) -> BackupRequest:
        return BackupRequest(
            cluster="db",
            namespace="prod",
            backup=name,
            s3=s3,
            tls_ca=str(mariadb_tools / "ca.crt"),
            tools_dir=str(mariadb_tools),
            candidates=(Candidate("db-0", Endpoint("localhost", donor_port, m.BACKUP_USER)),),
            method=method,
            seed_port=int(receive_env["MYSQL_OPERATOR_SEED_PORT"]),
            copy_digests=method == "physical",
        )

    m_ = run_backup(request("p1", "physical"), creds(s3server), PASSWORDS["MYSQL_BACKUP_PASSWORD"])
    logical = run_backup(request("l1", "logical"), creds(s3server), PASSWORDS["MYSQL_BACKUP_PASSWORD"])
    recorded = recorded_tables(m_, None)
    assert m_.tables_note is None, m_.tables_note
    assert recorded == recorded_tables(logical, None) and set(recorded) == {
        "shop.t",
        "shop.notes",
        "shop.odd`name",
    }, recorded
    assert (recorded["shop.t"].rows, recorded["shop.notes"].rows, recorded["shop.odd`name"].rows) == (
        500,
        3,
        0,
    )
    assert not [p for p in mariadb_tools.iterdir() if p.name.startswith("clone")]  # the copy removed
    with d.cursor() as cur:  # after the backup: not restored
        cur.execute("INSERT INTO shop.t VALUES (9999)")

    # the new cluster's instance, as its init step leaves it (with an account the backup lacks)
    new = _instance(root, e, user, "db-2")
    run(config / "init.sh", new, user)
    new_port, new_proc, n = _up(config, new, user, procs, "db-2")
    with n.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute("CREATE USER 'newonly'@'%' IDENTIFIED BY 'new-cluster'")
    n.close()
    # the restore Job's certificate: the cluster's CA, for the name the instances reach it at
    job_tls = root / "restore-tls"
    job_tls.mkdir()
    pair = tls.server_certificate(
        tls.KeyPair((root / "tls" / "ca.crt").read_text(), (root / "ca.key").read_text()),
        ["localhost"],
        dt.datetime.now(dt.timezone.utc),
    )
    for name, text in (
        ("ca.crt", (root / "tls" / "ca.crt").read_text()),
        ("tls.crt", pair.cert_pem),
        ("tls.key", pair.key_pem),
    ):
        (job_tls / name).write_text(text)
    job_port = free_port()
    restore_pw = PASSWORDS["MYSQL_RESTORE_PASSWORD"]
    # the new cluster's operator-password, from its credentials Secret (manifests restore_job)
    monkeypatch.setenv("MYSQL_OPERATOR_SEED_TOKEN", PASSWORDS["MYSQL_OPERATOR_PASSWORD"])
    result: dict = {}
    job = threading.Thread(
        target=lambda: result.update(
            restore_all(
                {"db-2": Target("localhost", new_port, m.RESTORE_USER, restore_pw, tls_ca=ca)},
                Source(s3, "db/p1"),
                creds(s3server),
                "shop",
                drop_account=True,
                donor=Donor("localhost", job_port, tls_dir=str(job_tls)),
                check_tables=True,
            )
        )
    )
    job.start()
    wait_for(
        lambda: socket.create_connection(("127.0.0.1", job_port), 1).close() or True, 60, "the Job's port"
    )
    # someone without a certificate of the cluster: refused at the handshake
    plain = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", job_port), 5) as raw:
        try:
            with plain.wrap_socket(raw, server_hostname="localhost") as c:
                c.sendall(b"x\n")
                answer = c.recv(100)
        except (ssl.SSLError, ConnectionError):
            answer = b""
    assert answer == b""

    # what the operator does: the request, then the Pod started again (its init container first)
    (root / "reseed" / "db-2").write_text("localhost 20261129000000 restore\n")
    os.killpg(new_proc.pid, signal.SIGTERM)
    new_proc.wait(60)
    seed_env = {
        **new,
        **{k: v for k, v in receive_env.items() if "SEED" in k or "RESEED" in k},
        "MYSQL_OPERATOR_SEED_PORT": str(job_port),
    }
    wrong = root / "wrong-token"
    wrong.write_text("not-the-operator-password")
    wrong.chmod(0o644)
    refused = run(
        config / "seed.sh",
        {**seed_env, "MYSQL_OPERATOR_SEED_TOKEN_FILE": str(wrong)},
        user,
        "receive",
        check=False,
    )
    assert refused.returncode == 1 and "the donor refused the copy: ERR refused" in refused.stderr, (
        refused.stderr
    )
    got = run(config / "seed.sh", seed_env, user, "receive", check=False)
    assert got.returncode == 0, got.stderr
    proc = start(config, new, user, procs, new_port, pod="db-2")  # where the Job reaches it
    job.join(300)
    assert proc.poll() is None
    r = connect(new_port, m.OPERATOR_USER, PASSWORDS["MYSQL_OPERATOR_PASSWORD"])

    assert result.get("ok"), result
    assert result["tablesChecked"] == {"tables": 3, "rows": 503}, result
    assert set(result["phases"]) == {"copy", "checkTables"}, result
    assert _rows(r, "SELECT COUNT(*), MAX(id) FROM shop.t") == ((500, 500),)
    assert _one(r, "SELECT @@gtid_binlog_pos") == m_.gtid_position == result["gtidPosition"]
    users = {u for (u,) in _rows(r, "SELECT User FROM mysql.user")}
    assert {"reporting", "newonly"} <= users and m.RESTORE_USER not in users
    assert _one(r, "SELECT @@read_only") == 1


def test_a_commit_waiting_for_an_acknowledgement_is_never_answered_ok_when_the_container_stops(env):
    """A stopping container never acknowledges a commit no replica has (MariaDB's side of
    tests/integration/test_start_script_mysql.py): SIGTERM to start.sh alone, as the kubelet sends
    it to PID 1, while a client's commit waits for an acknowledgement no replica can give; the
    client gets an error. MariaDB 10.11 answered it with error 2013 with the TERM trap's fence of
    the clients removed too: this guards the behaviour, it does not reproduce a loss."""
    root, config, e, user, procs = env
    _, port, d = _writable_donor(root, config, e, user, procs)
    server = procs[-1]  # start.sh, the container's PID 1
    with d.cursor() as cur:
        cur.execute("SET GLOBAL rpl_semi_sync_master_wait_point = 'AFTER_SYNC'")
        cur.execute("SET GLOBAL rpl_semi_sync_master_timeout = 4294967295")  # never falls back
        cur.execute("SET GLOBAL rpl_semi_sync_master_enabled = ON")  # and no replica: waits for ever
    outcome: list[str] = []

    def write() -> None:
        conn = connect(port, "shopper", PASSWORDS["MYSQL_APP_PASSWORD"])  # a client of the application
        try:
            with conn.cursor() as cur:
                cur.execute("INSERT INTO shop.t VALUES (1)")
            outcome.append("acknowledged")
        except pymysql.err.OperationalError as err:
            outcome.append(f"error {err.args[0]}")

    writer = threading.Thread(target=write)
    writer.start()
    waiting = (
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE LIKE 'Waiting for semi-sync ACK%'"
    )
    wait_for(lambda: _one(d, waiting) == 1, 30, "the commit waiting for an acknowledgement")
    d.close()
    os.kill(server.pid, signal.SIGTERM)
    writer.join(60)
    server.wait(60)
    assert outcome and outcome[0].startswith("error"), outcome
