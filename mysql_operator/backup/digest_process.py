"""The table digests' process of a logical backup (backup/table_digest.py run as a module): the
pump writes the dump to its stdin as it passes to the compressor; once the dump ended, its
tables are read from its stdout. A process of its own, so its parsing runs beside the pump and the
compressor rather than under the pump's interpreter lock. It holds no credentials: it gets the
dump's bytes and nothing else."""

from __future__ import annotations

import json
import subprocess
import sys

from mysql_operator.backup.pipeline import TailBuffer, drain, enlarge_pipes, spawn, stop
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
