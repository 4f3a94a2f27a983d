"""One connection to a tenant's server, bounded and redacted: the plumbing every statement the
operator sends goes through (db/instance.py puts the server's operations on it).

Connections use short connect/read timeouts and autocommit; transient connection failures are
retried with tenacity. Every error leaves as `InstanceError` whose text never contains a password
(the instance's own, or any password passed to a statement): pymysql errors can quote the SQL.

A server is a tenant's (it chooses the image): nothing it sends can hold a thread or the memory
the other clusters need (db/connection.py): every exchange has an overall deadline (not only one per
socket read) and a cap on the bytes it reads, and the password never leaves in clear text (no
cleartext authentication plugin, no plaintext when TLS is asked for). Error texts are short: a
server's own words are cut (`MESSAGE_CHARS`).
"""

from __future__ import annotations

import contextlib
import functools
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

import pymysql
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

from mysql_operator.db.connection import MAX_ANSWER, ServerConnection, ServerTLS
from mysql_operator.db.dialect import Dialect
from mysql_operator.db.dialects import dialect_for
from mysql_operator.db.flavor import detect
from mysql_operator.db.observation import (
    TEXT_CHARS,
    TRANSIENT_ERRNOS,
    InstanceError,
)
from mysql_operator.redaction import redact

MESSAGE_CHARS = 300  # of an error's own text (a server's, the driver's) kept in InstanceError
# a slow statement's connection is used again for the next one within this many seconds (see
# Session._patient); an older one is closed and a new one made
PATIENT_REUSE_SECONDS = 10.0


def short(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + f"... ({len(text)} characters)"


def errno_of(e: BaseException) -> int | None:
    if isinstance(e, pymysql.err.MySQLError) and e.args and isinstance(e.args[0], int):
        return e.args[0]
    return None


def _transient(e: BaseException) -> bool:
    """Worth another attempt: refused or dropped connections. Not a timeout: a hung server
    will not answer the next attempt either, and observation must stay quick."""
    return (
        isinstance(e, pymysql.err.OperationalError)
        and errno_of(e) in TRANSIENT_ERRNOS
        and "timed out" not in str(e)
    )


def its_failure(method):
    """For the methods that read a server's answer into values: whatever it answered that does
    not parse (a tenant's server chooses what it says) is that server's InstanceError, like a
    failed statement, never another exception that would end the caller's pass."""

    @functools.wraps(method)
    def wrapper(self: "Session", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except InstanceError:
            raise
        except Exception as e:  # noqa: BLE001 - see above
            raise self._error(e, f"{method.__name__.strip('_')}: its answer does not parse") from None

    return wrapper


@dataclass
class Session:
    """One server's connection and what every operation on it shares (the answers remembered
    per connection, the binary log headers read). Not thread-safe: one per thread."""

    host: str | None  # None: no address yet (unreachable, never localhost)
    port: int
    user: str
    password: str = field(repr=False)
    name: str = ""
    connect_timeout: float = 1.0
    read_timeout: float = 5.0
    connect_attempts: int = 3
    slow_timeout: float = 30.0  # statements that wait on the server: STOP REPLICA, read_only
    # seconds one exchange may take in all (a statement and its whole answer; a login); None:
    # read_timeout. Slow statements have their own (slow_timeout, wait_for's timeout, CLONE)
    deadline: float | None = None
    max_answer: int = MAX_ANSWER  # bytes one exchange may read
    tls: ssl.SSLContext | None = field(default=None, repr=False)  # see tls_context()
    # the name the server's certificate must carry (with a ServerTLS `tls`); None: the chain only
    tls_name: str | None = None
    plaintext: bool = False  # True: never TLS, not even the driver's unverified TLS when it can (tls None)
    _conn: ServerConnection | None = field(default=None, repr=False)
    _dialect: Dialect | None = field(default=None, repr=False)
    _has_clone: bool | None = field(default=None, repr=False)  # per connection; None: not checked
    # the GTIDs before each finished binary log, by (file, size): read once, from its header
    _binlog_headers: dict = field(default_factory=dict, repr=False)
    _purged: Any = field(default=None, repr=False)  # the last purged set read (MariaDB), see purged_gtids
    _patient_conn: ServerConnection | None = field(default=None, repr=False)  # see _patient
    _patient_at: float = field(default=float("-inf"), repr=False)  # its last statement's end (monotonic)

    def __post_init__(self):
        self.name = self.name or f"{self.host}:{self.port}"

    # -- plumbing --------------------------------------------------------------------------------
    @property
    def exchange_deadline(self) -> float:
        return self.deadline if self.deadline is not None else self.read_timeout

    def _open(self, read_timeout: float | None = None) -> ServerConnection:
        """A new connection; `read_timeout` (default: the instance's) is also the deadline of
        each of its exchanges, unless the instance's `deadline` is shorter than the default."""
        if not self.host:  # pymysql would take "no host" for localhost
            raise pymysql.err.OperationalError(2005, "no address (its Pod has no IP)")
        tls, tls_name = self.tls, None
        if self.tls_name and isinstance(self.tls, ServerTLS):  # the name checked, see ServerTLS
            tls, tls_name = self.tls.naming(), self.tls_name

        @retry(
            retry=retry_if_exception(_transient),
            stop=stop_after_attempt(self.connect_attempts),
            wait=wait_exponential(multiplier=0.1, max=0.5),
            reraise=True,
        )
        def attempt():
            return ServerConnection(
                deadline=self.connect_timeout + self.exchange_deadline,
                cap=self.max_answer,
                host=self.host,
                port=self.port,
                user=self.user,
                password=self.password,
                connect_timeout=self.connect_timeout,
                read_timeout=read_timeout or self.read_timeout,
                write_timeout=read_timeout or self.read_timeout,
                autocommit=True,
                charset="utf8mb4",
                ssl=tls,
                ssl_disabled=self.plaintext,
                tls_name=tls_name,
            )

        return attempt()

    def _error(self, e: BaseException, what: str, secrets: Iterable[str | None] = ()) -> InstanceError:
        """`e` as this server's failure: redacted first (a cut could split a secret), then cut."""
        text = redact(str(e) or type(e).__name__, [self.password, *secrets])
        return InstanceError(f"{self.name}: {what}: {short(text)}", errno_of(e))

    def _exchange(
        self, conn: ServerConnection, sql: str, args: tuple, seconds: float | None = None, cursor: Any = None
    ) -> list:
        """One statement and its whole answer, within `seconds` (default: the instance's
        deadline) and `max_answer` bytes."""
        conn.bound(seconds or self.exchange_deadline, self.max_answer)
        with conn.cursor(cursor or pymysql.cursors.Cursor) as cur:
            cur.execute(sql, args or None)
            return list(cur.fetchall())

    def _fresh(self, seconds: float) -> ServerConnection:
        """A connection of its own, whose exchanges may take `seconds` each."""
        try:
            return self._open(read_timeout=seconds)
        except pymysql.err.MySQLError as e:
            raise self._error(e, "cannot connect") from None

    def close(self) -> None:
        self._drop_patient()
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - already broken
                pass
            self._conn = None
            self._has_clone = None
            self._binlog_headers.clear()  # the next connection may reach another server's files

    def _connection(self) -> ServerConnection:
        if self._conn is None:
            try:
                self._conn = self._open()
            except pymysql.err.MySQLError as e:
                raise self._error(e, "cannot connect") from None
        return self._conn

    def _run(
        self, sql: str, args: tuple = (), secrets: Iterable[str | None] = (), dict_rows: bool = False
    ) -> list:
        conn = self._connection()
        try:
            return self._exchange(conn, sql, args, cursor=pymysql.cursors.DictCursor if dict_rows else None)
        except pymysql.err.MySQLError as e:
            if isinstance(e, (pymysql.err.OperationalError, pymysql.err.InterfaceError)):
                self.close()  # the next call reconnects
            raise self._error(e, sql.split(" ")[0] + " failed", secrets) from None
        except Exception as e:  # noqa: BLE001 - the driver's own breakage (it closed the socket
            # and re-raised, e.g. AttributeError on a connection it had already torn down)
            self.close()
            raise self._error(e, sql.split(" ")[0] + " failed (connection broken)", secrets) from None

    def _run_slow(self, sql: str, args: tuple = (), secrets: Iterable[str | None] = ()) -> None:
        """A statement that may legitimately wait (STOP REPLICA while the IO thread reconnects to a
        hung source, read_only waiting for commits): on the connection slow statements share
        (`_patient`), with a longer read timeout. Only idempotent statements come here: one
        sent on a reused connection the server had already closed is sent once more on a new one."""
        self._patiently(sql, args, self.slow_timeout, sql.split(" ")[0] + " failed", secrets)

    def _patient(self) -> tuple[ServerConnection, bool]:
        """The connection slow statements share, its read timeout `slow_timeout`, and whether it
        is one already used. A failover sends several in a row to the same servers (stop the IO
        threads, again to fence, wait for the relay log, promote: read_only off twice on MySQL);
        a new TLS login for each took 0.1-0.3 s of it on a busy machine. Used again only within
        PATIENT_REUSE_SECONDS of its last statement (an older one is closed: a restarted server
        would have cut it), and never after an error or close()."""
        self._drop_patient_if_idle()
        if self._patient_conn is None:
            self._patient_conn = self._fresh(self.slow_timeout)
            return self._patient_conn, False
        return self._patient_conn, True

    def _drop_patient_if_idle(self) -> None:
        if time.monotonic() - self._patient_at > PATIENT_REUSE_SECONDS:
            self._drop_patient()

    def _drop_patient(self) -> None:
        if self._patient_conn is not None:
            with contextlib.suppress(Exception):  # already closed by the driver
                self._patient_conn.close()
            self._patient_conn = None

    def _patiently(
        self, sql: str, args: tuple, seconds: float, what: str, secrets: Iterable[str | None] = ()
    ) -> list:
        """One idempotent exchange on `_patient`'s connection within `seconds` (at most
        slow_timeout); once more on a new connection when a reused one was found cut (never after
        a timeout: the server was there, only slow)."""
        conn, reused = self._patient()
        try:
            rows = self._exchange(conn, sql, args, seconds)
        except pymysql.err.MySQLError as e:
            self._drop_patient()
            if reused and _transient(e):  # the next connection is a new one: tried once more only
                return self._patiently(sql, args, seconds, what, secrets)
            raise self._error(e, what, secrets) from None
        except Exception as e:  # noqa: BLE001 - the driver's own breakage, as in _run
            self._drop_patient()
            raise self._error(e, what + " (connection broken)", secrets) from None
        self._patient_at = time.monotonic()
        return rows

    def execute(self, sql: str, args: tuple = (), secrets: Iterable[str | None] = ()) -> list:
        return self._run(sql, args, secrets)

    def scalar(self, sql: str, args: tuple = ()) -> Any:
        rows = self._run(sql, args)
        return rows[0][0] if rows else None

    @property
    @its_failure
    def dialect(self) -> Dialect:
        if self._dialect is None:
            version, comment = self._run(
                f"SELECT LEFT(VERSION(), {TEXT_CHARS}), LEFT(@@version_comment, {TEXT_CHARS})"
            )[0]
            self._dialect = dialect_for(detect(version, comment))
        return self._dialect

    def _has_variable(self, name: str) -> bool:
        return bool(self._run("SHOW GLOBAL VARIABLES LIKE %s", (name,)))

    def _status_is_on(self, name: str) -> bool:
        rows = self._run("SHOW GLOBAL STATUS LIKE %s", (name,))
        return bool(rows) and str(rows[0][1]).upper() == "ON"
