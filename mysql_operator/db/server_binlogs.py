"""A server's binary logs as the operator reads them: the files and the GTIDs before each, the
purged set (MariaDB has no variable for it), a purge, the events of errant transactions."""

from __future__ import annotations

import contextlib
import re

import pymysql

from mysql_operator.binlogs import BinlogFile, PurgeBefore, PurgeTo
from mysql_operator.db.observation import (
    LOST_CONNECTION,
    InstanceError,
)
from mysql_operator.db.session import Session, its_failure, short

_GTID_NEXT = re.compile(r"GTID_NEXT\s*=\s*'([^']+)'|\bGTID\s+(\d+-\d+-\d+)")


class ServerBinlogs(Session):
    """The binary log operations of db/instance.Instance."""

    @its_failure
    def purged_gtids(self):
        """MariaDB has no variable for it: the header of its oldest binary log. SHOW BINARY LOGS
        waits while a commit waits for a semi-sync acknowledgement (a primary whose replicas are
        gone): then the last set read stands (it grows only by a purge, which waits too), so
        that such a primary is not taken for unreachable and failed over."""
        d = self.dialect
        sql = d.purged_gtids_sql()
        if sql is not None:
            return d.parse_gtids(self.scalar(sql))
        try:
            logs = [(str(r[0]), int(r[1])) for r in self._run("SHOW BINARY LOGS")]
            self._purged = self._header(logs[0], finished=len(logs) > 1) if logs else d.parse_gtids("")
        except InstanceError as e:
            if self._purged is None or e.errno != LOST_CONNECTION:
                raise
        return self._purged

    def _header(self, log: tuple[str, int], finished: bool):
        """The GTIDs before binary log `log` (file, size); a finished file's are read once."""
        previous = self._binlog_headers.get(log)
        if previous is None:
            previous = self._gtids_before(log[0])
            if finished:  # it never changes again
                self._binlog_headers[log] = previous
        return previous

    def _gtids_before(self, file: str):
        """The GTIDs written before binary log `file`, from its header event: Previous_gtids
        (MySQL), Gtid_list (MariaDB). Empty when it has none (a server's very first file)."""
        for row in self._run("SHOW BINLOG EVENTS IN %s LIMIT 4", (file,), dict_rows=True):
            if row["Event_type"] in ("Gtid_list", "Previous_gtids"):
                return self.dialect.parse_gtids(row["Info"].strip("[]"))
        return self.dialect.parse_gtids("")

    @its_failure
    def binary_logs(self) -> list[BinlogFile]:
        """This server's binary logs, oldest first, each with the GTIDs written before it (the
        headers of finished files are read once: they never change)."""
        logs = [(str(r[0]), int(r[1])) for r in self._run("SHOW BINARY LOGS")]
        out = [
            BinlogFile(name, size, self._header((name, size), finished=i < len(logs) - 1))
            for i, (name, size) in enumerate(logs)
        ]
        live = set(logs)
        for key in [k for k in self._binlog_headers if k not in live]:
            del self._binlog_headers[key]
        return out

    def purge_binary_logs(self, plan: PurgeBefore | PurgeTo) -> list[str]:
        """Carry out a purge plan (binlogs.plan_purge); the files that went. The server keeps a
        file a connected replica is reading whatever the plan says."""
        before = [str(r[0]) for r in self._run("SHOW BINARY LOGS")]
        if isinstance(plan, PurgeTo):
            self._run("PURGE BINARY LOGS TO %s", (plan.file,))
        else:
            self._run("PURGE BINARY LOGS BEFORE NOW() - INTERVAL %s SECOND", (int(plan.seconds),))
        after = {str(r[0]) for r in self._run("SHOW BINARY LOGS")}
        return [f for f in before if f not in after]

    ERRANT_SCAN_BYTES = 1024 * 1024 * 1024  # read from one binary log by errant_events

    @its_failure
    def errant_events(self, gtids: str, limit: int = 2000) -> list[str]:
        """The binary log events of the transactions `gtids` (errant ones, about to be discarded),
        one line each ("file:position type info"), newest binary logs first, at most `limit`
        events, looking through the last 4 binary logs. SHOW BINLOG EVENTS lists the tables each
        transaction touched (Table_map) and statement-based events' statements, not row images.
        MariaDB's errant set holds the highest sequence number per server: the record may also
        hold that server's earlier transactions (more than discarded, never less)."""
        d = self.dialect
        wanted = d.parse_gtids(gtids)
        out: list[str] = []
        logs = [r[0] for r in self._run("SHOW BINARY LOGS")][-4:]
        conn = self._fresh(self.slow_timeout)
        try:
            for name in reversed(logs):
                # streamed (the rows are not all held): the cap bounds the time, not the memory
                conn.bound(self.slow_timeout, self.ERRANT_SCAN_BYTES)
                with conn.cursor(pymysql.cursors.SSCursor) as cur:
                    cur.execute("SHOW BINLOG EVENTS IN %s LIMIT 500000", (name,))
                    keep = False
                    for _log, pos, etype, _sid, _end, info in cur.fetchall_unbuffered():
                        if etype.startswith("Gtid") and etype != "Gtid_list" and etype != "Gtids_log":
                            m = _GTID_NEXT.search(info or "")
                            keep = bool(m) and wanted.contains(d.parse_gtids(m.group(1) or m.group(2)))
                        if keep and len(out) < limit:
                            out.append(short(f"{name}:{pos} {etype} {info}"))
        except pymysql.err.MySQLError as e:
            raise self._error(e, "SHOW BINLOG EVENTS failed") from None
        finally:
            with contextlib.suppress(Exception):
                conn.close()
        return out
