"""Password hashes computed on the operator's side, for MariaDB: it writes `CREATE/ALTER USER ...
IDENTIFIED BY 'secret'` (and `USING PASSWORD('secret')`) to its binary log as typed, so every
replica's relay log and every archived binary log (spec.backup.binlogs) would hold the password.
`IDENTIFIED VIA <plugin> USING '<hash>'` (db/statements.identified) puts only the hash there,
as MySQL does by itself (it logs `IDENTIFIED WITH ... AS '<hash>'`).

Pure. Checked against a real server's own hashing in tests/integration/test_accounts.py."""

from __future__ import annotations

import base64
import hashlib

# Ed25519 (RFC 8032, section 5.1) as MariaDB's auth_ed25519 uses it: the secret scalar is made
# from SHA-512 of the password itself (RFC 8032 hashes a 32-byte seed; MariaDB hashes the
# password), and the stored string is the public key in base64 without padding.
_P = 2**255 - 19
_D = -121665 * pow(121666, _P - 2, _P) % _P
_BY = 4 * pow(5, _P - 2, _P) % _P  # the base point's y; its x is recovered below


def _recover_x(y: int, sign: int) -> int:
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * pow(2, (_P - 1) // 4, _P) % _P
    return _P - x if x & 1 != sign else x


_BX = _recover_x(_BY, 0)
_B = (_BX, _BY, 1, _BX * _BY % _P)


def _add(p, q):
    a = (p[1] - p[0]) * (q[1] - q[0]) % _P
    b = (p[1] + p[0]) * (q[1] + q[0]) % _P
    c = 2 * p[3] * q[3] * _D % _P
    d = 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _mul(s: int, p):
    q = (0, 1, 1, 0)
    while s:
        if s & 1:
            q = _add(q, p)
        p = _add(p, p)
        s >>= 1
    return q


def _compress(p) -> bytes:
    zinv = pow(p[2], _P - 2, _P)
    x, y = p[0] * zinv % _P, p[1] * zinv % _P
    return int.to_bytes(y | ((x & 1) << 255), 32, "little")


def ed25519(password: str) -> str:
    h = hashlib.sha512(password.encode()).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return base64.b64encode(_compress(_mul(a, _B))).decode().rstrip("=")


def native(password: str) -> str:
    """mysql_native_password: '*' and the upper-case hex of SHA1(SHA1(password))."""
    return "*" + hashlib.sha1(hashlib.sha1(password.encode()).digest()).hexdigest().upper()
