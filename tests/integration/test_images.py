"""The locally built images (hack/build-images.sh) run under the project's containerd.

Real components only: images built with debootstrap + buildah, a containerd 1.6 started by this
module with its own root and socket (tests/support/containerd.py), containers run by runc, a real
MariaDB server reached with pymysql over loopback. Skips, with the reason, only where containerd
cannot run here.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import uuid
from pathlib import Path

import pymysql
import pytest

from tests.support.containerd import (
    NAMESPACE,
    PAUSE_IMAGE,
    Containerd,
    build_images,
    cannot_run_reason,
    containerd_config,
    parse_build_output,
    to_toml,
)
from tests.support.ports import free_port
from tests.support.wait import wait_for

REPO = Path(__file__).resolve().parents[2]
ROOT_PASSWORD = "r00t'pa\"ss\\word"  # quotes and a backslash: the entrypoint must escape them
APP_PASSWORD = "app-pa$$'word"


def report(name: str, seconds: float) -> None:
    print(f"\n[timing] {name}: {seconds:.1f}s", file=sys.stderr)


# --- pure: the config and the build script's output format -----------------------------------
def test_containerd_config_is_valid_toml_with_the_project_settings(tmp_path):
    cfg = containerd_config(tmp_path)
    parsed = tomllib.loads(to_toml(cfg))
    assert parsed == cfg
    cri = parsed["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == PAUSE_IMAGE
    assert cri["containerd"]["snapshotter"] == "overlayfs"
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    assert cri["cni"]["bin_dir"] == "/usr/lib/cni"
    for path in (parsed["root"], parsed["state"], parsed["grpc"]["address"], cri["cni"]["conf_dir"]):
        assert path.startswith(str(tmp_path) + "/"), path


def test_build_output_parsing_names_a_bad_line():
    images = parse_build_output("pause localhost/pause:catatonit /c/pause-1.oci.tar\n\n")
    assert images["pause"].ref == "localhost/pause:catatonit"
    assert str(images["pause"].archive) == "/c/pause-1.oci.tar"
    with pytest.raises(ValueError, match="NAME REF ARCHIVE"):
        parse_build_output("[build-images] progress that leaked to stdout\n")


# --- real: build, import, run ------------------------------------------------------------------
@pytest.fixture(scope="module")
def images():
    reason = cannot_run_reason()
    if reason:
        if os.environ.get("CI") and reason.startswith("missing"):
            pytest.fail(f"{reason} (CI must install them: hack/install-deps.sh images)")
        print(f"\nSKIP test_images: {reason}", file=sys.stderr)
        pytest.skip(reason)
    started = time.monotonic()
    built = build_images()
    report("build-images.sh all (as found: cold or warm)", time.monotonic() - started)
    return built


@pytest.fixture(scope="module")
def containerd(images, tmp_path_factory):
    cd = Containerd(tmp_path_factory.mktemp("ctd"))
    cd.start()
    report("containerd ready", cd.timings["ready"])
    try:
        started = time.monotonic()
        cd.import_images(images)
        report("import all images", time.monotonic() - started)
        yield cd
    finally:
        cd.stop()
        assert not cd.shim_pids(), f"shims of {cd.workdir} survived stop()"
        # Unpacked images and snapshots are about a gigabyte: keep only the config and the log.
        shutil.rmtree(cd.workdir / "root", ignore_errors=True)


def run(cd: Containerd, image: str, *args: str, env_file: Path | None = None, timeout: float = 120):
    """`ctr run --rm` in the foreground: (exit code, stdout+stderr)."""
    cid = f"t-{uuid.uuid4().hex[:10]}"
    opts = ["--rm", "--net-host"]
    if env_file:
        opts += ["--env-file", str(env_file)]
    proc = cd.ctr("-n", NAMESPACE, "run", *opts, image, cid, *args, check=False, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def task(cd: Containerd, cid: str) -> tuple[int, str] | None:
    """(pid, status) of a container's task, or None when it has none."""
    for line in cd.ctr("-n", NAMESPACE, "tasks", "list").stdout.splitlines()[1:]:
        fields = line.split()
        if fields and fields[0] == cid:
            return int(fields[1]), fields[2]
    return None


def remove_container(cd: Containerd, cid: str) -> None:
    cd.ctr("-n", NAMESPACE, "tasks", "kill", "-s", "SIGKILL", cid, check=False)
    wait_for(
        lambda: (
            task(cd, cid) is None
            or cd.ctr("-n", NAMESPACE, "tasks", "delete", cid, check=False).returncode == 0
        ),
        30,
        f"the task of {cid} to be deleted",
    )
    cd.ctr("-n", NAMESPACE, "containers", "delete", cid, check=False)


def test_every_image_is_imported_under_its_local_name_and_pinned(images, containerd):
    assert set(images) == {
        "base",
        "pause",
        "busybox",
        "exporter",
        "mariadb-tools",
        "mariadb-tools-11.8",
        "mysql-tools",
        "mariadb",
        "mariadb-11.8",
        "mysql",
        "operator",
    }
    refs = containerd.image_refs()
    for image in images.values():
        assert image.ref.startswith("localhost/")
        assert image.ref in refs
    listing = containerd.ctr("-n", NAMESPACE, "images", "list").stdout
    pinned = [line.split()[0] for line in listing.splitlines() if "io.cri-containerd.pinned=pinned" in line]
    assert set(pinned) >= {i.ref for i in images.values()}
    assert images["pause"].ref == PAUSE_IMAGE


def test_warm_rebuild_reuses_the_cached_archives(images):
    # The operator image is left out: its inputs are the package sources, which may change while
    # this runs in a shared checkout. Every other image depends only on this files.
    # The generous timeout covers waiting for the cache lock held by another session's build.
    names = ["base", "pause", "busybox", "mariadb"]
    started = time.monotonic()
    proc = subprocess.run(
        [str(REPO / "hack" / "build-images.sh"), *names], capture_output=True, text=True, timeout=1800
    )
    report("build-images.sh base pause busybox mariadb (warm)", time.monotonic() - started)
    assert proc.returncode == 0, proc.stderr
    assert parse_build_output(proc.stdout) == {n: images[n] for n in names}
    assert all(path.is_file() for path in (images[n].archive for n in names))
    assert "building" not in proc.stderr, proc.stderr


def test_busybox_image_has_the_shell_tools_the_provisioner_helper_uses(images, containerd):
    code, out = run(
        containerd,
        images["busybox"].ref,
        "sh",
        "-c",
        "mkdir -m 0777 -p /x/y && test -d /x/y && rm -rf /x && test ! -e /x && echo ok",
    )
    assert (code, out.strip()) == (0, "ok")
    code, _ = run(containerd, images["busybox"].ref, "sh", "-c", "test -e /definitely-missing")
    assert code != 0


def test_the_mariadb_images_have_the_client_names_their_official_ones_have(images, containerd):
    """mariadb:11.8 installs no mariadb-*-compat package (docs/official-images.md section 2): the
    mariadb-* names only; mariadb:10.11's packages keep the mysql* ones too."""
    mariadb = "mariadbd mariadb mariadb-admin mariadb-dump mariadb-binlog mariadb-backup mbstream socat"
    mysql = "mysql mysqladmin mysqldump mysqlbinlog mysqld mysql_install_db mysql_upgrade mysqld_safe"
    script = (
        f"for p in {mariadb}; do command -v $p >/dev/null || echo lacks $p; done; "
        f"for p in {mysql}; do command -v $p >/dev/null && echo has $p; done; echo checked"
    )
    code, out = run(containerd, images["mariadb-11.8"].ref, "sh", "-c", script)
    assert out.split() == ["checked"], out
    code, out = run(containerd, images["mariadb"].ref, "sh", "-c", script)
    assert out.split() == [w for p in mysql.split() for w in ("has", p)] + ["checked"], out


def image_config(archive: Path) -> dict:
    """The OCI image configuration (`config` of the config blob) of an archive's only image."""
    with tarfile.open(archive) as tar:

        def blob(digest: str) -> dict:
            return json.load(tar.extractfile(f"blobs/{digest.replace(':', '/')}"))

        (manifest,) = json.load(tar.extractfile("index.json"))["manifests"]
        return blob(blob(manifest["digest"])["config"]["digest"])["config"]


def test_exporter_image_is_upstreams_shape_and_runs_the_sidecar_script_with_its_sh(
    images, containerd, tmp_path
):
    """Like prom/mysqld-exporter: busybox, /bin/mysqld_exporter as the entrypoint, user nobody; the
    sidecar's script (sh/exporter.sh, POSIX) runs under its sh (no bash there) and finds the
    exporter."""
    config = image_config(images["exporter"].archive)
    assert config["Entrypoint"] == ["/bin/mysqld_exporter"] and config["User"] == "nobody"
    assert "9104/tcp" in config["ExposedPorts"]
    # (ctr takes the argument list whole, entrypoint included)
    code, out = run(containerd, images["exporter"].ref, "/bin/mysqld_exporter", "--version")
    assert code == 0 and "mysqld_exporter, version 0.16.0" in out, out
    # no password file yet: the script found mysqld_exporter, says what is missing, and waits
    env = tmp_path / "env"
    env.write_text("MYSQL_OPERATOR_RUN_DIR=/tmp\nMONITOR_PASSWORD_FILE=/tmp/none\n")
    script = (REPO / "mysql_operator" / "manifests" / "sh" / "exporter.sh").read_text()
    code, out = run(
        containerd, images["exporter"].ref, "timeout", "3", "sh", "-c", f"id -u; {script}", env_file=env
    )
    assert out.split()[0] == "65534", out  # the image's user: nobody
    assert "no monitor-password in the credentials Secret yet" in out, out
    assert "has no mysqld_exporter" not in out, out
    code, out = run(containerd, images["exporter"].ref, "sh", "-c", "test ! -e /bin/bash && echo no-bash")
    assert out.strip() == "no-bash", out


# the tools the client-tools script (manifests/sh/client-tools.sh) runs for each flavor, by image
TOOL_IMAGES = {
    "mysql-tools": ("9.7", ("mysqldump", "mysql", "mysqlbinlog", "mysqld")),
    "mariadb-tools": ("10.11", ("mariadb-dump", "mariadb", "mariadb-binlog")),
    "mariadb-tools-11.8": ("11.8", ("mariadb-dump", "mariadb", "mariadb-binlog")),
}
# as the Pod runs it (uid 65532): one request of the script's protocol (a run folder with the
# argv NUL-separated), answered with its status and output
_ASK_CLIENT_TOOLS = r"""
set -e
run=/tmp/ct/run-1; mkdir -p "$run"; : > "$run/stdin"
shift; printf '%s\0' "$@" > "$run/request"
timeout 20 bash -c "$SCRIPT" client-tools.sh /tmp/ct &
for _ in $(seq 100); do [ -f "$run/status" ] && break; sleep 0.1; done
echo "uid $(id -u) status $(cat "$run/status")"; cat "$run/stdout" "$run/stderr"
"""


@pytest.mark.parametrize("name", sorted(TOOL_IMAGES))
def test_a_tool_image_runs_its_series_tools_for_the_client_tools_script(images, containerd, name):
    """What the backup, restore and archiver Pods' client-tools container runs: the script under
    the image's bash as the Pod's uid, each tool of the flavor there and of the image's series."""
    from mysql_operator.manifests.scripts import CLIENT_TOOLS_SH

    series, tools = TOOL_IMAGES[name]
    assert images[name].ref == f"localhost/mysql-operator-tools:{name.split('-')[0]}-{series}"
    for tool in tools:
        code, out = run(
            containerd,
            images[name].ref,
            "env",
            f"SCRIPT={CLIENT_TOOLS_SH}",
            "setpriv",
            "--reuid=65532",
            "--regid=65532",
            "--clear-groups",
            "bash",
            "-c",
            _ASK_CLIENT_TOOLS,
            "ask",
            "-",
            tool,
            "--version",
        )
        assert code == 0 and out.startswith("uid 65532 status 0\n"), out
        if not re.search(r"\bVer [0-9]+\.[0-9]+ for ", out):  # mariadb-binlog 10.11: its own version
            assert re.search(rf"\b{re.escape(series)}\.[0-9]+", out), f"{tool} is not of {series}: {out}"


def test_pause_image_runs_catatonit_as_a_pause_process(images, containerd):
    cid = f"pause-{uuid.uuid4().hex[:8]}"
    containerd.ctr("-n", NAMESPACE, "run", "-d", images["pause"].ref, cid)
    seen: list[list[bytes]] = []

    def argv() -> list[bytes] | None:
        """The task's argv once it runs. RUNNING can be reported while its process is still
        between runc's init and the exec of the image's entrypoint: /proc/PID/cmdline reads
        empty then (seen once in CI), so the argv is read until it is the entrypoint's."""
        t = task(containerd, cid)
        if t is None or t[1] != "RUNNING":
            return None
        seen.append(Path(f"/proc/{t[0]}/cmdline").read_bytes().split(b"\0"))
        return seen[-1] if seen[-1] != [b""] else None

    try:
        running = wait_for(
            argv, 20, "the pause container to run its entrypoint", describe=lambda: f"argv seen: {seen[-3:]}"
        )
        assert running[:2] == [b"/catatonit", b"-P"]
    finally:
        remove_container(containerd, cid)


def test_operator_image_runs_the_cli_as_non_root_with_backup_tools(images, containerd):
    ref = images["operator"].ref
    code, out = run(containerd, ref, "mysql-operator", "--version")
    assert code == 0, out
    assert re.fullmatch(r"mysql-operator \d+\.\d+\.\d+\S*", out.strip()), out
    code, out = run(
        containerd,
        ref,
        "sh",
        "-c",
        "id -u; mariadb-dump --version >/dev/null && zstd --version >/dev/null && gzip --version >/dev/null"
        " && python3 -c 'import mysql_operator, pymysql, kopf, kubernetes, boto3' && echo tools-ok",
    )
    assert code == 0, out
    uid, status = out.split()
    assert uid != "0" and status == "tools-ok"
    # The proxy CA used by pip during the build is mounted, never copied: at most an empty stub.
    code, out = run(containerd, ref, "sh", "-c", "test ! -s /run/host-ca.crt && echo no-ca")
    assert (code, out.strip()) == (0, "no-ca")


def test_mariadb_entrypoint_refuses_an_empty_datadir_without_a_root_password_option(
    images, containerd, tmp_path
):
    env = tmp_path / "env"
    env.write_text("MARIADB_DATABASE=app\n")
    code, out = run(containerd, images["mariadb"].ref, "docker-entrypoint.sh", "mariadbd", env_file=env)
    assert code != 0
    assert "MARIADB_ROOT_PASSWORD" in out and "MARIADB_ALLOW_EMPTY_ROOT_PASSWORD" in out


def _entrypoint_container(
    containerd, image, server_cmd, env_text, initdb_files, folder, label, timeout, *server_args
):
    """Run `image`'s docker-entrypoint.sh with `server_cmd` and `server_args` (host network,
    127.0.0.1 on a free port) on a fresh root-owned datadir, as a new PersistentVolume would be, with the environment
    `env_text` and initdb scripts {name: bytes}; yields {cid, port, log, datadir} once root answers,
    removes the container afterwards."""
    port = free_port()
    env, log, datadir, initdb = (
        folder / "env",
        folder / "container.log",
        folder / "datadir",
        folder / "initdb",
    )
    datadir.mkdir(mode=0o755)
    initdb.mkdir()
    for name, data in initdb_files.items():
        (initdb / name).write_bytes(data)
    env.write_text(env_text)
    env.chmod(0o600)
    cid = f"{server_cmd}-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    containerd.ctr(
        "-n",
        NAMESPACE,
        "run",
        "-d",
        "--net-host",
        "--env-file",
        str(env),
        "--log-uri",
        f"file://{log}",
        "--mount",
        f"type=bind,src={datadir},dst=/var/lib/mysql,options=rbind:rw",
        "--mount",
        f"type=bind,src={initdb},dst=/docker-entrypoint-initdb.d,options=rbind:ro",
        image,
        cid,
        "docker-entrypoint.sh",
        server_cmd,
        f"--port={port}",
        "--bind-address=127.0.0.1",
        *server_args,
    )
    try:
        try:
            wait_for(
                lambda: query(port, "root", ROOT_PASSWORD, "SELECT 1") == ((1,),),
                timeout,
                f"{label} on 127.0.0.1:{port} to answer as root",
            )
        except AssertionError as e:
            raise AssertionError(f"{e}\ncontainer log:\n{log.read_text(errors='replace')[-3000:]}") from None
        report(f"{label} container start (empty datadir) to first query", time.monotonic() - started)
        yield {"cid": cid, "port": port, "log": log, "datadir": datadir}
    finally:
        remove_container(containerd, cid)


@pytest.fixture(scope="module")
def server(images, containerd, tmp_path_factory):
    """One MariaDB container (host network, 127.0.0.1 on a free port) for the TestMariaDB tests."""
    yield from _entrypoint_container(
        containerd,
        images["mariadb"].ref,
        "mariadbd",
        f"MARIADB_ROOT_PASSWORD={ROOT_PASSWORD}\nMARIADB_DATABASE=app\n"
        f"MARIADB_USER=appuser\nMARIADB_PASSWORD={APP_PASSWORD}\n",
        {
            "01-schema.sql": b"CREATE TABLE seeded (id INT PRIMARY KEY);\nINSERT INTO seeded VALUES (1);\n",
            "02-more.sql.gz": gzip.compress(b"INSERT INTO seeded VALUES (2);\n"),
            "03-sourced.sh": b'docker_process_sql <<<"INSERT INTO seeded VALUES (3);"\n',
        },
        tmp_path_factory.mktemp("mariadb"),
        "MariaDB",
        120,
    )


class TestMariaDB:
    def test_root_and_the_requested_database_and_user_exist(self, server):
        port = server["port"]
        assert query(port, "root", ROOT_PASSWORD, "SELECT CURRENT_USER()") == (("root@%",),)
        assert query(port, "appuser", APP_PASSWORD, "SELECT DATABASE()", db="app") == (("app",),)
        with pytest.raises(pymysql.err.OperationalError):
            query(port, "root", "wrong", "SELECT 1")
        # The image's config: utf8mb4 defaults from Debian, no name resolution, time zones loaded.
        rows = query(
            port,
            "root",
            ROOT_PASSWORD,
            "SELECT @@skip_name_resolve, @@port, (SELECT COUNT(*) > 0 FROM mysql.time_zone_name)",
        )
        assert rows == ((1, port, 1),)

    def test_server_runs_as_uid_999_and_keeps_passwords_out_of_its_environment(self, server, containerd):
        pid, _ = task(containerd, server["cid"])
        status = Path(f"/proc/{pid}/status").read_text()
        uids = re.search(r"^Uid:\s+(\d+)\s+(\d+)", status, re.M).groups()
        gids = re.search(r"^Gid:\s+(\d+)\s+(\d+)", status, re.M).groups()
        assert uids == ("999", "999") and gids == ("999", "999")
        assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"mariadbd")
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert ROOT_PASSWORD.encode() not in environ and APP_PASSWORD.encode() not in environ
        code = containerd.ctr(
            "-n",
            NAMESPACE,
            "tasks",
            "exec",
            "--exec-id",
            f"e{uuid.uuid4().hex[:6]}",
            server["cid"],
            "sh",
            "-c",
            'test "$(id -u mysql):$(id -g mysql)" = 999:999 '
            '&& test "$(stat -c %u /var/lib/mysql/mysql)" = 999 '
            "&& test -S /run/mysqld/mysqld.sock && healthcheck.sh",
            check=False,
        )
        assert code.returncode == 0, code.stdout + code.stderr

    def test_initdb_scripts_ran_once_in_order_on_the_empty_datadir(self, server):
        rows = query(server["port"], "appuser", APP_PASSWORD, "SELECT id FROM seeded ORDER BY id", db="app")
        assert rows == ((1,), (2,), (3,))

    def test_a_root_owned_volume_becomes_the_mysql_users_datadir(self, server):
        assert (server["datadir"] / "mysql").is_dir()
        assert server["datadir"].stat().st_uid == 999
        assert (server["datadir"] / "ibdata1").stat().st_uid == 999

    def test_the_entrypoint_logs_its_steps_but_never_a_password(self, server):
        text = server["log"].read_text(errors="replace")
        assert "Creating user appuser" in text and "ready for connections" in text
        assert ROOT_PASSWORD not in text and APP_PASSWORD not in text

    def test_the_image_has_the_binaries_backups_and_replicas_need(self, server, containerd):
        tools = [
            "mariadbd",
            "mariadb",
            "mariadb-dump",
            "mariadb-backup",
            "mbstream",
            "mariadb-install-db",
            "mariadb-admin",
        ]
        proc = containerd.ctr(
            "-n",
            NAMESPACE,
            "tasks",
            "exec",
            "--exec-id",
            f"e{uuid.uuid4().hex[:6]}",
            server["cid"],
            "sh",
            "-c",
            " && ".join(f"command -v {t} >/dev/null" for t in tools)
            + " && ! command -v mysqld_exporter && echo all",  # as the official image: the sidecar has its own
            check=False,
        )
        assert proc.stdout.strip() == "all", proc.stdout + proc.stderr

    def test_data_survives_a_restart_on_the_initialised_datadir(self, server, containerd):
        port, cid = server["port"], server["cid"]
        query(
            port,
            "appuser",
            APP_PASSWORD,
            "CREATE TABLE IF NOT EXISTS t (v INT); INSERT INTO t VALUES (42)",
            db="app",
        )
        containerd.ctr("-n", NAMESPACE, "tasks", "kill", "-s", "SIGTERM", cid)
        wait_for(lambda: task(containerd, cid)[1] == "STOPPED", 60, "MariaDB to shut down on SIGTERM")
        containerd.ctr("-n", NAMESPACE, "tasks", "delete", cid)
        started = time.monotonic()
        containerd.ctr("-n", NAMESPACE, "tasks", "start", "-d", cid)
        wait_for(
            lambda: query(port, "appuser", APP_PASSWORD, "SELECT v FROM t", db="app") == ((42,),),
            60,
            "MariaDB to serve the old data after a restart",
        )
        report("MariaDB restart (initialised datadir) to first query", time.monotonic() - started)


def test_mariadb_runs_as_uid_999_from_the_start_like_run_as_user(images, containerd, tmp_path):
    """A Pod with securityContext.runAsUser: 999 starts the entrypoint as 999, not root."""
    port = free_port()
    env = tmp_path / "env"
    env.write_text("MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1\n")
    cid = f"mariadb999-{uuid.uuid4().hex[:8]}"
    # ctr's default spec (unlike the kubelet's) mounts a root-owned tmpfs over /run, hiding the
    # image's /run/mysqld: give the socket directory back, as the image has it (mode 1777).
    containerd.ctr(
        "-n",
        NAMESPACE,
        "run",
        "-d",
        "--net-host",
        "--env-file",
        str(env),
        "--mount",
        "type=tmpfs,src=tmpfs,dst=/run/mysqld,options=nosuid:nodev:mode=1777",
        "--log-uri",
        f"file://{tmp_path / 'container.log'}",
        images["mariadb"].ref,
        cid,
        "setpriv",
        "--reuid=999",
        "--regid=999",
        "--clear-groups",
        "docker-entrypoint.sh",
        "mariadbd",
        f"--port={port}",
        "--bind-address=127.0.0.1",
    )
    try:
        try:
            wait_for(
                lambda: query(port, "root", "", "SELECT CURRENT_USER()") == (("root@%",),),
                120,
                f"MariaDB (uid 999 from the start) on 127.0.0.1:{port}",
            )
        except AssertionError as e:
            raise AssertionError(
                f"{e}\n{(tmp_path / 'container.log').read_text(errors='replace')[-3000:]}"
            ) from None
        pid, _ = task(containerd, cid)
        assert re.search(r"^Uid:\s+999\s+999", Path(f"/proc/{pid}/status").read_text(), re.M)
    finally:
        remove_container(containerd, cid)


def query(port: int, user: str, password: str, sql: str, db: str | None = None):
    conn = pymysql.connect(
        host="127.0.0.1",
        port=port,
        user=user,
        password=password,
        database=db,
        connect_timeout=3,
        autocommit=True,
        client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS,
    )
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            rows = cur.fetchall()
            while cur.nextset():
                rows = cur.fetchall()
            return tuple(tuple(r) for r in rows)
    finally:
        conn.close()


@pytest.fixture(scope="module")
def mysql_server(images, containerd, tmp_path_factory):
    """One MySQL 9.7 container from the local image, started by its entrypoint with the official
    image's variables."""
    yield from _entrypoint_container(
        containerd,
        images["mysql"].ref,
        "mysqld",
        f"MYSQL_ROOT_PASSWORD={ROOT_PASSWORD}\nMYSQL_DATABASE=app\n"
        f"MYSQL_USER=appuser\nMYSQL_PASSWORD={APP_PASSWORD}\n",
        {
            "01-schema.sql": b"CREATE TABLE seeded (id INT PRIMARY KEY);\nINSERT INTO seeded VALUES (1);\n",
            "02-sourced.sh": b'docker_process_sql <<<"INSERT INTO seeded VALUES (2);"\n',
        },
        tmp_path_factory.mktemp("mysql"),
        "MySQL 9.7",
        180,
        # the X protocol is on, as in the official image: on loopback and a free port here
        "--mysqlx-bind-address=127.0.0.1",
        f"--mysqlx-port={free_port()}",
    )


class TestMySQL:
    def test_root_database_user_and_initdb_scripts_like_the_official_image(self, mysql_server):
        port = mysql_server["port"]
        (version,) = query(port, "root", ROOT_PASSWORD, "SELECT VERSION()")[0]
        assert version.startswith("9.7."), version
        assert query(port, "root", ROOT_PASSWORD, "SELECT CURRENT_USER()") == (("root@%",),)
        assert query(port, "appuser", APP_PASSWORD, "SELECT DATABASE()", db="app") == (("app",),)
        with pytest.raises(pymysql.err.OperationalError):
            query(port, "root", "wrong", "SELECT 1")
        assert query(port, "appuser", APP_PASSWORD, "SELECT id FROM seeded ORDER BY id", db="app") == (
            (1,),
            (2,),
        )

    def test_server_runs_as_uid_999_without_passwords_in_its_environment_or_log(
        self, mysql_server, containerd
    ):
        pid, _ = task(containerd, mysql_server["cid"])
        uids = re.search(r"^Uid:\s+(\d+)\s+(\d+)", Path(f"/proc/{pid}/status").read_text(), re.M).groups()
        assert uids == ("999", "999")
        assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"mysqld")
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert ROOT_PASSWORD.encode() not in environ and APP_PASSWORD.encode() not in environ
        text = mysql_server["log"].read_text(errors="replace")
        assert "Creating user appuser" in text and ROOT_PASSWORD not in text and APP_PASSWORD not in text
        assert mysql_server["datadir"].stat().st_uid == 999
        tools = [
            "mysqld",
            "mysql",
            "mysqldump",
            "mysqladmin",
            "mysql_tzinfo_to_sql",
            "gosu",
            "healthcheck.sh",
        ]
        # what the official image lacks (docs/official-images.md section 2): the operator runs
        # mysqlbinlog from its tool image, and its Pod scripts call none of the others
        lacks = ["mysqlbinlog", "mysqlcheck", "myisamchk", "perror", "hostname", "ps", "setpriv", "which"]
        proc = containerd.ctr(
            "-n",
            NAMESPACE,
            "tasks",
            "exec",
            "--exec-id",
            f"e{uuid.uuid4().hex[:6]}",
            mysql_server["cid"],
            "sh",
            "-c",
            " && ".join(f"command -v {t} >/dev/null" for t in tools)
            + "".join(f" && ! command -v {t}" for t in lacks)
            + " && ! command -v mysqld_exporter"  # as the official image: the sidecar has its own
            + " && test -S /var/run/mysqld/mysqld.sock && healthcheck.sh && echo all",
            check=False,
        )
        assert proc.stdout.strip() == "all", proc.stdout + proc.stderr
