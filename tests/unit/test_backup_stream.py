"""The backup's pump (dump -> compressor) and the multipart reader, over real pipes: every byte
passes unchanged and in order, the count is exact, and the head and tail windows (where the
GTID position is read) are the stream's first and last bytes, whatever the read sizes."""

from __future__ import annotations

import os
import random
import threading

import pytest

from mysql_operator.backup.pipeline import CHUNK
from mysql_operator.backup.stream import WINDOW, DumpStream
from mysql_operator.backup.upload import fill


def _pumped(data: bytes, pieces: list[int], pause: float) -> tuple[DumpStream, bytes]:
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    src, dst = os.fdopen(a_r, "rb", buffering=0), os.fdopen(b_w, "wb", buffering=0)

    def write() -> None:
        with os.fdopen(a_w, "wb", buffering=0) as w:
            pos = 0
            for n in pieces:
                w.write(data[pos : pos + n])
                pos += n
            w.write(data[pos:])

    out: list[bytes] = []

    def read() -> None:
        with os.fdopen(b_r, "rb", buffering=0) as r:
            out.append(r.read())

    stream = DumpStream()
    threads = [threading.Thread(target=write), threading.Thread(target=read)]
    for t in threads:
        t.start()
    stream.pump(src, dst, pause)
    src.close()
    for t in threads:
        t.join()
    return stream, out[0]


@pytest.mark.parametrize("size", [0, 10, WINDOW - 1, WINDOW + 1, CHUNK - 3, 3 * CHUNK + 12345])
@pytest.mark.parametrize("pause", [0, 0.0001])
def test_pump_passes_every_byte_and_keeps_head_and_tail(size, pause):
    rnd = random.Random(size)
    data = rnd.randbytes(size)
    pieces = [rnd.choice([1, 100, 8192, 70000]) for _ in range(200)]
    stream, out = _pumped(data, pieces, pause)
    assert stream.error == []
    assert out == data
    assert stream.size == size
    assert stream.head == data[:WINDOW]
    assert stream.tail == data[-WINDOW:] if size else stream.tail == b""


def test_fill_reads_into_the_part_buffer_until_full_or_end():
    data = bytes(range(256)) * 100
    pos = [0]

    def readinto(view: memoryview) -> int:
        n = min(len(view), 777, len(data) - pos[0])
        view[:n] = data[pos[0] : pos[0] + n]
        pos[0] += n
        return n

    buf = bytearray(10000)
    assert fill(readinto, buf) == 10000 and bytes(buf) == data[:10000]
    assert fill(readinto, buf) == 10000 and bytes(buf) == data[10000:20000]
    assert fill(readinto, buf) == len(data) - 20000 and bytes(buf[: len(data) - 20000]) == data[20000:]
    assert fill(readinto, buf) == 0


def _pumped_with_tee(data: bytes, tee_reads: int | None) -> tuple[DumpStream, bytes, bytes, bool]:
    """`data` pumped with a tee whose reader takes `tee_reads` bytes then closes (None: all)."""
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    t_r, t_w = os.pipe()
    src, dst = os.fdopen(a_r, "rb", buffering=0), os.fdopen(b_w, "wb", buffering=0)
    tee = os.fdopen(t_w, "wb", buffering=0)
    out: dict[str, bytes] = {}

    def write() -> None:
        with os.fdopen(a_w, "wb", buffering=0) as w:
            w.write(data)

    def read(name: str, fd: int, limit: int | None) -> None:
        with os.fdopen(fd, "rb", buffering=0) as r:
            out[name] = r.read(limit) if limit else r.read()

    stream = DumpStream()
    threads = [
        threading.Thread(target=write),
        threading.Thread(target=read, args=("dst", b_r, None)),
        threading.Thread(target=read, args=("tee", t_r, tee_reads)),
    ]
    for t in threads:
        t.start()
    stream.pump(src, dst, 0, tee)
    src.close()
    for t in threads:
        t.join()
    return stream, out["dst"], out["tee"], tee.closed


def test_a_tee_gets_every_byte_too():
    data = random.Random(7).randbytes(3 * CHUNK + 99)
    stream, out, teed, closed = _pumped_with_tee(data, None)
    assert stream.error == [] and stream.tee_error == ""
    assert out == data and teed == data and closed


def test_a_tee_that_stops_reading_is_left_out_and_the_stream_goes_on():
    data = random.Random(8).randbytes(3 * CHUNK + 99)
    stream, out, teed, closed = _pumped_with_tee(data, 1000)
    assert stream.error == [] and out == data and closed
    assert 0 < len(teed) <= 1000 and data.startswith(teed)
    assert stream.tee_error.startswith("the table digests stopped reading the dump")
