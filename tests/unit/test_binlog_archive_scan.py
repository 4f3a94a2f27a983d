"""Reading a binary log's event headers (backup/binlog_archive.scan) and naming segments."""

from __future__ import annotations

import pytest

from mysql_operator.backup.binlog_archive import HEADER, MAGIC, ArchiveError, Segment, scan, segment_name


def event(ts: int, body: bytes = b"x" * 10, kind: int = 2) -> bytes:
    return HEADER.pack(ts, kind, 1, HEADER.size + 2 + len(body), 0) + b"\0\0" + body


def test_scan_counts_events_and_reads_their_times(tmp_path):
    f = tmp_path / "binlog.000001"
    f.write_bytes(MAGIC + event(100, kind=15) + event(0) + event(105) + event(103, b"y" * 5000))
    assert scan(f).__dict__ == {"events": 4, "first_at": 100, "last_at": 105}


@pytest.mark.parametrize(
    "data, message",
    [
        (b"\x28\xb5\x2f\xfd" + event(1), "not a binary log"),
        (MAGIC + event(1) + event(2)[:10], "header cut short"),
        (MAGIC + event(1) + event(2)[:-1], "claims"),
    ],
)
def test_scan_refuses_what_is_not_a_whole_binary_log(tmp_path, data, message):
    f = tmp_path / "binlog.000002"
    f.write_bytes(data)
    with pytest.raises(ArchiveError, match=message):
        scan(f)


def test_two_files_of_one_name_get_different_segment_names():
    a, b = segment_name("mysql-bin.000001", ""), segment_name("mysql-bin.000001", "0-1-42")
    assert a != b and a.startswith("mysql-bin.000001-") and segment_name("mysql-bin.000001", "") == a


def test_index_entry_round_trip():
    s = Segment("7", "mysql-bin.000003-abc", "mysql-bin.000003", "k", 10, "0" * 64, "0-7-1", "0-7-9", 1, 2, 5)
    assert Segment.from_json(s.to_json()) == s
