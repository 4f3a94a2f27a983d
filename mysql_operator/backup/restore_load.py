"""A verified dump loaded into a server: the object streamed again (pinned to what was verified),
decrypted and decompressed into the command-line client as the narrow load account, its sha256
checked again on the way."""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from contextlib import contextmanager
from dataclasses import replace
from typing import Callable, Iterator

from mysql_operator.api import S3
from mysql_operator.backup import commands, storage
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.dump_text import DumpFilter
from mysql_operator.backup.crypto import CryptoError, Key
from mysql_operator.backup.load_account import LoadAccount
from mysql_operator.backup.manifest import Manifest
from mysql_operator.backup.pipeline import (
    TailBuffer,
    drain,
    option_file,
    pass_on,
    spawn,
    stop,
)
from mysql_operator.backup.sidecar import SidecarError, SidecarProcess
from mysql_operator.db.flavor import Flavor, ServerVersion
from mysql_operator.db.observation import InstanceError
from mysql_operator.backup.restore_pieces import PieceLoad
from mysql_operator.backup.restore_source import check_object, plaintext_opener
from mysql_operator.backup.restore_types import RestoreError, Target, instance_of


def load_dump(
    client, s3: S3, m: Manifest, etag: str, target: Target, version: ServerVersion, key: Key | None
) -> tuple[int, str | None]:
    """The dump loaded into `target` as the load account (load_account.py); returns the bytes
    read and, MySQL, the GTID set of the dump's GTID statement (held back: see DumpFilter)."""
    with as_load_account(target) as (loader, account):
        dump = DumpFilter(
            commands.quote_account(target.definer) if target.definer else None,
            on_database=account.grant,
            strip_gtid=version.flavor is Flavor.MYSQL,
        )
        ep = Endpoint(loader.host, loader.port, loader.user)
        with option_file(loader.user, loader.password, loader.tools_dir) as options:
            client_argv = commands.client_command(version, ep, options, loader.tls_ca)
            secrets = (loader.password, target.password)
            pieces = None
            if target.load_workers > 1 and target.spool:
                pieces = PieceLoad(
                    client_argv,
                    loader.tools_dir,
                    target.spool,
                    target.load_workers,
                    secrets,
                    change=dump,
                    hint=_local_infile_hint,
                )
            size = stream_into(
                client,
                s3,
                m,
                etag,
                key,
                client_argv,
                loader.tools_dir,
                secrets,
                _local_infile_hint,
                change=dump,
                pieces=pieces,
            )
        account.problems += dump.errors
    return size, dump.gtid_purged


@contextmanager
def as_load_account(target: Target) -> Iterator[tuple[Target, LoadAccount]]:
    """`target` as the load account, made for the block and dropped after it (LoadAccount).
    RestoreError with what it refused (a system database, a changed global setting) added to the
    block's own, or alone."""
    account = LoadAccount(lambda: instance_of(target))
    where = f"{target.host}:{target.port}"
    try:
        with account:
            try:
                yield replace(target, user=account.user, password=account.password), account
            except RestoreError as e:
                if account.problems:
                    raise RestoreError(f"{e} ({'; '.join(account.problems)})") from None
                raise
    except InstanceError as e:
        raise RestoreError(f"the load account on {where}: {e}") from None
    if account.problems:
        raise RestoreError(f"{where}: {'; '.join(account.problems)}")


def _local_infile_hint(text: str) -> str:
    if "local infile" in text.lower() or "loading local data" in text.lower():
        return (
            " (the dump reads a local file with LOAD DATA LOCAL INFILE: restores never "
            "allow it; load such data after the restore, from the application)"
        )
    return ""


def stream_into(
    client,
    s3: S3,
    m: Manifest,
    etag: str,
    key: Key | None,
    argv: list[str],
    tools_dir: str | None,
    secrets: tuple[str, ...] = (),
    hint: Callable[[str], str] = lambda _text: "",
    change: Callable[[bytes], bytes] | None = None,
    pieces: PieceLoad | None = None,
) -> int:
    """The backup's data object (pinned to the verified `etag`), decrypted and decompressed, on
    the standard input of `argv`: a client loading a dump, or tar unpacking a copy; run by the
    client-tools sidecar when `tools_dir` is set. Returns the bytes read; the size and sha256 are
    checked again. `hint(its error text)` adds advice to a failure of `argv`; `change`, what each
    piece of the plaintext becomes on its way (pipeline.pass_on). `pieces`: a dump loaded in
    pieces at once instead (backup/restore_pieces.py; it has the client, the change and the hint)."""
    _, decompress_argv, _ = commands.compressor(m.compression)
    dec = cli = None
    cutting: threading.Thread | None = None
    dec_err, cli_err = TailBuffer(), TailBuffer()
    try:
        dec = spawn(decompress_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        readers = []
        if pieces is not None:
            cutting = threading.Thread(target=pieces.run, args=(dec.stdout,), daemon=True, name="pieces")
            cutting.start()
        elif tools_dir:  # the sidecar's tool reads what this process passes on
            try:
                cli = SidecarProcess(argv, tools_dir, stdin=True)
            except SidecarError as e:
                raise RestoreError(str(e)) from None
            readers.append(pass_on(dec.stdout, cli.stdin, change))
            cli.stdout.close()  # loading a dump or unpacking prints nothing
        elif change is not None:
            cli = spawn(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            readers.append(pass_on(dec.stdout, cli.stdin, change))
        else:
            cli = spawn(argv, stdin=dec.stdout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            dec.stdout.close()  # the tool owns the read end now
        readers += [drain(dec.stderr, dec_err), *([drain(cli.stderr, cli_err)] if cli is not None else [])]
        digest, size = hashlib.sha256(), 0
        write_error: BaseException | None = None
        crypto_error: CryptoError | None = None
        opener = plaintext_opener(s3, m, key)
        try:
            fd = dec.stdin.fileno()
            for chunk in storage.iter_object(client, s3, m.data_key, etag):
                digest.update(chunk)
                size += len(chunk)
                for piece in opener.feed(chunk):
                    _write_all(fd, piece)
            _write_all(fd, opener.finish())
        except BrokenPipeError as e:
            write_error = e
        except CryptoError as e:  # verified a moment ago (and pinned to its ETag): unlikely
            crypto_error = e
        finally:
            try:
                dec.stdin.close()
            except BrokenPipeError:
                pass
        dec_rc = dec.wait()
        cli_rc = cli.wait() if cli is not None else 0
        for t in readers:
            t.join(5)
        if cutting is not None:
            cutting.join()  # the pieces still loading, then the rest
        if crypto_error is not None:
            raise RestoreError(f"{crypto_error} (the load stopped there)")
        if pieces is not None and pieces.error is not None:
            raise RestoreError(pieces.error)
        if cli_rc != 0:
            text = cli_err.text(secrets) or "no message"
            raise RestoreError(
                f"{argv[0]} failed loading the backup (exit status {cli_rc}): {text}{hint(text)}"
            )
        if dec_rc != 0 or write_error:
            raise RestoreError(
                f"{decompress_argv[0]} failed (exit status {dec_rc}): "
                f"{dec_err.text(secrets) or write_error or 'no message'}"
            )
        check_object(s3, m, size, digest.hexdigest())
        return size
    finally:
        stop(dec, cli)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
