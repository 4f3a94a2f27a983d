"""Client-side encryption of the objects written to a backup bucket: AES-256-GCM, streamed.

    key = parse_key(text)                       # 32 bytes, from the user's Secret (base64 or hex)
    reader = Encryptor(readinto, key)           # reader.readinto: the encrypted stream
    dec = Decryptor(key); dec.feed(b) -> [plaintext...]; dec.finish() -> last plaintext
    seal(key, data) / unseal(key, blob)         # the same format for small objects

Format (version 1) of an encrypted object:

    header  = MAGIC (8 bytes) | key id (8) | salt (32)
    records = AES-256-GCM(plaintext chunk) for each RECORD_PLAIN bytes of plaintext; the last record
              is shorter (it may be empty): ciphertext | 16-byte tag

Each object is encrypted with its own key, HKDF-SHA256(user key, salt), so the nonce of record i
can be i itself: 11 bytes big-endian, then 0x01 for the last record and 0x00 for the others (the
STREAM construction). The header is the associated data of every record. So a record that was
altered, reordered, dropped, or an object truncated at a record boundary fails the tag check.

The key id, HMAC-SHA256(user key, KEY_ID_LABEL)[:8], goes into the header and the manifest: a
restore with another key is refused from the manifest, before anything is downloaded or loaded.
Memory is constant: one record of plaintext and one of ciphertext at a time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Callable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mysql_operator.backup.upload import fill

ALGORITHM = "AES-256-GCM/STREAM-v1"  # what manifests say
MAGIC = b"MOPENC\x00\x01"
KEY_ID_LABEL = b"mysql-operator backup key id"
OBJECT_KEY_LABEL = b"mysql-operator backup object key v1"
SALT_SIZE = 32
HEADER_SIZE = len(MAGIC) + 8 + SALT_SIZE
TAG_SIZE = 16
RECORD_PLAIN = 1024 * 1024 - TAG_SIZE  # a record of ciphertext is 1 MiB
RECORD = RECORD_PLAIN + TAG_SIZE
KEY_HINT = "32 random bytes, base64-encoded: create it with `openssl rand -base64 32`"


class CryptoError(ValueError):
    """A key that cannot be used, or an object that does not decrypt. Never contains key bytes."""


@dataclass(frozen=True)
class Key:
    secret: bytes

    @property
    def id(self) -> str:
        return hmac.new(self.secret, KEY_ID_LABEL, hashlib.sha256).hexdigest()[:16]

    def __repr__(self) -> str:  # never print the secret
        return f"Key(id={self.id})"


def parse_key(text: str | bytes, where: str = "the encryption key") -> Key:
    """The 32-byte key from its text form: base64 (what `openssl rand -base64 32` prints) or 64 hex
    digits; surrounding white space is ignored. CryptoError naming `where` and the fix otherwise."""
    raw = text.decode(errors="replace") if isinstance(text, bytes) else text
    raw = raw.strip()
    candidates = []
    if len(raw) == 64:
        try:
            candidates.append(bytes.fromhex(raw))
        except ValueError:
            pass
    try:
        candidates.append(base64.b64decode(raw, validate=True))
    except (binascii.Error, ValueError):
        pass
    for secret in candidates:
        if len(secret) == 32:
            return Key(secret)
    raise CryptoError(f"{where} is not a 256-bit key ({len(raw)} characters): it must hold {KEY_HINT}")


def _object_cipher(key: Key, salt: bytes) -> AESGCM:
    okm = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=OBJECT_KEY_LABEL).derive(key.secret)
    return AESGCM(okm)


def _nonce(counter: int, last: bool) -> bytes:
    return counter.to_bytes(11, "big") + (b"\x01" if last else b"\x00")


class Encryptor:
    """`readinto` that yields the encrypted form of the stream `source` (a readinto callable)."""

    def __init__(self, source: Callable[[memoryview], int], key: Key):
        self.source = source
        salt = os.urandom(SALT_SIZE)
        self.header = MAGIC + bytes.fromhex(key.id) + salt
        self.cipher = _object_cipher(key, salt)
        self.plain = bytearray(RECORD_PLAIN)
        self.pending = memoryview(self.header)
        self.counter = 0
        self.done = False

    def readinto(self, view: memoryview) -> int:
        while not self.pending:
            if self.done:
                return 0
            n = fill(self.source, self.plain)
            last = n < len(self.plain)  # a stream ending on a record boundary gets an empty last record
            sealed = self.cipher.encrypt(_nonce(self.counter, last), memoryview(self.plain)[:n], self.header)
            self.pending = memoryview(sealed)
            self.counter += 1
            self.done = last
        n = min(len(view), len(self.pending))
        view[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


class Decryptor:
    """Feed the encrypted object in pieces of any size; get its plaintext back record by record.
    `finish()` authenticates the last record: an object without one is refused."""

    def __init__(self, key: Key, where: str = "the object"):
        self.key = key
        self.where = where
        self.buf = bytearray()
        self.header: bytes | None = None
        self.cipher: AESGCM | None = None
        self.counter = 0

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        out: list[bytes] = []
        if self.header is None:
            if len(self.buf) < HEADER_SIZE:
                return out
            self._read_header()
        while len(self.buf) > RECORD:  # keep one record back: it might be the last
            out.append(self._open(bytes(self.buf[:RECORD]), last=False))
            del self.buf[:RECORD]
        return out

    def finish(self) -> bytes:
        if self.header is None:
            raise CryptoError(f"{self.where} is truncated: it ends before its encryption header")
        data = self._open(bytes(self.buf), last=True)
        self.buf = bytearray()
        return data

    def _read_header(self) -> None:
        header = bytes(self.buf[:HEADER_SIZE])
        if header[: len(MAGIC)] != MAGIC:
            raise CryptoError(
                f"{self.where} is not an object encrypted by this operator (format {ALGORITHM})"
            )
        found = header[len(MAGIC) : len(MAGIC) + 8].hex()
        if found != self.key.id:
            raise CryptoError(wrong_key(self.where, found, self.key.id))
        self.header = header
        self.cipher = _object_cipher(self.key, header[len(MAGIC) + 8 :])
        del self.buf[:HEADER_SIZE]

    def _open(self, record: bytes, last: bool) -> bytes:
        assert self.cipher is not None and self.header is not None
        try:
            plain = self.cipher.decrypt(_nonce(self.counter, last), record, self.header)
        except InvalidTag:
            raise CryptoError(
                f"{self.where} fails authentication at byte {HEADER_SIZE + self.counter * RECORD}: it "
                "was altered or truncated; refusing to use it"
            ) from None
        self.counter += 1
        return plain


def wrong_key(where: str, found: str, given: str) -> str:
    return (
        f"{where} was encrypted with the key whose id is {found}; the key given has id {given}: "
        "name the Secret holding the key the backup was made with"
    )


def seal(key: Key, data: bytes) -> bytes:
    view = memoryview(data)

    def readinto(buf: memoryview) -> int:
        nonlocal view
        n = min(len(buf), len(view))
        buf[:n] = view[:n]
        view = view[n:]
        return n

    enc, out = Encryptor(readinto, key), bytearray()
    chunk = bytearray(RECORD)
    while n := enc.readinto(memoryview(chunk)):
        out += chunk[:n]
    return bytes(out)


def unseal(key: Key, blob: bytes, where: str = "the object") -> bytes:
    dec = Decryptor(key, where)
    return b"".join(dec.feed(blob)) + dec.finish()
