"""The pure parts of a physical backup (mysql_operator/backup/copy_server.py: its command lines) and
its manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mysql_operator.backup import copy_server
from mysql_operator.backup.manifest import Manifest

P = copy_server.Paths(Path("/run/tools"))


def test_the_recipient_loads_the_clone_plugin_and_every_library_the_donor_has_active():
    assert copy_server.recipient_plugins(["semisync_source.so", "mysql_clone.so", "semisync_source.so"]) == [
        "mysql_clone.so",
        "semisync_source.so",
    ]


@pytest.mark.parametrize("name", ["../../tmp/evil.so", "a b.so", "x.so;y.so", "libfoo", "x" * 70 + ".so"])
def test_a_library_name_that_is_not_a_plain_file_name_is_refused(name):
    with pytest.raises(copy_server.PhysicalError, match="not a library file name"):
        copy_server.recipient_plugins([name])


def test_the_throwaway_servers_listen_on_no_port_and_read_or_write_no_file_for_clients():
    for copy in (False, True):
        argv = copy_server.server_command(P, ["mysql_clone.so", "semisync_source.so"], copy)
        assert argv[:2] == ["mysqld", "--no-defaults"]
        assert "--skip-networking" in argv and "--secure-file-priv=NULL" in argv
        assert not any(a.startswith(("--port=", "--bind-address")) for a in argv)
        assert "--plugin-load-add=mysql_clone.so;semisync_source.so" in argv
        assert f"--socket={P.socket}" in argv
    recipient = copy_server.server_command(P, ["mysql_clone.so"])
    assert f"--datadir={P.recipient}" in recipient and "--skip-grant-tables" not in recipient
    copy = copy_server.server_command(P, ["mysql_clone.so"], copy=True)
    assert f"--datadir={P.data}" in copy and "--skip-grant-tables" in copy  # the donor's accounts


def test_the_server_a_restore_serves_checks_accounts_and_listens_only_on_its_port():
    argv = copy_server.server_command(P, ["mysql_clone.so"], donor_port=3307)
    assert f"--datadir={P.data}" in argv and "--port=3307" in argv
    assert "--skip-grant-tables" not in argv and "--skip-networking" not in argv  # the instances log in
    assert "--secure-file-priv=NULL" in argv and "--gtid-mode=ON" in argv
    assert copy_server.untar_command(P.data) == ["tar", "-C", "/run/tools/clone-data", "-xf", "-"]


def test_every_path_of_the_copy_is_in_the_shared_folder_and_removed():
    argv = copy_server.init_command(P) + copy_server.server_command(P, ["mysql_clone.so"])
    paths = [a.split("=", 1)[1] for a in argv if a.startswith("--") and "=/" in a]
    assert paths and all(p.startswith("/run/tools/clone") or p == "/run/tools" for p in paths)
    assert copy_server.tar_command(P.data) == [
        "tar",
        "--numeric-owner",
        "-C",
        "/run/tools/clone-data",
        "-cf",
        "-",
        ".",
    ]


def _manifest(**extra) -> dict:
    return {
        "cluster": "c",
        "namespace": "n",
        "backup": "b",
        "flavor": "mysql",
        "server_version": "9.7.4",
        "gtid_position": None,
        "source_instance": "c-1",
        "started_at": "2026-11-28T00:00:00Z",
        "completed_at": "2026-11-28T00:01:00Z",
        "data_key": "c/b/backup.tar.zst",
        "compression": "zstd",
        "compressed_size": 10,
        "uncompressed_size": 20,
        "sha256": "0" * 64,
        **extra,
    }


def test_a_manifest_names_its_method_and_older_manifests_are_logical():
    assert Manifest.from_json(json.dumps(_manifest()).encode()).method == "logical"
    m = Manifest.from_json(json.dumps(_manifest(method="physical")).encode())
    assert m.method == "physical"
    assert Manifest.from_json(m.to_json()) == m
