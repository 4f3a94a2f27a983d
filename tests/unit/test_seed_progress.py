"""The operator's reading of a MariaDB re-seed's progress line (db/seed_progress.py): only the
exact shape sh/seed.sh prints is taken; the line comes from a tenant's Pod."""

import socket
import threading

import pytest

from mysql_operator.db import seed_progress


@pytest.mark.parametrize(
    "line, want",
    [
        (b"receiving 1048576 5368709120\n", (1048576, 5368709120)),
        (b"preparing 5368709120 5368709120", (5368709120, 5368709120)),
        (b"receiving 0 0\n", (0, 0)),
    ],
)
def test_progress_lines_are_read(line, want):
    assert seed_progress.parse(line) == want


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"receiving 12\n",  # no total
        b"copying 1 2\n",  # not a stage seed.sh names
        b"receiving -1 2\n",
        b"receiving 1 2 3\n",
        b"receiving 1 2\n\n",
        b"receiving 1234567890123456 2\n",  # beyond any disk
        b"receiving 1 2\nDROP TABLE x\n",
        "receiving ١ 2\n".encode(),  # a non-ASCII digit
    ],
)
def test_anything_else_is_no_progress(line):
    assert seed_progress.parse(line) is None


def _serve_once(payload: bytes) -> int:
    srv = socket.create_server(("127.0.0.1", 0))

    def answer():
        conn, _ = srv.accept()
        with conn:
            conn.sendall(payload)
        srv.close()

    threading.Thread(target=answer, daemon=True).start()
    return srv.getsockname()[1]


def test_read_takes_one_line_from_the_port():
    assert seed_progress.read("127.0.0.1", _serve_once(b"receiving 10 20\n")) == (10, 20)


def test_read_refuses_an_endless_answer_and_a_closed_port():
    assert seed_progress.read("127.0.0.1", _serve_once(b"9" * 10_000)) is None
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    assert seed_progress.read("127.0.0.1", port) is None  # nothing listens there any more
