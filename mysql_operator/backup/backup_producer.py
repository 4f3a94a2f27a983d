"""What produces a backup's bytes: the dump tool (logical, its version checked first), the tar of
a CLONE copy (physical, MySQL: backup/physical.py) or the donor sidecar's mariadb-backup stream
(physical, MariaDB: backup/mariadb_copy.py); a physical copy's table digests when asked."""

from __future__ import annotations

import contextlib

from mysql_operator.backup import commands, copy_server, mariadb_copy, mariadb_copy_tables, physical
from mysql_operator.backup.backup_types import BackupError, BackupRequest, Source
from mysql_operator.backup.digest_process import dump_digests
from mysql_operator.backup.pipeline import option_file, tool_check
from mysql_operator.backup.pitr import local_launch, sidecar_launch
from mysql_operator.backup.sidecar import SidecarError, SidecarProcess
from mysql_operator.backup.stream import DumpStream


def producer(
    scope: contextlib.ExitStack, req: BackupRequest, src: Source, db_password: str, tls, stream: DumpStream
):
    """What produces the backup's bytes, entered into `scope`: (the CLONE copy, MySQL physical,
    None otherwise; the donor's offer, MariaDB physical, None otherwise; the argv whose stdout
    carries the bytes: the tar of the copy or the dump tool, [] for a donor's stream; where a
    donor's stream is unpacked for its table digests, None unless asked). A CLONE copy's table
    digests go into `stream` (copy_digests); a donor's, once its stream ended (mariadb_digests)."""
    source = src.candidate
    if src.donated:
        assert tls is not None
        try:
            offer = scope.enter_context(
                mariadb_copy.requested(source.endpoint.host, req.seed_port, db_password, tls)
            )
        except mariadb_copy.CopyError as e:
            raise BackupError(f"the physical copy of {src.name}: {e}") from None
        unpacked = (
            scope.enter_context(mariadb_copy_tables.unpacking(req.tools_dir or "", req.scratch_dir))
            if req.copy_digests
            else None
        )
        return None, offer, [], unpacked
    if src.physical_copy:
        try:
            copy = scope.enter_context(
                physical.cloned(
                    req.tools_dir or "",
                    source.endpoint,
                    db_password,
                    req.tls_ca,
                    copy_server.recipient_plugins(src.plugins),
                    scratch=req.scratch_dir,
                    inspect=(
                        (lambda socket, databases: copy_digests(req, src, stream, socket, databases))
                        if req.copy_digests
                        else None
                    ),
                )
            )
        except copy_server.PhysicalError as e:
            raise BackupError(f"the physical copy of {src.name}: {e}") from None
        return copy, None, copy_server.tar_command(copy.data), None
    options = scope.enter_context(option_file(source.endpoint.user, db_password, req.tools_dir))
    argv = commands.dump_command(src.version, source.endpoint, options, src.databases, req.tls_ca)
    launch = sidecar_launch(req.tools_dir, stdin=False) if req.tools_dir else local_launch
    try:  # a dump tool of an older series than the server's, or none: fail before dumping
        unfit, _ = tool_check(launch, argv[0], src.version)
    except (RuntimeError, OSError) as e:  # SidecarError, or not installed here
        raise BackupError(f"{argv[0]} --version: {e}") from None
    if unfit:
        raise BackupError(unfit)
    return None, None, argv, None


def mariadb_digests(
    req: BackupRequest, src: Source, stream: DumpStream, unpacked: mariadb_copy_tables.Unpacking
) -> None:
    """A MariaDB physical copy's table digests, once its whole stream was unpacked: prepared, a
    server started on it and dumped as copy_digests dumps a MySQL copy's. A step that fails is a
    note in `stream.tables_note`, not a failed backup (as a failed digest dump is)."""
    if stream.tee_error:  # the unpacker stopped reading: what it unpacked is not the whole copy
        stream.tables, stream.tables_note = None, f"the copy could not be unpacked whole: {stream.tee_error}"
        return
    try:
        unpacked.inspect(lambda socket, databases: copy_digests(req, src, stream, socket, databases))
    except copy_server.PhysicalError as e:
        told = "" if req.key else f": {e}"  # a server's log may name a table
        stream.tables, stream.tables_note = None, f"the copy could not be read for its table digests{told}"


def copy_digests(
    req: BackupRequest, src: Source, stream: DumpStream, socket: str, databases: list[str]
) -> None:
    """A physical copy's table digests, as a logical backup records its own: while a server runs
    on the copy (physical.cloned's `inspect`, mariadb_copy_tables' for MariaDB), the dump tool of the sidecar - the same tool,
    with the options that shape the rows, as a restore's check dumps the restored server with
    (commands.copy_dump_command) - dumps the copy's `databases` over that server's socket into a
    DigestProcess, in this Job; the dump's bytes go nowhere else. The tables go into
    `stream.tables`; when they cannot be read the backup goes on without them, the reason in
    `stream.tables_note` - without the dump tool's message when the backup is encrypted (it may
    name a database or table, which an encrypted backup's manifest only holds sealed)."""
    if not databases:
        stream.tables, stream.tables_note = {}, ""
        return
    argv = commands.copy_dump_command(src.version, socket, databases)
    try:
        read = dump_digests(SidecarProcess(argv, req.tools_dir or ""))
    except (SidecarError, OSError) as e:
        stream.tables, stream.tables_note = (
            None,
            f"the dump of the copy for its table digests did not run: {e}",
        )
        return
    note = read.note
    if read.status != 0:
        told = "" if req.key else read.stderr.text()
        note = f"{argv[0]} of the copy for its table digests failed (exit status {read.status})" + (
            f": {told}" if told else ""
        )
    stream.tables, stream.tables_note = read.tables, note
