"""`kubectl mysql` (mysql_operator/kubectl_plugin.py): its commands and flags, one-line errors
with the documented exit codes, the restore from a bucket alone, the krew manifest.
Against a real API server: tests/integration/test_kubectl_plugin.py."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from mysql_operator import cli_common
from mysql_operator.api import parse
from mysql_operator.cli import build_parser
from mysql_operator.cli_backup import bucket_cluster
from mysql_operator.kubectl_plugin import main

REPO = Path(__file__).resolve().parents[2]
JOB_COMMANDS = ("restore-into", "delete-data", "keep-evidence", "archive-binlogs")
# every user command with its required arguments
COMMANDS = {
    "status": ["status", "db"],
    "switchover": ["switchover", "db", "--to", "1"],
    "rotate-passwords": ["rotate-passwords", "db"],
    "backup create": ["backup", "create", "db"],
    "backup list": ["backup", "list"],
    "backup describe": ["backup", "describe", "b1"],
    "backup delete": ["backup", "delete", "b1"],
    "restore": ["restore", "b1", "--into", "db2"],
}
CHANGING = ("switchover", "rotate-passwords", "backup create", "restore")
LISTING = ("status", "backup list")


def plugin_parser():
    return build_parser("kubectl mysql", internal=False)


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "; " in lines[0], err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def no_kubeconfig(tmp_path, monkeypatch):
    """KUBECONFIG names a file that does not exist; not in a Pod."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return tmp_path / "missing"


def test_help_lists_the_user_commands_and_the_exit_codes_not_the_jobs(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for name in ("status", "switchover", "rotate-passwords", "backup", "restore", "version"):
        assert f"\n    {name}" in out
    for name in ("run", "check-install", *JOB_COMMANDS):
        assert f"    {name} " not in out and f"{name}," not in out
    for code, what in ((0, "done"), (2, "usage"), (3, "no cluster access"), (4, "not found")):
        assert f"  {code}  {what}" in out
    with pytest.raises(SystemExit):
        main(["backup", "--help"])
    out = capsys.readouterr().out
    assert all(f" {c}" in out for c in ("create", "list", "describe", "delete"))
    assert not any(c in out for c in (*JOB_COMMANDS, " run "))


@pytest.mark.parametrize("name", ["run", "check-install", "backup run", "backup restore-into"])
def test_the_plugin_has_no_operator_or_job_commands(name, capsys):
    assert main_code([*name.split(), "--help"]) == cli_common.USAGE
    assert "invalid choice" in one_error_line(capsys.readouterr().err)


def test_mysql_operator_still_runs_the_job_commands_but_hides_them(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["backup", "--help"])
    assert not any(c in capsys.readouterr().out for c in JOB_COMMANDS)
    a = build_parser().parse_args(
        ["backup", "delete-data", "--bucket", "b", "--folder", "f", "--termination-log", "/dev/null"]
    )
    assert (a.backup_command, a.folder) == ("delete-data", "f")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_takes_the_common_flags(name):
    for parser in (plugin_parser(), build_parser()):
        a = parser.parse_args(
            [*COMMANDS[name], "-n", "ns1", "--context", "c1", "--kubeconfig", "/k", "-o", "yaml"]
        )
        assert (a.namespace, a.context, a.kubeconfig, a.output) == ("ns1", "c1", "/k", "yaml")
        a = parser.parse_args([*COMMANDS[name], "--namespace", "ns2", "--output", "json"])
        assert (a.namespace, a.output, a.context, a.kubeconfig) == ("ns2", "json", None, None)
        assert parser.parse_args(COMMANDS[name]).output == "table"
        assert getattr(
            parser.parse_args([*COMMANDS[name], "--dry-run"] if name in CHANGING else COMMANDS[name]),
            "dry_run",
            False,
        ) == (name in CHANGING)
        if name in LISTING:
            assert parser.parse_args([*COMMANDS[name], "-A"]).all_namespaces


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - set(CHANGING)))
def test_dry_run_only_where_an_object_is_created_or_changed(name, capsys):
    assert main_code([*COMMANDS[name], "--dry-run"]) == cli_common.USAGE
    assert "unrecognized arguments: --dry-run" in one_error_line(capsys.readouterr().err)


def test_mysql_operator_status_still_takes_o_text():
    assert build_parser().parse_args(["status", "db", "-o", "text"]).output == "table"


def main_code(argv) -> int:
    """main's exit status, also when argparse exits (usage errors, --help)."""
    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code or 0)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["status", "-o", "xml"], "argument -o/--output: invalid choice: 'xml'"),
        (["switchover", "db"], "the following arguments are required: --to"),
        (["bogus"], "invalid choice: 'bogus'"),
        (["restore", "--into", "x"], "restore needs a MySQLBackup name or --from-bucket"),
        (["restore", "b1", "--into", "x", "--from-bucket", "s3://b/c/d"], "not both"),
        (
            ["restore", "--into", "x", "--from-bucket", "s3://b/c/d"],
            "--from-bucket needs --s3-credentials-secret",
        ),
        (
            ["restore", "--into", "x", "--from-bucket", "s3://b/only-one", "--s3-credentials-secret", "s"],
            "--from-bucket 's3://b/only-one': use s3://BUCKET/[PREFIX/]CLUSTER/BACKUP",
        ),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(argv, says, no_kubeconfig, capsys):
    assert main_code(argv) == cli_common.USAGE
    line = one_error_line(capsys.readouterr().err)
    assert says in line


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_without_a_kubeconfig_every_command_exits_3_in_one_line(name, no_kubeconfig, capsys):
    dry = ["--dry-run"] if name in CHANGING else []
    assert main_code([*COMMANDS[name], *dry]) == cli_common.NO_ACCESS
    line = one_error_line(capsys.readouterr().err)
    assert f"no cluster access: kubeconfig {no_kubeconfig}" in line and "--kubeconfig" in line
    # and the same for a --kubeconfig that does not exist
    assert main_code([*COMMANDS[name], "--kubeconfig", str(no_kubeconfig) + "-too"]) == cli_common.NO_ACCESS
    assert f"kubeconfig {no_kubeconfig}-too" in one_error_line(capsys.readouterr().err)


def test_the_installed_entry_point_prints_no_traceback(no_kubeconfig):
    """The process as kubectl runs it: one line on stderr, exit 3, nothing on stdout."""
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    r = subprocess.run(
        [sys.executable, "-m", "mysql_operator.kubectl_plugin", "status", "-o", "json"],
        capture_output=True,
        text=True,
        env={**env, "KUBECONFIG": str(no_kubeconfig)},
        cwd=REPO,
        timeout=60,
    )
    assert r.returncode == cli_common.NO_ACCESS and r.stdout == ""
    one_error_line(r.stderr)


def refusing_kubeconfig(path: Path, namespace: str | None = None) -> Path:
    """A kubeconfig whose API server is port 1 of this host: every connection is refused (a
    real refusal, no mock)."""
    context = {"cluster": "k", "user": "u", **({"namespace": namespace} if namespace else {})}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "contexts": [{"name": "c", "context": context}],
                "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "x"}}],
            }
        )
    )
    return path


def test_an_unreachable_api_server_exits_3(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kubeconfig = refusing_kubeconfig(tmp_path / "config")
    assert main(["backup", "list", "--kubeconfig", str(kubeconfig)]) == cli_common.NO_ACCESS
    line = one_error_line(capsys.readouterr().err)
    assert "cannot reach the API server" in line and "Connection refused" in line


def test_version_in_each_output(capsys):
    from mysql_operator import __version__

    assert main(["version"]) == 0 and capsys.readouterr().out.strip() == __version__
    assert main(["version", "-o", "json"]) == 0 and json.loads(capsys.readouterr().out) == {
        "version": __version__
    }
    assert main(["version", "-o", "yaml"]) == 0 and yaml.safe_load(capsys.readouterr().out) == {
        "version": __version__
    }


@pytest.mark.parametrize(
    "status, body, code, says",
    [
        (
            403,
            {"message": 'mysqlclusters.mysql.operator.dev is forbidden: User "bob" cannot list'},
            cli_common.NO_ACCESS,
            'User "bob" cannot list; ask for RBAC',
        ),
        (401, None, cli_common.NO_ACCESS, "Unauthorized; ask for RBAC"),
        (
            404,
            {"message": 'mysqlbackups "b1" not found'},
            cli_common.NOT_FOUND,
            '"b1" not found; check the name',
        ),
        (
            409,
            {"message": 'mysqlbackups "b1" already exists'},
            cli_common.FAILED,
            "already exists; choose another",
        ),
        (500, "not json", cli_common.FAILED, "Internal Server Error; retry"),
    ],
)
def test_api_refusals_map_to_the_documented_codes(status, body, code, says):
    reason = {401: "Unauthorized", 500: "Internal Server Error"}.get(status, "x")
    got_code, text = cli_common.api_error(
        status, reason, json.dumps(body) if isinstance(body, dict) else body
    )
    assert got_code == code and says in text and "\n" not in text


def test_restore_from_the_bucket_alone_is_a_cluster_the_operator_accepts():
    body = bucket_cluster(
        "again",
        "s3://backups/team-a/shop/shop-20261203101500",
        "s3-keys",
        endpoint="https://minio.example:9000",
        instances=3,
        flavor="mariadb",
        version="11.4",
        encryption_key_secret="backup-key",
        point_in_time="2026-12-03T10:30:00Z",
    )
    restore = body["spec"]["restore"]
    assert restore["s3"] == {
        "bucket": "backups",
        "prefix": "team-a",
        "path": "shop/shop-20261203101500",
        "credentialsSecret": {"name": "s3-keys"},
        "endpoint": "https://minio.example:9000",
    }
    c = parse({**body, "metadata": {"name": "again", "namespace": "ns"}})
    assert (c.spec.flavor, c.spec.instances, c.spec.restore.encryption.secret) == ("mariadb", 3, "backup-key")
    assert (c.spec.restore.s3.prefix, c.spec.restore.point_in_time) == ("team-a", "2026-12-03T10:30:00Z")
    # no prefix: the bucket's top holds the cluster's folder
    assert bucket_cluster("n", "s3://b/shop/b1/", "k")["spec"]["restore"]["s3"] == {
        "bucket": "b",
        "path": "shop/b1",
        "credentialsSecret": {"name": "k"},
    }
    for bad in ("b/shop/b1", "s3://", "s3:///shop/b1", "s3://b/shop"):
        with pytest.raises(ValueError, match="--from-bucket"):
            bucket_cluster("n", bad, "k")


def test_restore_dry_run_from_the_bucket_prints_the_cluster_and_sends_nothing(tmp_path, monkeypatch, capsys):
    """Nothing to send to: the kubeconfig's server refuses connections, and the dry run succeeds."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kubeconfig = refusing_kubeconfig(tmp_path / "config", namespace="prod")
    argv = ["restore", "--into", "again", "--from-bucket", "s3://bk/shop/b1", "--s3-credentials-secret", "k"]
    assert main([*argv, "--kubeconfig", str(kubeconfig), "--dry-run", "-o", "yaml"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["metadata"] == {"name": "again", "namespace": "prod"}
    assert printed["spec"]["restore"]["s3"]["path"] == "shop/b1"


def test_the_krew_manifest_installs_the_shim_the_archive_holds():
    sys.path.insert(0, str(REPO / "hack"))
    try:
        import krew_archive
    finally:
        sys.path.remove(str(REPO / "hack"))
    m = yaml.safe_load((REPO / "plugins/krew/mysql.yaml").read_text())
    assert (m["apiVersion"], m["kind"], m["metadata"]["name"]) == (
        "krew.googlecontainertools.github.com/v1alpha2",
        "Plugin",
        "mysql",
    )
    assert m["spec"]["shortDescription"] and "pip install" in m["spec"]["description"]
    from mysql_operator import __version__

    assert m["spec"]["version"] == f"v{__version__}"
    (platform,) = m["spec"]["platforms"]
    assert platform["bin"] == "kubectl-mysql" and platform["files"] == [{"from": "kubectl-mysql", "to": "."}]
    assert platform["sha256"] == hashlib.sha256(krew_archive.archive()).hexdigest(), (
        "plugins/krew/kubectl-mysql changed: put the sha256 `python hack/krew_archive.py` prints in the manifest"
    )
    assert os.access(REPO / "plugins/krew/kubectl-mysql", os.X_OK)
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-mysql"] == "mysql_operator.kubectl_plugin:main"
    assert scripts["mysql-operator"] == "mysql_operator.cli:main"


def test_backup_list_shows_sizes_in_words_also_for_backups_an_older_version_recorded():
    from mysql_operator.cli_backup import backup_rows

    def backup(name: str, status: dict) -> dict:
        return {"metadata": {"name": name, "creationTimestamp": name}, "spec": {}, "status": status}

    rows = backup_rows(
        [
            backup("a", {"phase": "Succeeded", "sizeBytes": 1536, "size": "1.5 KiB"}),
            backup("b", {"phase": "Succeeded", "sizeBytes": 3 * 1024**3}),  # no status.size yet
            backup("c", {"phase": "Running"}),
        ]
    )
    size = rows[0].index("SIZE")
    assert [r[size] for r in rows[1:]] == ["1.5 KiB", "3.0 GiB", ""]
