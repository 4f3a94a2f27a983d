"""Which archived binary logs a point-in-time restore replays (backup/pitr.plan), and how."""

from __future__ import annotations

import pytest

from mysql_operator.backup import pitr
from mysql_operator.backup.binlog_archive import Base, Segment
from mysql_operator.backup.pitr import PitrError, Stop, plan, tool_argv
from mysql_operator.db.gtid import MariaDBGtids, MySQLGtidSet

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "4e11fa47-71ca-11e1-9e33-c80aa9429562"


def seg(server: str, file: str, before: str, after: str, first: int, last: int) -> Segment:
    return Segment(server, file, file, f"k/{server}/{file}", 1, "0" * 64, before, after, first, last, 3)


# primary A wrote 1-10, 11-20, 21-25 then failed; B (which had replicated up to A:22) goes on:
# its first file repeats A:1-22, then B:1-5, B:6-9
HISTORY = [
    seg("a", "bin.1", "", f"{A}:1-10", 100, 110),
    seg("a", "bin.2", f"{A}:1-10", f"{A}:1-20", 110, 120),
    seg("a", "bin.3", f"{A}:1-20", f"{A}:1-25", 120, 125),
    seg("b", "bin.7", f"{A}:1-10", f"{A}:1-22,{B}:1-5", 105, 130),
    seg("b", "bin.8", f"{A}:1-22,{B}:1-5", f"{A}:1-22,{B}:1-9", 130, 140),
]


def names(chain):
    return [(s.server, s.file) for s in chain]


def test_from_the_base_to_the_newest_across_a_failover_without_the_lost_transactions():
    chain = plan(HISTORY, f"{A}:1-12", 112, Stop(), MySQLGtidSet.parse)
    # bin.7 of B holds all of A's bin.2 and A:21-22; A's bin.3 holds A:23-25, which B never had
    assert names(chain) == [("b", "bin.7"), ("b", "bin.8")]


def test_a_time_stop_takes_every_file_opened_by_then_and_no_later_one():
    assert names(plan(HISTORY, f"{A}:1-12", 112, Stop(at=118), MySQLGtidSet.parse)) == [("b", "bin.7")]
    assert names(plan(HISTORY[:3], f"{A}:1-12", 112, Stop(at=118), MySQLGtidSet.parse)) == [("a", "bin.2")]


def test_a_gtid_stop_ends_with_the_file_holding_it():
    chain = plan(HISTORY[:3], f"{A}:1-12", 112, Stop(gtid=f"{A}:1-18"), MySQLGtidSet.parse)
    assert names(chain) == [("a", "bin.2")]
    with pytest.raises(PitrError, match="does not hold GTID"):
        plan(HISTORY, f"{A}:1-12", 112, Stop(gtid=f"{A}:1-40"), MySQLGtidSet.parse)


def test_a_gap_is_refused_naming_where_it_is_unless_it_is_after_the_stop():
    x = "5e11fa47-71ca-11e1-9e33-c80aa9429562"
    holed = [
        seg("x", "bin.1", "", f"{x}:1-10", 100, 110),
        seg("x", "bin.3", f"{x}:1-20", f"{x}:1-30", 120, 130),
    ]
    with pytest.raises(
        PitrError, match=f"gap after bin.1 of server x: it holds nothing that continues from {x}:1-10"
    ):
        plan(holed, f"{x}:1-5", 101, Stop(at=125), MySQLGtidSet.parse)
    assert names(plan(holed, f"{x}:1-5", 101, Stop(at=105), MySQLGtidSet.parse)) == [("x", "bin.1")]
    with pytest.raises(PitrError, match="gap after the base backup: "):  # the first file is gone
        plan(holed[1:], f"{x}:1-5", 101, Stop(), MySQLGtidSet.parse)


def test_times_outside_the_archive_or_before_the_base_are_refused():
    with pytest.raises(PitrError, match="up to 1970-01-01T00:02:20Z; 1970-01-01T00:03:20Z is later"):
        plan(HISTORY, f"{A}:1-12", 112, Stop(at=200), MySQLGtidSet.parse)
    with pytest.raises(PitrError, match="before the base backup completed"):
        plan(HISTORY, f"{A}:1-12", 112, Stop(at=111), MySQLGtidSet.parse)


def test_mariadb_positions():
    segs = [
        seg("1", "b.1", "0-1-4", "0-1-9", 10, 20),
        seg("1", "b.2", "0-1-9", "0-1-15", 20, 30),
        # the new primary after a failover at 0-1-12 (0-1-13..15 never reached it); a Gtid_list
        # holds the binary log state: the last GTID of each domain and server
        seg("2", "b.1", "0-1-9", "0-1-12,0-2-18", 25, 40),
    ]
    chain = plan(segs, "0-1-7", 15, Stop(), MariaDBGtids.parse)
    assert names(chain) == [("1", "b.1"), ("2", "b.1")]


def test_a_mariadb_file_wholly_before_the_bases_position_is_not_replayed_whatever_servers_it_names():
    """A primary that had been a replica of others (a re-seed, failovers) writes a binary log whose
    GTID lists name each server's last GTID, while a backup records one GTID per domain
    (gtid_binlog_pos). Seen in a restore: the archive's first file (since the re-seed) ended before
    the base backup's position, was replayed from that position, and mariadb-binlog failed ("Binary
    logs never reached expected GTID state"). In one history a domain's seq_nos grow whichever
    server wrote them: the file holds nothing the base lacks."""
    state = "0-1-183236,0-2-178699,0-3-304570"
    segs = [
        seg("3", "b.1", "", state, 10, 20),  # since the re-seed: several servers' transactions
        seg("3", "b.2", state, "0-1-183236,0-2-178699,0-3-304700", 20, 40),
    ]
    for base in ("0-3-304578", "0-3-304570"):
        assert names(plan(segs, base, 21, Stop(at=30), MariaDBGtids.parse)) == [("3", "b.2")], base
        assert names(plan(segs, base, 21, Stop(gtid="0-3-304600"), MariaDBGtids.parse)) == [("3", "b.2")]
    # a base from before the file still replays it, from the base's position on
    assert names(plan(segs, "0-2-178000", 15, Stop(), MariaDBGtids.parse)) == [("3", "b.1"), ("3", "b.2")]
    # a GTID stop naming another server of the domain than the base's: that base still fits
    assert pitr.choose_base(
        [Base("0-3-304578", 21, "k/base")], Stop(gtid="0-2-304650"), MariaDBGtids.parse
    ) == Base("0-3-304578", 21, "k/base")


def test_tool_arguments_skip_what_is_applied_and_stop_one_second_after():
    assert tool_argv("mysql", f"{A}:1-12", Stop(at=118)) == [
        "mysqlbinlog",
        f"--exclude-gtids={A}:1-12",
        "--stop-datetime=1970-01-01 00:01:59",
        "-",
    ]
    assert tool_argv("mariadb", "0-1-7", Stop(gtid="0-1-9")) == [
        "mariadb-binlog",
        "--start-position=0-1-7",
        "--stop-position=0-1-9",
        "-",
    ]
    # after a failover the state applied holds the old primary's last GTID and the new one's: the
    # tool takes one per domain (it refuses a domain named twice), the highest seq_no
    assert tool_argv("mariadb", "0-1-11203,0-2-11285,1-3-4", Stop()) == [
        "mariadb-binlog",
        "--start-position=0-2-11285,1-3-4",
        "-",
    ]


def test_a_mysql_gtid_stop_stands_for_everything_up_to_it_and_must_name_the_bases_sources():
    # uuid:N means A:1-N
    chain = plan(HISTORY[:3], f"{A}:1-12", 112, Stop(gtid=f"{A}:18"), MySQLGtidSet.parse)
    assert names(chain) == [("a", "bin.2")]
    # after the failover, naming only B's would leave out A's transactions after the base
    with pytest.raises(PitrError, match=f"names no transaction of {A}:1-12 .*SELECT @@gtid_executed"):
        plan(HISTORY, f"{A}:1-12", 112, Stop(gtid=f"{B}:1-7"), MySQLGtidSet.parse)
    assert names(plan(HISTORY, f"{A}:1-12", 112, Stop(gtid=f"{A}:1-22,{B}:1-7"), MySQLGtidSet.parse))[-1] == (
        "b",
        "bin.8",
    )


SAMPLE = b"""/*!50530 SET @@SESSION.PSEUDO_SLAVE_MODE=1*/;
DELIMITER /*!*/;
# at 4
#251126 14:04:12 server id 1  end_log_pos 126 CRC32 0x1  Start: binlog v 4
BINLOG '
AAAA
'/*!*/;
# at 200
SET @@SESSION.GTID_NEXT= 'aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee:41'/*!*/;
# at 280
#251126 14:04:12 server id 1  end_log_pos 400 CRC32 0x2  Query thread_id=9
SET TIMESTAMP=1764165852/*!*/;
ALTER USER 'replication'@'%' IDENTIFIED WITH 'caching_sha2_password' AS 0x2441
/*!*/;
SET @@SESSION.GTID_NEXT= 'aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee:42'/*!*/;
SET TIMESTAMP=1764165853/*!*/;
BEGIN
/*!*/;
INSERT INTO t VALUES ('GRANT ALL')
/*!*/;
COMMIT/*!*/;
  grant select on app.* to 'x'@'%'/*!*/;
CREATE TABLE grants (id INT)
/*!*/;
DELIMITER ;
# End of log file
"""


@pytest.mark.parametrize("piece", [1, 7, 64, len(SAMPLE)])
def test_account_statements_become_empty_transactions_whatever_the_pieces(piece):
    from mysql_operator.backup.pitr import EMPTY_TRANSACTION, AccountStatements

    f = AccountStatements()
    out = b"".join(f(SAMPLE[i : i + piece]) for i in range(0, len(SAMPLE), piece)) + f(b"")
    assert b"ALTER USER" not in out and b"grant select" not in out and f.skipped == 2
    assert out.count(EMPTY_TRANSACTION) == 2  # their GTIDs are still used, by empty transactions
    # everything else as it was: data that merely mentions GRANT, a table named grants, the events
    for kept in (
        b"INSERT INTO t VALUES ('GRANT ALL')",
        b"CREATE TABLE grants (id INT)",
        b"AAAA\n'/*!*/;",
        b"COMMIT/*!*/;",
    ):
        assert kept in out
    assert out.replace(EMPTY_TRANSACTION, b"") == SAMPLE.replace(
        b"ALTER USER 'replication'@'%' IDENTIFIED WITH 'caching_sha2_password' AS 0x2441\n/*!*/;\n", b""
    ).replace(b"  grant select on app.* to 'x'@'%'/*!*/;\n", b"")


def test_archive_retention_deletes_only_what_the_oldest_retained_backup_holds():
    from mysql_operator.backup.binlog_archive import Base, prunable

    parse = MySQLGtidSet.parse
    # the oldest backup holds A:1-20 and completed at 121: bin.1 and bin.2 are needed by no restore
    bases = [Base(f"{A}:1-20", 121), Base(f"{A}:1-22,{B}:1-9", 141)]
    assert names(prunable(HISTORY, bases, parse)) == [("a", "bin.1"), ("a", "bin.2")]
    # A's bin.3 holds A:23-25, in no history that survived: kept (never contained by a backup)
    # no backup, or one whose position is unknown: nothing is deleted
    assert prunable(HISTORY, [], parse) == []
    assert prunable(HISTORY, [*bases, Base("", 150)], parse) == []
    # a file still open when the oldest backup completed stays, even if the backup holds it all
    assert names(prunable(HISTORY, [Base(f"{A}:1-20", 115)], parse)) == [("a", "bin.1")]


def test_the_base_is_the_newest_backup_the_stop_can_start_from():
    from mysql_operator.backup.binlog_archive import Base
    from mysql_operator.backup.pitr import choose_base

    parse = MySQLGtidSet.parse
    old, mid, new = (
        Base(f"{A}:1-10", 110, "old"),
        Base(f"{A}:1-20", 120, "mid"),
        Base(f"{A}:1-25", 125, "new"),
    )
    bases = [mid, old, new, Base("", 121, "no-gtid")]
    assert choose_base(bases, Stop(), parse) is new
    assert choose_base(bases, Stop(at=124), parse) is mid
    assert choose_base(bases, Stop(at=120), parse) is mid  # completed in the stop's second
    assert choose_base(bases, Stop(at=109), parse) is None
    assert choose_base(bases, Stop(gtid=f"{A}:1-22"), parse) is mid
    assert choose_base(bases, Stop(gtid=f"{A}:15"), parse) is old  # uuid:N means 1-N
    assert choose_base([], Stop(), parse) is None


@pytest.mark.parametrize("piece", [1, 7, len(SAMPLE)])
def test_a_replay_asks_for_each_database_it_creates_before_passing_its_create_on(piece):
    """The load account gets ALL on a database a binary log creates before the client reads its
    CREATE (pitr.AccountStatements on_database); data that names a CREATE is not a CREATE."""
    from mysql_operator.backup.pitr import AccountStatements

    sample = SAMPLE.replace(
        b"CREATE TABLE grants (id INT)\n",
        b"CREATE DATABASE `new``one`\n/*!*/;\nINSERT INTO t VALUES ('\nCREATE DATABASE not_one')\n/*!*/;\n"
        b"create schema IF NOT EXISTS shop_2\n/*!*/;\nCREATE TABLE grants (id INT)\n",
    )
    asked: list[tuple[str, int]] = []
    out = b""

    def on_database(name: str) -> None:
        asked.append((name, len(out)))

    f = AccountStatements(on_database)
    for i in range(0, len(sample), piece):
        out += f(sample[i : i + piece])
    out += f(b"")
    assert [name for name, _ in asked] == ["new`one", "shop_2"]
    for name, passed in asked:  # asked before its statement was passed on
        assert out.index(b"CREATE DATABASE `new``one`" if name == "new`one" else b"create schema") >= passed
