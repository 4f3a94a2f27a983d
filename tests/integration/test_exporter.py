"""The metrics sidecar on real servers of both flavors: the shipped sh/exporter.sh, run by
busybox's sh as in the exporter image, runs the real mysqld_exporter (built from its Go module)
over the server's socket as the monitoring account the operator's account creates with exactly
db/accounts.py monitor_grants. Every collector the sidecar enables succeeds with those
privileges, and a rotated password (the Secret's file changes, ALTER USER on the server) is picked
up without restarting the container."""

from __future__ import annotations

import os
import re
import subprocess
import urllib.request

import pytest

from mysql_operator.db import accounts

from mysql_operator.db import grant_plans
from mysql_operator.db.instance import Instance
from mysql_operator.manifests import common as m
from tests.support.controlplane import bin_dir, versions
from tests.support.mariadb import OPERATOR_USER
from tests.support.ports import free_port
from tests.support.wait import wait_for

SCRIPT = os.path.join(os.path.dirname(m.__file__), "sh", "exporter.sh")
# the collectors sh/exporter.sh turns on
COLLECTORS = {
    "global_status",
    "global_variables",
    "slave_status",
    "info_schema.innodb_metrics",
    "info_schema.processlist",
    "binlog_size",
    "info_schema.innodb_cmp",
    "info_schema.innodb_cmpmem",
}


def exporter_binary() -> str:
    return str(bin_dir() / f"mysqld-exporter-{versions()['MYSQLD_EXPORTER_VERSION']}" / "mysqld_exporter")


@pytest.fixture(scope="module")
def server(writable_server):
    reason = f"mysqld_exporter is not built ({exporter_binary()}): run hack/build-binaries.sh exporter"
    if not os.access(exporter_binary(), os.X_OK):
        pytest.skip(reason=reason)
    if not os.access("/bin/busybox", os.X_OK):
        pytest.skip(reason="no /bin/busybox (the exporter image's shell): hack/install-deps.sh images")
    return writable_server


def scrape(port: int) -> dict[str, float]:
    """The exporter's samples: `name{labels}` -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def collector_results(samples: dict[str, float]) -> dict[str, float]:
    pattern = re.compile(r'^mysql_exporter_collector_success\{collector="collect\.([^"]+)"\}$')
    return {m_.group(1): v for k, v in samples.items() if (m_ := pattern.match(k))}


def test_every_collector_succeeds_as_the_monitoring_account_and_a_rotation_is_picked_up(server, tmp_path):
    operator = Instance(server.host, server.port, OPERATOR_USER, server.admin_password, name=server.name)
    grants = accounts.monitor_grants(server.flavor)
    changes = operator.ensure_user(m.MONITOR_USER, "localhost", "first-pw;#'\"x", grants)
    assert changes[0] == "created"
    shown = server.query("SHOW GRANTS FOR %s@%s", (m.MONITOR_USER, "localhost"))
    assert grant_plans.parse_show_grants([r[0] for r in shown], server.flavor) == grant_plans.expected(grants)

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "mysqld.sock").symlink_to(server.root / "mysqld.sock")  # the host's path of it
    password_file = tmp_path / "password"
    password_file.write_text("first-pw;#'\"x")
    port = free_port()
    # only busybox's applets on the PATH, as in the exporter image (the host's coreutils would
    # hide a program the image lacks: cksum once)
    applets = tmp_path / "bin"
    applets.mkdir()
    listed = subprocess.run(["/bin/busybox", "--list"], capture_output=True, text=True, check=True).stdout
    for applet in listed.split():
        (applets / applet).symlink_to("/bin/busybox")
    env = {
        "PATH": str(applets),
        "MYSQL_OPERATOR_RUN_DIR": str(run_dir),
        "MONITOR_PASSWORD_FILE": str(password_file),
        "MONITOR_USER": m.MONITOR_USER,
        "MYSQLD_EXPORTER": exporter_binary(),
        "EXPORTER_PORT": str(port),
    }
    log = open(tmp_path / "exporter.log", "wb")
    # busybox's sh: the exporter image's only shell (the script is POSIX)
    proc = subprocess.Popen(["/bin/busybox", "sh", SCRIPT], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:

        def up() -> dict[str, float] | None:
            samples = scrape(port)
            return samples if samples.get("mysql_up") == 1 else None

        def describe() -> str:
            return (tmp_path / "exporter.log").read_text()[-3000:]

        samples = wait_for(up, 30, "mysql_up 1 as the monitoring account", describe=describe)
        results = collector_results(samples)
        assert COLLECTORS <= set(results), describe()
        assert {c: v for c, v in results.items() if v != 1} == {}, describe()
        assert samples["mysql_global_status_queries"] > 0  # its own, at least (uptime may still be 0 s)
        assert "mysql_global_variables_read_only" in samples

        # a rotation: the server gets the new password, then the Secret's file changes
        operator.ensure_user(m.MONITOR_USER, "localhost", "second pw\\n", grants)
        wait_for(
            lambda: scrape(port).get("mysql_up") == 0,
            30,
            "mysql_up 0 with the old password",
            describe=describe,
        )
        password_file.write_text("second pw\\n")
        wait_for(up, 30, "mysql_up 1 again with the rotated password", describe=describe)
        assert "monitor-password changed" in describe()
        assert "first-pw" not in describe() and "second pw" not in describe()  # never logged
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    assert proc.returncode == 0  # TERM ends it cleanly
