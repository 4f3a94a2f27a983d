"""A MySQL physical backup's table digests (issue 49): the dump of the server started on the copy
(commands.copy_dump_command, pure) and how the backup records what it read
(backup_producer.copy_digests, here with a local process standing in for the sidecar's dump tool):
the tables, or why there are none - the backup goes on either way."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import backup_producer, backup_types, commands
from mysql_operator.backup.commands import CommandError, Endpoint
from mysql_operator.backup.crypto import Key
from mysql_operator.backup.stream import DumpStream
from mysql_operator.db.flavor import Flavor, ServerVersion

MYSQL = ServerVersion(Flavor.MYSQL, 9, 7, 0)
MARIADB = ServerVersion(Flavor.MARIADB, 11, 4, 2)
SOCKET = "/run/tools/clone.sock"

DUMP = b"""-- MySQL dump
USE `app`;
CREATE TABLE `empty` (
  `id` int
);
CREATE TABLE `t` (
  `id` int
);
INSERT INTO `t` VALUES (1),(2),(3);
"""


@pytest.mark.parametrize("version", [MYSQL, MARIADB], ids=["mysql", "mariadb"])
def test_the_copy_is_dumped_with_the_options_that_shape_the_rows_of_a_backups_dump(version):
    """A restored server is checked with dump_command's dump: every option that shapes the rows is
    the copy's dump's too; the copy's server (no binary log, its root without a password, on its
    socket) is not asked for a position it does not have."""
    copy = commands.copy_dump_command(version, SOCKET, ["app", "odd`db"])
    restored = commands.dump_command(version, Endpoint("h", 3306, "u"), "/f", ["app", "odd`db"])
    assert copy[0] == restored[0] == ("mysqldump" if version is MYSQL else "mariadb-dump")
    assert copy[-3:] == restored[-3:] == ["--databases", "app", "odd`db"]
    shaping = (*commands.DUMP_CONTENT, *(("--column-statistics=0",) if version is MYSQL else ()))
    for option in shaping:
        assert option in copy and option in restored
    assert copy[1:4] == ["--user=root", f"--socket={SOCKET}", "--protocol=SOCKET"]
    assert ("--set-gtid-purged=OFF" in copy) == (version is MYSQL)
    assert not any(
        a.startswith(("--source-data", "--master-data", "--gtid", "--host", "--port", "--ssl")) for a in copy
    )
    assert not any("password" in a or "defaults" in a for a in copy)


def test_a_copy_dump_is_of_some_database():
    with pytest.raises(CommandError, match="no databases"):
        commands.copy_dump_command(MYSQL, SOCKET, [])
    with pytest.raises(CommandError, match="no databases"):
        commands.copy_dump_command(MARIADB, SOCKET, [])


def _request(key: Key | None = None) -> backup_types.BackupRequest:
    return backup_types.BackupRequest(
        cluster="c",
        namespace="ns",
        backup="b",
        s3=S3("bk", SecretKeys("s", "a", "k")),
        candidates=(),
        tools_dir="/run/tools",
        key=key,
        method="physical",
    )


def _source() -> backup_types.Source:
    return backup_types.Source(
        candidate=backup_types.Candidate("c-0", Endpoint("h", 3306, "u")),
        version=MYSQL,
        full_version="9.7.0",
        databases=["app"],
        plugins=[],
        events=None,
        physical_copy=True,
        donated=False,
    )


def _standing_in(monkeypatch, script: str) -> list[list[str]]:
    """The sidecar's dump tool replaced by a local python running `script`; the argvs asked for."""
    asked: list[list[str]] = []

    def launch(argv, folder, **_kw):
        asked.append(argv)
        return subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    monkeypatch.setattr(backup_producer, "SidecarProcess", launch)
    return asked


def test_the_copys_tables_are_read_from_its_dump_and_recorded(monkeypatch):
    asked = _standing_in(monkeypatch, f"import sys; sys.stdout.buffer.write({DUMP!r})")
    stream = DumpStream()
    backup_producer.copy_digests(_request(), _source(), stream, SOCKET, ["app"])
    assert asked == [commands.copy_dump_command(MYSQL, SOCKET, ["app"])]
    assert stream.tables_note == ""
    assert stream.tables is not None
    assert {n: t.rows for n, t in stream.tables.items()} == {"app.empty": 0, "app.t": 3}
    assert stream.size == 0  # none of the dump is the backup's: it went to the digests only


def test_a_copy_without_user_databases_records_no_tables_and_dumps_nothing(monkeypatch):
    asked = _standing_in(monkeypatch, "raise SystemExit(1)")
    stream = DumpStream()
    backup_producer.copy_digests(_request(), _source(), stream, SOCKET, [])
    assert asked == [] and stream.tables == {} and stream.tables_note == ""


FAILS = "import sys; sys.stderr.write(\"Couldn't execute 'SHOW CREATE TABLE `secret_table`'\"); sys.exit(2)"


def test_a_failed_dump_of_the_copy_leaves_a_note_not_a_failure(monkeypatch):
    _standing_in(monkeypatch, FAILS)
    stream = DumpStream()
    backup_producer.copy_digests(_request(), _source(), stream, SOCKET, ["app"])
    assert stream.tables is None
    assert stream.tables_note.startswith("mysqldump of the copy for its table digests failed (exit status 2)")
    assert "secret_table" in stream.tables_note  # unencrypted: the manifest names the tables anyway


def test_an_encrypted_backups_note_holds_no_word_of_the_dump_tool(monkeypatch):
    """Its manifest holds database and table names only sealed; the note is not sealed."""
    _standing_in(monkeypatch, FAILS)
    stream = DumpStream()
    backup_producer.copy_digests(_request(Key(b"k" * 32)), _source(), stream, SOCKET, ["app"])
    assert stream.tables is None
    assert stream.tables_note == "mysqldump of the copy for its table digests failed (exit status 2)"


def test_a_sidecar_that_does_not_answer_leaves_a_note(monkeypatch):
    def launch(argv, folder, **_kw):
        raise backup_producer.SidecarError("the client-tools container did not start within 120s")

    monkeypatch.setattr(backup_producer, "SidecarProcess", launch)
    stream = DumpStream()
    backup_producer.copy_digests(_request(), _source(), stream, SOCKET, ["app"])
    assert stream.tables is None
    assert stream.tables_note == (
        "the dump of the copy for its table digests did not run: "
        "the client-tools container did not start within 120s"
    )


class _Unpacked:
    """A MariaDB copy as mariadb_copy_tables.Unpacking hands it over: `inspect` fails with
    `fails`, else calls back with the copy's socket and databases."""

    def __init__(self, fails: str = "") -> None:
        self.fails, self.inspected = fails, False

    def inspect(self, inspect) -> None:
        self.inspected = True
        if self.fails:
            raise backup_producer.copy_server.PhysicalError(self.fails)
        inspect(SOCKET, ["app"])


def test_a_mariadb_copy_that_was_not_unpacked_whole_is_not_inspected():
    """The unpacker stopped reading the stream (it failed, or its disk filled up): what it holds is
    not the copy, so no server is started on it and no table recorded from it."""
    stream, unpacked = DumpStream(), _Unpacked()
    stream.tee_error = "the table digests stopped reading the dump: Broken pipe"
    backup_producer.mariadb_digests(_request(), _source(), stream, unpacked)
    assert not unpacked.inspected and stream.tables is None
    assert stream.tables_note == "the copy could not be unpacked whole: " + stream.tee_error


@pytest.mark.parametrize("key", [None, Key(b"k" * 32)], ids=["plain", "encrypted"])
def test_a_mariadb_copy_that_cannot_be_prepared_or_served_leaves_a_note(key):
    """mbstream, mariadb-backup --prepare or the server on the copy failed: the backup goes on;
    an encrypted backup's note leaves out the message (a server's log may name a table)."""
    stream = DumpStream()
    message = "mariadb-backup --prepare failed (exit status 1): page of `shop`.`secret_table` is corrupt"
    backup_producer.mariadb_digests(_request(key), _source(), stream, _Unpacked(message))
    assert stream.tables is None
    told = "" if key else f": {message}"
    assert stream.tables_note == f"the copy could not be read for its table digests{told}"


def test_a_mariadb_copys_tables_are_read_from_the_server_started_on_it(monkeypatch):
    asked = _standing_in(monkeypatch, f"import sys; sys.stdout.buffer.write({DUMP!r})")
    stream = DumpStream()
    source = dataclasses.replace(_source(), version=MARIADB, physical_copy=False, donated=True)
    backup_producer.mariadb_digests(_request(), source, stream, _Unpacked())
    assert asked == [commands.copy_dump_command(MARIADB, SOCKET, ["app"])]
    assert stream.tables is not None and {n: t.rows for n, t in stream.tables.items()} == {
        "app.empty": 0,
        "app.t": 3,
    }
