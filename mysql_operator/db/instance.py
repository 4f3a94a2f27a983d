"""One MySQL/MariaDB server as the operator sees it: the operations on one bounded connection
(db/session.py), by concern - replication (db/replica_control.py), fencing (db/fencing.py), binary
logs (db/server_binlogs.py), MySQL CLONE (db/clone.py), accounts and SQL objects
(db/server_accounts.py) - and here what the decision reads of it (`observe`) and its TLS."""

from __future__ import annotations

import contextlib
import datetime as dt

import pymysql

from mysql_operator.db.clone import Cloning
from mysql_operator.db.fencing import Fencing
from mysql_operator.db.observation import (
    GTID_TEXT_CHARS,
    TEXT_CHARS,
    InstanceError,
    Observation,
    parse_tls_time,
)
from mysql_operator.db.replica_control import ReplicaControl
from mysql_operator.db.server_accounts import ServerAccounts
from mysql_operator.db.server_binlogs import ServerBinlogs
from mysql_operator.db.session import its_failure, short


class Instance(ReplicaControl, Fencing, ServerBinlogs, Cloning, ServerAccounts):
    """Operations on one server. Not thread-safe: one Instance per thread."""

    # -- observe ---------------------------------------------------------------------------------
    def observe(self) -> Observation:
        """Everything the decision needs; `reachable=False` (never an exception) when it is down.
        When the connection kept from an earlier call broke (not a timeout: a server that ended
        or restarted since), a new one is tried at once: what it meets (a refusal, the server
        again) says more than the old one's end (failover evidence, observer.down_evidence).
        A slow statements' connection past its reuse window is closed here (it would otherwise
        hold a session on the server until the next slow statement)."""
        self._drop_patient_if_idle()
        kept = self._conn is not None
        o = self._observe()
        if not o.reachable and kept and self._conn is None and "timed out" not in (o.error or ""):
            o = self._observe()
        return o

    def _observe(self) -> Observation:
        try:
            d = self.dialect
            # four statements (MariaDB: five while its one binary log is the active file), none
            # remembered: a change made through any connection is seen at the next pass
            server_id, uuid, read_only, hostname, report_host, executed, purged = self._run(
                d.server_state_sql(TEXT_CHARS, GTID_TEXT_CHARS + 1)
            )[0]
            for which, text in (("executed", executed), ("purged", purged)):
                if text is not None and len(text) > GTID_TEXT_CHARS:
                    raise InstanceError(
                        f"{self.name}: its {which} GTID set is longer than {GTID_TEXT_CHARS} "
                        "characters: refused (a set read in part would be a wrong one)"
                    )
            replica = self.replica_status()
            receiving = replica is not None and replica.io_running
            state = {str(k).lower(): v for k, v in self._run(d.semisync_state_sql(heartbeats=receiving))}
            acks = state.get(d.semisync_ack_count.lower()) if d.semisync_ack_count else None
            uptime = state.get("uptime")
            clients = state.get(d.semisync_source_clients.lower())
            heartbeats = state.get(d.HEARTBEATS)

            def on(name: str) -> bool:
                return str(state.get(name.lower(), "")).upper() == "ON"

            return Observation(
                reachable=True,
                version=d.version,
                server_id=int(server_id),
                server_uuid=uuid,
                hostname=hostname,
                report_host=report_host,
                read_only=bool(int(read_only)),
                executed=d.parse_gtids(executed),
                purged=d.parse_gtids(purged) if purged is not None else self.purged_gtids(),
                replica=replica,
                semisync_source_enabled=on(d.semisync_source_enabled),
                semisync_source_active=on(d.semisync_source_status),
                semisync_replica_enabled=on(d.semisync_replica_enabled),
                semisync_replica_active=on(d.semisync_replica_status),
                semisync_ack_count=int(acks) if acks is not None else None,
                semisync_clients=int(clients) if clients is not None else None,
                heartbeats=int(heartbeats) if heartbeats is not None else None,
                uptime=float(uptime) if uptime is not None else None,
                clone=self.clone_status() if d.flavor.value == "mysql" else None,
            )
        except InstanceError as e:
            self.close()
            return Observation(reachable=False, error=short(str(e)))
        except Exception as e:  # noqa: BLE001 - whatever a server sent (a value that does not
            # parse, a GTID set that does not), it is that server's failure, never the pass's
            self.close()
            return Observation(reachable=False, error=str(self._error(e, "observing failed")))

    @its_failure
    def tls_not_after(self) -> dt.datetime | None:
        """When the certificate the server presents to new connections stops being valid (UTC);
        None without TLS. Asked on a new connection: MariaDB reports the certificate of the
        connection's own TLS session, which an open connection keeps across a reload."""
        conn = self._fresh(self.read_timeout)
        try:
            rows = self._exchange(conn, self.dialect.tls_not_after_sql(), ())
            row = rows[0] if rows else None
        except pymysql.err.MySQLError as e:
            raise self._error(e, "reading Ssl_server_not_after failed") from None
        finally:
            with contextlib.suppress(Exception):
                conn.close()
        return parse_tls_time(row[1] if row else "")

    def reload_tls(self) -> None:
        """Serve the certificate, key and CA now in the server's files to new connections (MariaDB
        FLUSH NO_WRITE_TO_BINLOG SSL: RELOAD; MySQL ALTER INSTANCE RELOAD TLS: CONNECTION_ADMIN),
        never binlogged. Open connections, replicas' included, keep their session."""
        self._run(self.dialect.reload_tls())
