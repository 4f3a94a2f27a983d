"""The table digests' process (backup/table_digest.py run as a module): a logical backup's pump
writes the dump to its stdin as it passes to the compressor; once the dump ended, its tables are
read from its stdout. `dump_digests`: a dump read for its digests only (its bytes go nowhere
else): a physical copy's server at backup time, a restored server at a restore's check. A process of its own, so its parsing runs beside the pump and the
compressor rather than under the pump's interpreter lock. It holds no credentials: it gets the
dump's bytes and nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

from mysql_operator.backup.pipeline import TailBuffer, drain, enlarge_pipes, spawn, stop
from mysql_operator.backup.stream import DumpStream
from mysql_operator.backup.table_digest import TableDigest, tables_from_json

ARGV = [sys.executable, "-m", "mysql_operator.backup.table_digest"]


class DigestProcess:
    def __init__(self) -> None:
        self.proc = spawn(
            ARGV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        enlarge_pipes(self.proc.stdin)
        self.err = TailBuffer()
        self._drain = drain(self.proc.stderr, self.err)

    @property
    def stdin(self):
        return self.proc.stdin

    def result(self, stream_note: str = "") -> tuple[dict[str, TableDigest] | None, str]:
        """(the tables, "") once the dump ended and its stdin was closed; (None, why) when they
        could not be read whole - the backup goes on without them."""
        out = self.proc.stdout.read()
        rc = self.proc.wait()
        self._drain.join(5)
        if stream_note:
            return None, stream_note
        if rc != 0:
            return None, f"the table digests failed (exit status {rc}): {self.err.text() or 'no message'}"
        try:
            d = json.loads(out)
            tables = tables_from_json(d["tables"])
        except (ValueError, KeyError, TypeError) as e:
            return None, f"the table digests wrote no tables: {e}"
        if d.get("errors"):
            return None, "the table digests: " + "; ".join(map(str, d["errors"]))
        return tables, ""

    def stop(self) -> None:
        stop(self.proc)


@dataclass(frozen=True)
class DumpTables:
    """What `dump_digests` read: the tables, or why there are none."""

    tables: dict[str, TableDigest] | None
    note: str  # why there are none: the dump tool failed, or its output could not be read whole
    status: int  # the dump tool's exit status
    stderr: TailBuffer  # the end of what it wrote there


def dump_digests(dump) -> DumpTables:
    """The tables of the dump `dump` writes on its stdout (a started process: the sidecar's
    SidecarProcess or a local Popen), through a DigestProcess; the dump's bytes go nowhere else.
    Both processes are ended afterwards, whatever happened."""
    digest = DigestProcess()
    err = TailBuffer()
    try:
        if dump.stdin is not None:
            dump.stdin.close()
        reader = drain(dump.stderr, err)
        stream = DumpStream()
        stream.pump(dump.stdout, digest.stdin)
        rc = dump.wait()
        reader.join(5)
        if rc != 0:
            return DumpTables(None, f"the dump tool failed (exit status {rc})", rc, err)
        tables, note = digest.result(str(stream.error[0]) if stream.error else "")
        return DumpTables(tables, note, rc, err)
    finally:
        stop(dump)
        digest.stop()
