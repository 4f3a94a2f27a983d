"""The xbstream reader (backup/xbstream.py): checksums checked as the stream passes, the copy's
binary log position kept, a damaged or cut stream refused. The streams here are made as
mariadb-backup writes them (tests/integration/test_backup_mariadb_physical.py reads real ones)."""

from __future__ import annotations

import struct
import zlib

import pytest

from mysql_operator.backup.xbstream import POSITION_FILES, Reader, StreamError, copy_position


def piece(path: str, data: bytes, offset: int = 0, crc: int | None = None) -> bytes:
    p = path.encode()
    head = b"XBSTCK01" + b"\x00P" + struct.pack("<I", len(p)) + p
    return head + struct.pack("<QQI", len(data), offset, zlib.crc32(data) if crc is None else crc) + data


def end(path: str) -> bytes:
    p = path.encode()
    return b"XBSTCK01" + b"\x00E" + struct.pack("<I", len(p)) + p


STREAM = (
    piece("ibdata1", b"x" * 70000)
    + piece("ibdata1", b"y" * 10, offset=70000)
    + end("ibdata1")
    + piece("shop/orders.ibd", b"")
    + end("shop/orders.ibd")
    + piece("xtrabackup_binlog_info", b"binlog.000004\t781\t0-1-3,1-2-9\n")
    + end("xtrabackup_binlog_info")
    + piece("xtrabackup_info", b"tool_name = mariadb-backup\n")
    + end("xtrabackup_info")
)
INFO = len(b"tool_name = mariadb-backup\n")


@pytest.mark.parametrize("size", [1, 7, 4096, len(STREAM)])
def test_a_stream_in_any_pieces_gives_its_files_and_the_copys_position(size):
    r = Reader(keep=POSITION_FILES)
    for i in range(0, len(STREAM), size):
        r.feed(STREAM[i : i + size])
    r.finish()
    assert (r.files, r.payload) == (4, 70000 + 10 + len(b"binlog.000004\t781\t0-1-3,1-2-9\n") + INFO)
    assert copy_position(r.kept) == "0-1-3,1-2-9"
    assert set(r.kept) == {"xtrabackup_binlog_info"}  # nothing else is kept


def test_a_damaged_piece_is_refused_naming_its_file():
    bad = bytearray(STREAM)
    bad[100] ^= 1  # inside ibdata1's first piece
    with pytest.raises(StreamError, match="ibdata1 does not match its checksum"):
        Reader().feed(bytes(bad))
    with pytest.raises(StreamError, match="orders.ibd does not match"):
        Reader().feed(piece("shop/orders.ibd", b"", crc=1))


@pytest.mark.parametrize("cut", [5, 20, 100, len(STREAM) - 3])
def test_a_stream_cut_short_is_refused(cut):
    r = Reader()
    r.feed(STREAM[:cut])
    with pytest.raises(StreamError, match="ended inside a chunk"):
        r.finish()


@pytest.mark.parametrize(
    "data, message",
    [
        (b"-- MySQL dump 10.13\n" + b"x" * 20, "not an xbstream chunk"),
        (b"XBSTCK01\x00Z" + struct.pack("<I", 1) + b"a", "unknown type 'Z'"),
        (b"XBSTCK01\x00P" + struct.pack("<I", 1 << 20), "path of 1048576 bytes"),
    ],
)
def test_what_is_not_an_xbstream_is_refused(data, message):
    with pytest.raises(StreamError, match=message):
        Reader().feed(data)


def test_a_stream_cut_between_two_files_is_refused():
    """Cut where a chunk ends (the donor's mariadb-backup failed): what mariadb-backup writes last
    is missing."""
    r = Reader()
    r.feed(STREAM[: STREAM.index(b"XBSTCK01\x00Pxtrabackup_info"[:10], STREAM.index(b"binlog.000004"))])
    with pytest.raises(
        StreamError, match="ended before mariadb-backup finished it .after xtrabackup_binlog_info"
    ):
        r.finish()


def test_an_empty_stream_is_refused():
    with pytest.raises(StreamError, match="empty"):
        Reader().finish()


def test_the_position_comes_from_either_files_name_and_must_be_a_gtid_list():
    assert copy_position({"mariadb_backup_binlog_info": b"binlog.000001\t4\t0-1-1\n"}) == "0-1-1"
    with pytest.raises(StreamError, match="no GTID position"):
        copy_position({"xtrabackup_binlog_info": b"binlog.000001\t4\t\n"})
    with pytest.raises(StreamError, match="no GTID position"):
        copy_position({"xtrabackup_binlog_info": b"binlog.000001\t4\t0-1-1'; DROP\n"})
    with pytest.raises(StreamError, match="holds no binary log position"):
        copy_position({})


def test_a_file_added_to_a_stream_reads_back_as_that_file():
    from mysql_operator.backup.xbstream import file_chunks

    assert file_chunks("ibdata1", b"y" * 10) == piece("ibdata1", b"y" * 10) + end("ibdata1")
    r = Reader(keep=["mysql-operator-restore.sql"])
    r.feed(STREAM + file_chunks("mysql-operator-restore.sql", b"DROP USER IF EXISTS 'a'@'%';\n"))
    assert r.kept["mysql-operator-restore.sql"] == b"DROP USER IF EXISTS 'a'@'%';\n"
    assert r.last_file == "mysql-operator-restore.sql"
