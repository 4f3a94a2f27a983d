"""Which binary logs may go (binlogs.plan_purge): the retention never takes a file another instance
still needs; only the size cap does, and it names who is starved. Table tests on both GTID kinds,
and a property test: a plan never starves an instance unless the cap forces it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mysql_operator.binlogs import BinlogFile, PurgeBefore, PurgeTo, Retention, first_needed, plan_purge
from mysql_operator.db.gtid import MariaDBGtids, MySQLGtidSet

U = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
WEEK = 7 * 24 * 3600


def mysql_files(*bounds: int, size: int = 100) -> list[BinlogFile]:
    """Files whose headers say GTIDs 1..b were written before them (0: none)."""
    return [
        BinlogFile(f"binlog.{i + 1:06d}", size, MySQLGtidSet.parse(f"{U}:1-{b}" if b else ""))
        for i, b in enumerate(bounds)
    ]


def upto(n: int) -> MySQLGtidSet:
    return MySQLGtidSet.parse(f"{U}:1-{n}" if n else "")


def test_one_file_is_never_purged():
    assert plan_purge(mysql_files(0), {"r": upto(0)}, Retention(WEEK, 1)) is None


def test_caught_up_replicas_let_the_retention_purge_by_time():
    files = mysql_files(0, 10, 20)
    assert plan_purge(files, {"a": upto(25), "b": upto(20)}, Retention(WEEK, 0)) == PurgeBefore(WEEK)


def test_a_lagging_replica_holds_the_time_purge_back():
    files = mysql_files(0, 10, 20)
    # b lacks 11..20, written in the second file
    assert first_needed(files, upto(12)) == 1
    assert plan_purge(files, {"a": upto(25), "b": upto(12)}, Retention(WEEK, 0)) is None


def test_an_instance_never_seen_holds_everything_for_the_time_purge():
    assert plan_purge(mysql_files(0, 10), {"a": None}, Retention(WEEK, 0)) is None


def test_no_time_limit_purges_nothing_under_the_cap():
    assert plan_purge(mysql_files(0, 10, 20), {"a": upto(20)}, Retention(0, 10_000)) is None


def test_the_size_cap_purges_the_oldest_and_names_who_it_starves():
    files = mysql_files(0, 10, 20, 30, size=100)  # 400 bytes
    plan = plan_purge(files, {"a": upto(30), "b": upto(5), "c": upto(15)}, Retention(WEEK, 250))
    # two newest files fit in 250 bytes: the first two go; b needed the first, c the second
    assert plan == PurgeTo("binlog.000003", 400, ("b", "c"))


def test_the_size_cap_keeps_the_file_being_written_even_when_it_alone_is_over():
    files = [*mysql_files(0, 10, size=10), BinlogFile("binlog.000003", 5000, upto(20))]
    assert plan_purge(files, {}, Retention(0, 1000)) == PurgeTo("binlog.000003", 5020, ())


def test_an_instance_lacking_already_purged_gtids_holds_nothing_back():
    files = mysql_files(10, 20, 30)  # 1..10 purged here already
    assert plan_purge(files, {"a": upto(30), "stale": upto(3)}, Retention(WEEK, 0)) == PurgeBefore(WEEK)


def test_mariadb_headers_and_positions():
    files = [
        BinlogFile("binlog.000001", 100, MariaDBGtids.parse("")),
        BinlogFile("binlog.000002", 100, MariaDBGtids.parse("0-1-10")),
        # a failover: server 2 writes from here
        BinlogFile("binlog.000003", 100, MariaDBGtids.parse("0-1-12,0-2-3")),
    ]
    caught_up = MariaDBGtids.parse("0-1-12,0-2-9")
    behind = MariaDBGtids.parse("0-1-11")
    assert first_needed(files, behind) == 1
    assert plan_purge(files, {"a": caught_up}, Retention(WEEK, 0)) == PurgeBefore(WEEK)
    assert plan_purge(files, {"a": caught_up, "b": behind}, Retention(WEEK, 0)) is None


@given(
    bounds=st.lists(st.integers(0, 5), min_size=1, max_size=8).map(
        lambda xs: [sum(xs[: i + 1]) for i in range(len(xs))]
    ),
    sizes=st.lists(st.integers(1, 100), min_size=8, max_size=8),
    others=st.dictionaries(st.sampled_from("abcd"), st.one_of(st.none(), st.integers(0, 50)), max_size=4),
    seconds=st.sampled_from([0, WEEK]),
    cap=st.sampled_from([0, 50, 200, 10_000]),
)
def test_only_the_cap_ever_purges_a_needed_file(bounds, sizes, others, seconds, cap):
    files = [BinlogFile(f"f{i}", sizes[i], upto(b)) for i, b in enumerate(bounds)]
    holds = {n: (None if v is None else upto(v)) for n, v in others.items()}
    plan = plan_purge(files, holds, Retention(seconds, cap))
    total = sum(f.size for f in files)
    lacks_purged = {n for n, h in holds.items() if h is not None and not h.contains(files[0].previous)}
    needy = {
        n
        for n, h in holds.items()
        if n not in lacks_purged and (h is None or first_needed(files, h) < len(files) - 1)
    }
    if isinstance(plan, PurgeBefore):
        assert seconds and not needy  # time purges only while nobody needs an old file
    elif isinstance(plan, PurgeTo):
        assert cap and total > cap
        keep = [f.name for f in files].index(plan.file)
        assert 0 < keep < len(files)
        assert sum(f.size for f in files[keep:]) <= cap or keep == len(files) - 1
        assert sum(f.size for f in files[keep - 1 :]) > cap  # no more than needed goes
        starved = {
            n
            for n, h in holds.items()
            if n not in lacks_purged and (h is None or first_needed(files, h) < keep)
        }
        assert set(plan.starves) == starved
    else:
        assert not (cap and total > cap and len(files) > 1)
        assert not (seconds and not needy and len(files) > 1)
