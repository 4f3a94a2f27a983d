"""Client-side encryption of backup objects (backup/crypto.py): the format's guarantees."""

from __future__ import annotations

import base64
import os
import random

import pytest

from mysql_operator.backup import crypto
from mysql_operator.backup.crypto import (
    HEADER_SIZE,
    RECORD,
    RECORD_PLAIN,
    CryptoError,
    Decryptor,
    Encryptor,
    Key,
    parse_key,
    seal,
    unseal,
)

KEY = Key(bytes(range(32)))
OTHER = Key(bytes(range(1, 33)))


def reader(data: bytes, max_read: int = 1 << 30):
    """A readinto over `data` that returns at most max_read bytes a call (as pipes do)."""
    view = memoryview(data)

    def readinto(buf: memoryview) -> int:
        nonlocal view
        n = min(len(buf), len(view), max_read)
        buf[:n] = view[:n]
        view = view[n:]
        return n

    return readinto


def encrypt(data: bytes, key: Key = KEY, max_read: int = 1 << 30) -> bytes:
    enc = Encryptor(reader(data, max_read), key)
    out, buf = bytearray(), bytearray(100_000)  # smaller than a record: reads span records
    while n := enc.readinto(memoryview(buf)):
        out += buf[:n]
    return bytes(out)


def decrypt(blob: bytes, key: Key = KEY, piece: int = 77_777) -> bytes:
    dec = Decryptor(key)
    out = [p for i in range(0, len(blob), piece) for p in dec.feed(blob[i : i + piece])]
    return b"".join(out) + dec.finish()


@pytest.mark.parametrize(
    "size", [0, 1, RECORD_PLAIN - 1, RECORD_PLAIN, RECORD_PLAIN + 1, 2 * RECORD_PLAIN, 3 * RECORD_PLAIN + 5]
)
def test_round_trip_at_every_record_boundary(size):
    data = os.urandom(size)
    blob = encrypt(data, max_read=65536)
    records = size // RECORD_PLAIN + 1  # a stream ending on a boundary gets an empty last record
    assert len(blob) == HEADER_SIZE + size + records * crypto.TAG_SIZE
    assert decrypt(blob) == data


def test_the_same_plaintext_encrypts_differently_each_time():
    data = b"INSERT INTO t VALUES (1);\n" * 1000
    a, b = encrypt(data), encrypt(data)
    assert a != b and a[:16] == b[:16]  # same magic and key id, new salt: a new key per object
    assert data[:64] not in a


def test_the_header_names_the_key_without_revealing_it():
    blob = encrypt(b"x")
    assert blob.startswith(crypto.MAGIC)
    assert blob[len(crypto.MAGIC) : len(crypto.MAGIC) + 8].hex() == KEY.id
    assert KEY.secret not in blob and KEY.id != OTHER.id
    assert "secret" not in repr(KEY) and KEY.secret.hex() not in repr(KEY)


def test_another_key_is_refused_at_the_header_with_both_key_ids():
    blob = encrypt(os.urandom(1000))
    with pytest.raises(CryptoError) as e:
        decrypt(blob, OTHER)
    assert KEY.id in str(e.value) and OTHER.id in str(e.value)


def _flip(blob: bytes, at: int) -> bytes:
    b = bytearray(blob)
    b[at] ^= 0x01
    return bytes(b)


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: _flip(b, HEADER_SIZE + 10),  # a ciphertext byte of the first record
        lambda b: _flip(b, HEADER_SIZE + RECORD + 5),  # one of the second record
        lambda b: _flip(b, len(b) - 1),  # the last record's tag
        lambda b: _flip(b, len(crypto.MAGIC) + 9),  # the salt: every record's key changes
        lambda b: b[: HEADER_SIZE + RECORD],  # truncated on a record boundary
        lambda b: b[: HEADER_SIZE + 2 * RECORD],
        lambda b: b[:-1],
        lambda b: (
            b[:HEADER_SIZE]
            + b[HEADER_SIZE + RECORD : HEADER_SIZE + 2 * RECORD]
            + b[HEADER_SIZE : HEADER_SIZE + RECORD]
            + b[HEADER_SIZE + 2 * RECORD :]
        ),  # reordered
        lambda b: b + b[-100:],  # extended
    ],
)
def test_altered_truncated_reordered_or_extended_objects_fail_authentication(damage):
    blob = encrypt(os.urandom(2 * RECORD_PLAIN + 1000))
    with pytest.raises(CryptoError, match="fails authentication"):
        decrypt(damage(blob))


def test_not_an_encrypted_object_or_a_too_short_one():
    with pytest.raises(CryptoError, match="not an object encrypted by this operator"):
        decrypt(b"\x28\xb5\x2f\xfd" + os.urandom(100))  # a zstd frame
    with pytest.raises(CryptoError, match="truncated"):
        decrypt(encrypt(b"abc")[: HEADER_SIZE - 1])


def test_seal_and_unseal_small_objects():
    assert unseal(KEY, seal(KEY, b'{"databases": ["app"]}')) == b'{"databases": ["app"]}'
    assert unseal(KEY, seal(KEY, b"")) == b""
    with pytest.raises(CryptoError):
        unseal(OTHER, seal(KEY, b"x"))


def test_decryptor_memory_is_bounded_by_two_records():
    dec = Decryptor(KEY)
    blob = encrypt(os.urandom(8 * RECORD_PLAIN))
    most = 0
    for i in range(0, len(blob), 300_000):
        dec.feed(blob[i : i + 300_000])
        most = max(most, len(dec.buf))
    dec.finish()
    assert most <= RECORD + 300_000


@pytest.mark.parametrize(
    "text",
    [
        base64.b64encode(bytes(range(32))).decode(),
        base64.b64encode(bytes(range(32))).decode() + "\n",  # `openssl rand -base64 32 > file`
        bytes(range(32)).hex(),
        "  " + bytes(range(32)).hex().upper() + "\n",
    ],
)
def test_parse_key_accepts_base64_and_hex(text):
    assert parse_key(text) == KEY


@pytest.mark.parametrize(
    "text",
    [
        "",
        "short",
        base64.b64encode(os.urandom(16)).decode(),
        base64.b64encode(os.urandom(48)).decode(),
        "z" * 64,
    ],
)
def test_parse_key_refuses_anything_but_256_bits_naming_where_and_the_fix(text):
    with pytest.raises(CryptoError) as e:
        parse_key(text, "Secret 'bk' key 'encryption-key' (spec.backup.encryption.keySecret)")
    message = str(e.value)
    assert "Secret 'bk' key 'encryption-key'" in message and "openssl rand -base64 32" in message
    if text:
        assert text not in message


def test_random_piece_sizes_round_trip():
    rng = random.Random(7)
    data = os.urandom(RECORD_PLAIN * 2 + 12345)
    blob = encrypt(data, max_read=rng.randint(1, 200_000))
    dec, out, i = Decryptor(KEY), [], 0
    while i < len(blob):
        n = rng.randint(1, 400_000)
        out += dec.feed(blob[i : i + n])
        i += n
    assert b"".join(out) + dec.finish() == data
