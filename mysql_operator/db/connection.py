"""The connection to a tenant's server, bounded (db/instance.py connects through it): every
exchange has an overall deadline and a cap on the bytes it reads, the password never leaves in
clear text, and TLS verifies the cluster's CA and the name the server is known by."""

from __future__ import annotations

import functools
import ssl
import time
from typing import Any

import pymysql
from pymysql.constants import CLIENT, CR


MAX_ANSWER = 16 * 1024 * 1024  # bytes one exchange may read (packet headers included)
# authentication plugins that send the password itself: mysql_clear_password, and MariaDB's PAM
# dialog, which answers the prompt "Password: " with it. Refused on every connection, TLS or not
CLEARTEXT_AUTH = frozenset({b"mysql_clear_password", b"dialog"})


class ServerTLS(ssl.SSLContext):
    """TLS that verifies a server's certificate against the cluster's CA; `naming()` is its
    sibling that also checks the name (an Instance's `tls_name`): the operator connects by Pod
    IP, which no certificate names, and checks the name it knows the server by (its Pod's DNS
    name, which the certificates the operator and cert-manager issue carry, and replicas verify
    already). One sibling per CA, the name given per connection (_ForName)."""

    ca_pem: str = ""
    _naming: "ServerTLS | None" = None

    def naming(self) -> "ServerTLS":
        if self.check_hostname:
            return self
        if self._naming is None:
            self._naming = tls_context(self.ca_pem, check_hostname=True)
        return self._naming


def tls_context(ca_pem: str, check_hostname: bool = False) -> ServerTLS:
    """TLS that verifies the server's certificate against the cluster's CA (`ca_pem`): the chain;
    the host name too with check_hostname=True (clients that connect by DNS name); an Instance
    with `tls_name` checks that name, whatever address it connects to."""
    ctx = ServerTLS(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=ca_pem)
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.ca_pem = ca_pem
    return ctx


class _ForName:
    """What pymysql calls of a connection's TLS context (wrap_socket), checking the server's
    certificate for `name` rather than for the address the socket was connected to."""

    def __init__(self, ctx: ssl.SSLContext, name: str):
        self.ctx, self.name = ctx, name

    def wrap_socket(self, sock: Any, **kwargs: Any) -> ssl.SSLSocket:
        kwargs["server_hostname"] = self.name
        return self.ctx.wrap_socket(sock, **kwargs)


@functools.cache
def preferred_tls() -> ssl.SSLContext:
    """The context pymysql builds when given no TLS settings (TLS if the server offers it, its
    certificate not verified), built once: pymysql builds it for every connection, and loading the
    system's CA store into it took 36 ms of CPU per connect (78% of the tests process's samples
    during test_replication.py). Contexts are thread-safe."""
    ctx = ssl.create_default_context()
    ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.options |= ssl.OP_NO_SSLv2 | ssl.OP_NO_SSLv3
    return ctx


class PreferredTLSOnce:
    """A pymysql connection (mixed in before it) that shares `preferred_tls()`."""

    def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
        if isinstance(sslp, dict) and not sslp:  # no settings: pymysql's "preferred" TLS
            return preferred_tls()
        return super()._create_ssl_ctx(sslp)  # type: ignore[misc]


class ServerConnection(PreferredTLSOnce, pymysql.connections.Connection):
    """pymysql's connection with limits a server cannot lift: each exchange (the login, then each
    statement, see `bound`) ends by its deadline and reads at most its cap; the password is never
    sent in clear text; with an `ssl` context, a server that offers no TLS is refused before
    anything is sent. pymysql 1.2 refuses that last one itself; this holds whatever the version.

    The deadline is kept in the one place every read goes through (`_read_bytes`): each socket
    read waits at most the time left, so a server that drips a byte before each read_timeout
    ends is cut when the exchange's time is up, not after the whole answer."""

    def __init__(self, *, deadline: float, cap: int, tls_name: str | None = None, **kwargs: Any):
        self._tls_required = kwargs.get("ssl") is not None
        self.bound(deadline, cap)  # the connection phase: the login is one exchange
        super().__init__(defer_connect=True, **kwargs)
        if tls_name is not None and self._tls_required:
            self.ctx = _ForName(self.ctx, tls_name)
        self.connect()

    def bound(self, seconds: float, cap: int) -> None:
        """The next exchange ends within `seconds` and reads at most `cap` bytes."""
        self._seconds, self._until, self._cap, self._left = seconds, time.monotonic() + seconds, cap, cap

    def _read_bytes(self, num_bytes: int) -> bytes:
        self._left -= num_bytes
        if self._left < 0:  # refused before reading (or allocating) any of it
            self._force_close()
            raise pymysql.err.OperationalError(
                CR.CR_NET_PACKET_TOO_LARGE, f"the answer is larger than {self._cap} bytes: refused"
            )
        out: list[bytes] = []  # one chunk, the usual case, is returned as it is (no copy)
        got = 0
        while got < num_bytes:
            left = self._until - time.monotonic()
            cut = left < self._read_timeout  # this read waits for the deadline, not read_timeout
            if left <= 0:
                raise self._late()
            wait = left if cut else self._read_timeout
            if wait != self._current_timeout:
                self._sock.settimeout(wait)
                self._current_timeout = wait
            try:
                chunk = self._rfile.read1(num_bytes - got)
            except InterruptedError:
                continue
            except TimeoutError:
                raise (self._late() if cut else self._lost("timed out")) from None
            except OSError as e:
                raise self._lost(str(e)) from None
            if not chunk:
                raise self._lost("closed by the server")
            out.append(chunk)
            got += len(chunk)
        return b"".join(out)

    def _late(self) -> pymysql.err.OperationalError:
        # "timed out": never retried (_transient); 2013 in a statement's: observer.stuck()
        return self._lost(f"timed out: no complete answer within {self._seconds:g}s, the deadline")

    def _lost(self, why: str) -> pymysql.err.OperationalError:
        self._force_close()
        return pymysql.err.OperationalError(CR.CR_SERVER_LOST, f"Lost connection to MySQL server ({why})")

    def _request_authentication(self) -> None:
        if self._tls_required and not self.server_capabilities & CLIENT.SSL:
            raise pymysql.err.OperationalError(
                CR.CR_SSL_CONNECTION_ERROR,
                "the server offers no TLS and TLS is required: refused, nothing sent",
            )
        super()._request_authentication()

    def _process_auth(self, plugin_name: bytes, auth_packet: Any, *args: Any, **kwargs: Any) -> Any:
        if plugin_name in CLEARTEXT_AUTH:
            raise pymysql.err.OperationalError(
                CR.CR_AUTH_PLUGIN_CANNOT_LOAD,
                f"the server asked for authentication plugin {plugin_name.decode(errors='replace')[:64]!r}, "
                "which sends the password in clear text: refused, the password was not sent",
            )
        return super()._process_auth(plugin_name, auth_packet, *args, **kwargs)
