"""A small fake MySQL server for faults no real server produces on demand: a real TCP socket on
127.0.0.1 speaking just enough of the client/server protocol (handshake v10, OK, a text result
set) for pymysql to log in and run statements, and misbehaving as a hostile tenant's server would.

    with FakeMySQL(answer=lambda sql: Rows(("v",), [("x" * 10,)])) as server:
        Instance("127.0.0.1", server.port, "operator", "pw").scalar("SELECT 1")

`answer(sql)` says what a query gets: `OK` (also the default for SET statements), `Rows`, `Huge`
(one value of that many bytes, streamed in protocol packets without ever being held in memory) or
`Drip` (the answer one byte every few seconds) or `Silent` (no answer ever: the connection stays open);
`serving(**state)` answers observe()'s statements as a server with that state would (a wrong
server_id, a GTID set of 10,000 intervals). `tls_offered=False` (the default) leaves the TLS
capability out of the handshake; `auth_switch` asks the client to switch to that authentication plugin (e.g.
mysql_clear_password) after its first response. Every byte a client sent is kept in `received`
(an assertion can check a password never arrived) and every query in `queries`.
`tls_offered=True` only puts the capability in the greeting: the server cannot speak TLS;
`tls=<server SSLContext>` speaks it (a hostile tenant's server has its cluster's certificate).
`host`/`port` choose the listening address (default 127.0.0.1, any free port).
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

PROTOCOL_41, SECURE_CONNECTION, PLUGIN_AUTH, SSL, TRANSACTIONS = 0x200, 0x8000, 0x80000, 0x800, 0x2000
LONG_PASSWORD, LONG_FLAG = 0x1, 0x4
MAX_PAYLOAD = 0xFFFFFF  # a longer payload continues in the next packet
VAR_STRING, UTF8MB4 = 0xFD, 255


@dataclass(frozen=True)
class OK:
    pass


@dataclass(frozen=True)
class Rows:
    columns: Sequence[str]
    rows: Sequence[Sequence[str | None]]


@dataclass(frozen=True)
class Huge:
    """One row with one value of `size` bytes."""

    size: int


@dataclass(frozen=True)
class Drip:
    """`reply`'s bytes sent one at a time, `every` seconds apart."""

    reply: Rows
    every: float


@dataclass(frozen=True)
class Silent:
    """No answer at all: the server keeps the connection open and never sends a byte."""


@dataclass(frozen=True)
class Err:
    """An error packet, as a server refuses a statement."""

    errno: int
    message: str
    sqlstate: str = "HY000"


Reply = OK | Rows | Huge | Drip | Silent | Err


def version_rows(version: str = "8.4.3", comment: str = "MySQL Community Server - GPL") -> Rows:
    return Rows(("VERSION()", "@@version_comment"), [(version, comment)])


def default_answer(sql: str) -> Reply:
    if "VERSION()" in sql:
        return version_rows()
    return OK()


def on_version(reply: Reply) -> Callable[[str], Reply]:
    """`reply` to the query of VERSION() (the first a client of the operator sends after its
    login), the default answers to the rest (the driver's SET NAMES, autocommit)."""
    return lambda sql: reply if "VERSION()" in sql else default_answer(sql)


def serving(**overrides: str) -> Callable[[str], Reply]:
    """Answers to observe()'s statements as a MySQL server in that state would: server_state's
    row (keys of `overrides`: server_id, uuid, read_only, hostname, report_host, executed,
    purged), no replica status, Uptime; the default answers to the rest."""
    state = {
        "server_id": "1",
        "uuid": "3e11fa47-71ca-11e1-9e33-c80aa9429562",
        "read_only": "0",
        "hostname": "db-0",
        "report_host": "db-0",
        "executed": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5",
        "purged": "",
    } | overrides

    def answer(sql: str) -> Reply:
        if "@@server_id" in sql:
            return Rows(tuple(state), [tuple(state.values())])
        if "REPLICA STATUS" in sql or "SLAVE STATUS" in sql:
            return Rows(("Replica_IO_State",), [])
        if "CONNECTION_ID" in sql:
            return Rows(("id",), [("7",)])
        if "VARIABLE_NAME" in sql:
            return Rows(("VARIABLE_NAME", "VARIABLE_VALUE"), [("Uptime", "1000")])
        if sql.lstrip().upper().startswith(("SELECT", "SHOW")) and "VERSION()" not in sql:
            return Rows(("x",), [])
        return default_answer(sql)

    return answer


def lenenc(n: int) -> bytes:
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n)
    if n < 1 << 24:
        return b"\xfd" + struct.pack("<I", n)[:3]
    return b"\xfe" + struct.pack("<Q", n)


def lenenc_str(b: bytes) -> bytes:
    return lenenc(len(b)) + b


class FakeMySQL:
    def __init__(
        self,
        answer: Callable[[str], Reply] = default_answer,
        tls_offered: bool = False,
        auth_switch: str | None = None,
        greeting_every: float | None = None,
        tls: ssl.SSLContext | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        self.answer = answer
        self.tls = tls
        self.tls_offered = tls_offered or tls is not None
        self.auth_switch = auth_switch
        self.greeting_every = greeting_every  # the greeting itself dripped, this many seconds a byte
        self.received = bytearray()
        self.queries: list[str] = []
        self.logins = 0  # handshake responses received
        self.host = host
        self._listener = socket.create_server((host, port))
        self.port = self._listener.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="fake-mysql", daemon=True)

    def __enter__(self) -> "FakeMySQL":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._closed.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not)
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            for c in self._conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                c.close()
        self._thread.join(5)

    @property
    def name(self) -> str:
        return f"{self.host}:{self.port}"

    # -- the protocol ------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._session(conn)
        except (OSError, ConnectionError, EOFError):
            pass  # the client went away (as the operator does when it refuses an answer)
        finally:
            conn.close()

    def _recv(self, conn: socket.socket, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = conn.recv(n - len(out))
            if not chunk:
                raise EOFError
            with self._lock:
                self.received += chunk
            out += chunk
        return out

    def _read_packet(self, conn: socket.socket) -> tuple[int, bytes]:
        head = self._recv(conn, 4)
        size = head[0] | head[1] << 8 | head[2] << 16
        return head[3], self._recv(conn, size)

    @staticmethod
    def _packet(seq: int, payload: bytes) -> bytes:
        return struct.pack("<I", len(payload))[:3] + bytes([seq % 256]) + payload

    def _greeting(self) -> bytes:
        caps = PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH | TRANSACTIONS | LONG_PASSWORD | LONG_FLAG
        if self.tls_offered:
            caps |= SSL
        salt = b"abcdefghijklmnopqrst"
        return (
            b"\x0a8.4.3-fake\x00"
            + struct.pack("<I", 7)
            + salt[:8]
            + b"\x00"
            + struct.pack("<H", caps & 0xFFFF)
            + bytes([UTF8MB4])
            + struct.pack("<H", 2)
            + struct.pack("<H", caps >> 16)
            + bytes([21])
            + b"\x00" * 10
            + salt[8:]
            + b"\x00"
            + b"mysql_native_password\x00"
        )

    def _session(self, conn: socket.socket) -> None:
        greeting = self._packet(0, self._greeting())
        if self.greeting_every is None:
            conn.sendall(greeting)
        else:
            self._drip(conn, greeting, self.greeting_every)
        seq, _response = self._read_packet(conn)
        if self.tls is not None and len(_response) == 32:  # an SSLRequest: TLS, then the login
            conn = self.tls.wrap_socket(conn, server_side=True)
            seq, _response = self._read_packet(conn)
        self.logins += 1
        seq += 1
        if self.auth_switch is not None:
            # the plugin's first data: a scramble, or for MariaDB's PAM dialog its prompt (flag
            # 0x04 a password, 0x01 the last question), which pymysql answers with the password
            data = b"\x05Password: " if self.auth_switch == "dialog" else b"s" * 20 + b"\x00"
            conn.sendall(self._packet(seq, b"\xfe" + self.auth_switch.encode() + b"\x00" + data))
            seq, _ = self._read_packet(conn)  # whatever the client answers the switch with
            seq += 1
        conn.sendall(self._packet(seq, self._ok()))
        while True:
            _, payload = self._read_packet(conn)
            if payload[:1] == b"\x01":  # COM_QUIT
                return
            if payload[:1] != b"\x03":  # COM_PING and the like
                conn.sendall(self._packet(1, self._ok()))
                continue
            sql = payload[1:].decode(errors="replace")
            with self._lock:
                self.queries.append(sql)
            self._reply(conn, self.answer(sql))

    @staticmethod
    def _ok() -> bytes:
        return b"\x00\x00\x00" + struct.pack("<HH", 2, 0)

    def _header(self, columns: Sequence[str]) -> tuple[list[bytes], int]:
        """The packets before a result set's rows: column count, definitions, EOF."""
        out = [self._packet(1, lenenc(len(columns)))]
        seq = 2
        for name in columns:
            definition = (
                lenenc_str(b"def")
                + lenenc_str(b"")
                + lenenc_str(b"")
                + lenenc_str(b"")
                + lenenc_str(name.encode())
                + lenenc_str(name.encode())
                + b"\x0c"
                + struct.pack("<HIBHB", UTF8MB4, 1 << 20, VAR_STRING, 0, 0)
                + b"\x00\x00"
            )
            out.append(self._packet(seq, definition))
            seq += 1
        out.append(self._packet(seq, b"\xfe" + struct.pack("<HH", 0, 2)))
        return out, seq + 1

    def _rows(self, reply: Rows) -> bytes:
        packets, seq = self._header(reply.columns)
        for row in reply.rows:
            payload = b"".join(b"\xfb" if v is None else lenenc_str(str(v).encode()) for v in row)
            packets.append(self._packet(seq, payload))
            seq += 1
        packets.append(self._packet(seq, b"\xfe" + struct.pack("<HH", 0, 2)))
        return b"".join(packets)

    def _reply(self, conn: socket.socket, reply: Reply) -> None:
        if isinstance(reply, OK):
            conn.sendall(self._packet(1, self._ok()))
        elif isinstance(reply, Rows):
            conn.sendall(self._rows(reply))
        elif isinstance(reply, Drip):
            self._drip(conn, self._rows(reply.reply), reply.every)
        elif isinstance(reply, Err):
            payload = b"\xff" + struct.pack("<H", reply.errno) + b"#" + reply.sqlstate.encode()[:5]
            conn.sendall(self._packet(1, payload + reply.message.encode()))
        elif isinstance(reply, Silent):
            while conn.recv(4096):  # until the client gives up and closes (or the server stops)
                pass
            raise EOFError
        else:
            self._huge(conn, reply.size)

    def _drip(self, conn: socket.socket, data: bytes, every: float) -> None:
        for i in range(len(data)):
            conn.sendall(data[i : i + 1])
            if self._closed.wait(every):
                return

    def _huge(self, conn: socket.socket, size: int) -> None:
        """One row holding one `size`-byte value, sent in protocol packets of at most MAX_PAYLOAD
        bytes (as a server sends a row longer than 16 MiB), from one reused 1 MiB block."""
        packets, seq = self._header(("VERSION()",))
        conn.sendall(b"".join(packets))
        prefix = lenenc(size)
        left = len(prefix) + size  # the row's payload: the value's length, then the value
        block = memoryview(b"8" * (1 << 20))
        first = True
        while left >= 0:
            n = min(left, MAX_PAYLOAD)
            conn.sendall(struct.pack("<I", n)[:3] + bytes([seq % 256]))
            seq += 1
            body = n
            if first:
                conn.sendall(prefix)
                body -= len(prefix)
                first = False
            while body > 0:
                piece = min(body, len(block))
                conn.sendall(block[:piece])
                body -= piece
            left -= n
            if n < MAX_PAYLOAD:
                break
        conn.sendall(self._packet(seq, b"\xfe" + struct.pack("<HH", 0, 2)))
