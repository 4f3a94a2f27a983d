"""Schedules and retention: pure decisions (given now, cron, last runs -> what to create/delete)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings, strategies as st

from mysql_operator.backup.retention import BackupInfo, expired
from mysql_operator.backup.schedule import backup_name, decide, next_after, parse_cron

UTC = dt.timezone.utc


def t(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    "expr, after, expected",
    [
        ("0 3 * * *", "2025-01-01T02:59", "2025-01-01T03:00"),
        ("0 3 * * *", "2025-01-01T03:00", "2025-01-02T03:00"),
        ("*/15 * * * *", "2025-01-01T10:07", "2025-01-01T10:15"),
        ("30 2 * * mon", "2025-01-01T00:00", "2025-01-06T02:30"),  # 2025-01-01 is a Wednesday
        ("0 0 1 jan *", "2025-03-01T00:00", "2026-01-01T00:00"),
        ("0 12 29 2 *", "2025-01-01T00:00", "2028-02-29T12:00"),
        ("0 0 13 * 5", "2025-01-01T00:00", "2025-01-03T00:00"),  # Friday OR the 13th
        ("@hourly", "2025-01-01T10:00", "2025-01-01T11:00"),
        ("@weekly", "2025-01-01T00:00", "2025-01-05T00:00"),
        ("0 0 * * 7", "2025-01-01T00:00", "2025-01-05T00:00"),  # 7 is Sunday too
        ("5-10/5 1 * * *", "2025-01-01T01:05", "2025-01-01T01:10"),
        ("5-5/2 1 * * *", "2025-01-01T01:05", "2025-01-02T01:05"),  # one value (cronsim 2.8: 5/2)
        ("0 0 * * fri-fri/2", "2025-01-01T00:00", "2025-01-03T00:00"),
    ],
)
def test_next_after(expr, after, expected):
    assert next_after(parse_cron(expr), t(after)) == t(expected)


def test_bad_cron_is_refused_with_the_field():
    with pytest.raises(ValueError, match="hour '25'"):
        parse_cron("0 25 * * *")


def test_fire_times_are_utc_whatever_the_offset_of_t():
    after = dt.datetime(2025, 1, 1, 4, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))  # 02:30Z
    assert next_after(parse_cron("0 3 * * *"), after) == t("2025-01-01T03:00")


CREATED = t("2025-01-01T00:00")


def test_first_run_waits_for_the_first_fire_time_after_creation():
    d = decide(t("2025-01-01T02:00"), "0 3 * * *", None, CREATED, [])
    assert d.create_for is None and d.next_run == t("2025-01-01T03:00")
    d = decide(t("2025-01-01T03:00:20"), "0 3 * * *", None, CREATED, [])
    assert d.create_for == t("2025-01-01T03:00")


def test_run_is_created_after_a_failed_one_schedule_keeps_running():
    # the last run (whatever its outcome) was for 03:00 yesterday; today's is due
    d = decide(t("2025-01-02T03:01"), "0 3 * * *", t("2025-01-01T03:00"), CREATED, [])
    assert d.create_for == t("2025-01-02T03:00")


def test_no_second_run_for_the_same_fire_time():
    d = decide(t("2025-01-02T03:05"), "0 3 * * *", t("2025-01-02T03:00"), CREATED, [])
    assert d.create_for is None and d.next_run == t("2025-01-03T03:00")


def test_no_concurrent_runs_then_created_when_the_other_finished():
    now = t("2025-01-02T03:01")
    d = decide(now, "0 3 * * *", t("2025-01-01T03:00"), CREATED, ["c-manual"])
    assert d.create_for is None and "c-manual" in d.reason
    d = decide(now + dt.timedelta(minutes=5), "0 3 * * *", t("2025-01-01T03:00"), CREATED, [])
    assert d.create_for == t("2025-01-02T03:00")


def test_missed_runs_give_one_backup_and_old_ones_are_skipped():
    # operator down for two days: only the newest fire time within the deadline runs
    d = decide(t("2025-01-04T03:10"), "0 3 * * *", t("2025-01-01T03:00"), CREATED, [])
    assert d.create_for == t("2025-01-04T03:00")
    d = decide(t("2025-01-04T05:00"), "0 3 * * *", t("2025-01-01T03:00"), CREATED, [])
    assert d.create_for is None


def test_names_are_deterministic():
    assert backup_name("c", t("2025-01-02T03:00")) == "c-202501020300"


@settings(max_examples=200, deadline=None)
@given(
    minute=st.integers(0, 59),
    every=st.integers(1, 59),
    start=st.datetimes(min_value=dt.datetime(2024, 1, 1), max_value=dt.datetime(2030, 1, 1)),
    steps=st.integers(1, 200),
)
def test_every_tick_creates_each_fire_time_at_most_once(minute, every, start, steps):
    """Simulate a controller ticking every minute: created fire times are strictly increasing,
    every one matches the cron, and none is skipped when nothing else is running."""
    expr = f"*/{every} * * * *"
    cron = parse_cron(expr)
    now = start.replace(tzinfo=UTC, second=0, microsecond=0)
    created_at, last, made = now, None, []
    for _ in range(steps):
        now += dt.timedelta(minutes=1)
        d = decide(now, expr, last, created_at, [])
        if d.create_for:
            assert last is None or d.create_for > last
            assert d.create_for.minute % every == 0
            made.append(d.create_for)
            last = d.create_for
    expected, x = [], next_after(cron, created_at)
    while x <= now:
        expected.append(x)
        x = next_after(cron, x)
    assert made == expected


def b(name, phase, when):
    return BackupInfo(name, phase, t(when))


NOW = t("2025-02-01T00:00")


def test_keep_last_counts_successful_backups_only():
    bs = [
        b("a", "Succeeded", "2025-01-01T00:00"),
        b("b", "Succeeded", "2025-01-02T00:00"),
        b("c", "Succeeded", "2025-01-03T00:00"),
        b("r", "Running", "2024-01-01T00:00"),
    ]
    assert expired(bs, NOW, keep_last=2, max_age_seconds=None) == ["a"]


def test_max_age_never_removes_the_newest_successful_backup():
    bs = [
        b("a", "Succeeded", "2024-01-01T00:00"),
        b("b", "Succeeded", "2024-02-01T00:00"),
        b("f", "Failed", "2024-03-01T00:00"),
    ]
    assert expired(bs, NOW, keep_last=None, max_age_seconds=86400) == ["a", "f"]


def test_failed_backups_go_once_a_newer_success_exists():
    bs = [
        b("f1", "Failed", "2025-01-01T00:00"),
        b("ok", "Succeeded", "2025-01-02T00:00"),
        b("f2", "Failed", "2025-01-03T00:00"),
    ]
    assert expired(bs, NOW, keep_last=5, max_age_seconds=None) == ["f1"]


def test_no_policy_removes_nothing():
    assert expired([b("a", "Succeeded", "2020-01-01T00:00")] * 3, NOW, None, None) == []


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["Succeeded", "Failed", "Running", None]), st.integers(0, 10_000)),
        max_size=20,
    ),
    st.one_of(st.none(), st.integers(1, 10)),
    st.one_of(st.none(), st.integers(1, 20_000)),
)
def test_newest_success_and_running_ones_always_survive(items, keep_last, max_age):
    base = t("2025-01-01T00:00")
    bs = [BackupInfo(f"b{i}", phase, base + dt.timedelta(minutes=m)) for i, (phase, m) in enumerate(items)]
    now = base + dt.timedelta(minutes=12_000)
    gone = set(expired(bs, now, keep_last, max_age))
    ok = [x for x in bs if x.phase == "Succeeded"]
    if ok:
        newest = max(ok, key=lambda x: (x.time, x.name))
        assert newest.name not in gone
    assert not gone & {x.name for x in bs if x.phase in ("Running", None)}
    if keep_last is not None:
        assert len([x for x in ok if x.name not in gone]) >= min(keep_last, len(ok)) or max_age is not None
