"""MySQL CLONE on one server: the plugin, a copy started from a donor, the copy's progress."""

from __future__ import annotations

import contextlib
import threading

import pymysql

from mysql_operator.db.observation import (
    CLONE_SESSION_ENDS,
    CloneStatus,
    InstanceError,
    clone_stage,
)
from mysql_operator.db.session import Session, errno_of, its_failure
from mysql_operator.topology import CLONE_FAILED


class Cloning(Session):
    """The copy operations of db/instance.Instance (MySQL)."""

    @its_failure
    def clone_status(self) -> CloneStatus | None:
        """The last copy onto this server (MySQL CLONE), or None: no clone plugin, never cloned.
        One query a pass once the plugin is there (checked once per connection before that)."""
        if self._has_clone is None:
            self._has_clone = self._clone_loaded()
        if not self._has_clone:
            return None
        rows = self._run(
            "SELECT s.STATE, s.ERROR_NO, s.ERROR_MESSAGE, UNIX_TIMESTAMP(s.END_TIME), "
            "UNIX_TIMESTAMP() - (SELECT VARIABLE_VALUE FROM performance_schema.global_status "
            "WHERE VARIABLE_NAME = 'Uptime'), "
            "(SELECT COALESCE(SUM(p.DATA), 0) FROM performance_schema.clone_progress p), "
            "(SELECT COALESCE(SUM(p.ESTIMATE), 0) FROM performance_schema.clone_progress p) "
            "FROM performance_schema.clone_status s"
        )
        if not rows:
            return None
        state, errno, message, ended, booted, copied, total = rows[0]
        stage = clone_stage(
            state,
            int(errno or 0),
            None if ended is None else float(ended),
            None if booted is None else float(booted),
        )
        if stage is None:
            return None
        return CloneStatus(
            stage, (message or "")[:512] if stage == CLONE_FAILED else "", int(copied), int(total)
        )

    def _clone_loaded(self) -> bool:
        return bool(self._run("SELECT 1 FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'clone'"))

    def ensure_clone_plugin(self) -> None:
        """MySQL's clone plugin (donor and recipient): loaded at start by the operator's
        my.cnf; installed here on a server started before that, when it is writable."""
        if not self._clone_loaded():
            try:
                self._run("INSTALL PLUGIN clone SONAME 'mysql_clone.so'")
            except InstanceError as e:
                raise InstanceError(
                    f"{self.name}: the clone plugin is not loaded and cannot be installed on a "
                    f"read-only server ({e}): it is loaded once the server restarts with the "
                    "operator's configuration",
                    e.errno,
                ) from None
        self._has_clone = True

    CLONE_START_WAIT = 3.0  # seconds a new copy is watched for an early refusal

    CLONE_SECONDS = 24 * 3600  # the CLONE statement's deadline: the copy of a whole data directory

    def start_clone(
        self,
        host: str,
        port: int,
        user: str,
        password: str,
        tls_ca: str | None,
        require_ssl: bool | None = None,
    ) -> None:
        """Start replacing this server's data by a copy of host:port's (CLONE INSTANCE, as
        `user`), on a connection of its own in a thread: the copy runs in the server, watched
        through clone_status. An early refusal (privileges, donor unreachable) raises. A copy
        ends with the server restarting on it: under start.sh, which supervises mysqld
        (MYSQLD_PARENT_PID), in place, and this session is lost; without a supervisor the
        statement fails with ER_CLONE_RESTART and the server shuts down, for its container to
        start it on the copy. Neither is a failure. Killing the CLONE session would abort the copy
        and leave the server empty: this connection is never killed, only dropped (the copy goes
        on in the server). `require_ssl` (default: with a CA) encrypts the copy; a CA also verifies
        the donor's certificate."""
        encrypt = bool(tls_ca) if require_ssl is None else require_ssl
        self.ensure_clone_plugin()
        # CLONE is refused under super_read_only; read_only stays on (only accounts with
        # CONNECTION_ADMIN could write, and the copy replaces whatever they would); the server
        # restarts on the copy with super_read_only on again (my.cnf)
        self._run_slow("SET GLOBAL super_read_only = OFF")
        self._run("SET GLOBAL clone_valid_donor_list = %s", (f"{host}:{int(port)}",))
        if tls_ca:
            self._run("SET GLOBAL clone_ssl_ca = %s", (tls_ca,))
        conn = self._fresh(self.CLONE_SECONDS)
        failure: list[InstanceError] = []

        def run() -> None:
            try:
                self._exchange(
                    conn,
                    f"CLONE INSTANCE FROM %s@%s:{int(port)} IDENTIFIED BY %s "
                    + ("REQUIRE SSL" if encrypt else "REQUIRE NO SSL"),
                    (user, host, password),
                    self.CLONE_SECONDS,
                )
            except pymysql.err.MySQLError as e:
                if errno_of(e) not in CLONE_SESSION_ENDS:
                    failure.append(self._error(e, "CLONE INSTANCE failed", [password]))
            finally:
                with contextlib.suppress(Exception):
                    conn.close()

        worker = threading.Thread(target=run, name=f"clone-{self.name}", daemon=True)
        worker.start()
        worker.join(self.CLONE_START_WAIT)
        if failure:
            raise failure[0]
