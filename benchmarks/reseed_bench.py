"""Re-seed benchmark (not a test): how long replacing a replica's data by CLONE takes, what it
costs the cluster's writes, and how its copy rate compares with a raw `tar | tar` of the same
data on the same machine.

Three real MySQL 9.7 servers (tests/support/mysql.py, 127.0.0.1 only) run the operator's own pass
(`ReplicationEngine.reconcile`, one pass a second as the operator's loop) with the operator
account's privileges and errantPolicy Reseed. Per size: a table is filled with incompressible rows
to SIZE GiB and replicated; one writer inserts rows through the primary for --window seconds
(the rate before); a transaction is written on db-2 by hand (errant); the loop records it and
re-seeds db-2 by CLONE from the healthy replica db-1 while the writer goes on (the rate during the
copy); the benchmark starts db-2 again when it has shut down on its copy (as its container would
be restarted) and waits until the cluster is healthy. Then the donor's InnoDB files (its data
directory without binary and relay logs, what CLONE copies) are copied with `tar -cf - | tar -xf -`
into a new folder on the same file system.

    .venv/bin/python -m benchmarks.reseed_bench [--sizes 1,5] [--window 10]

Reported per size: bytes copied (clone_progress), copy seconds (its stages DROP DATA -> FILE SYNC), the
most bytes the loop's observation showed during the copy (what status.instances[].reseed says), total
re-seed (decision -> healthy again, including the restart), copy MiB/s, tar MiB/s and their ratio: the
tar runs with the writer going on and the page cache dropped, as the copy does (root only: it
writes /proc/sys/vm/drop_caches), then once more idle (the cache hot, for reference),
writes/s on the primary before and during the copy and their ratio, rows lost (must be 0).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.operator_scale import print_table
from mysql_operator import topology as t
from mysql_operator.members import ClusterState, Credentials, Member
from mysql_operator.replication import ReplicationEngine
from tests.support.mysql import ADMIN_USER, OPERATOR_USER, MySQLFactory, mysql_unavailable
from tests.support.wait import wait_for
from tests.support.writer import Writer

APP = Credentials("app", "bench-app-pw-5c1e")
REPL = Credentials("repl", "bench-repl-pw-8d42")
DB = "app"
MIB = 1024 * 1024


def rate(acks: list[float], start: float, end: float) -> float:
    return sum(1 for a in acks if start <= a < end) / max(end - start, 1e-9)


def fill(server, gib: float, **connect) -> None:
    """Rows of ~1 KiB of random bytes until app.big holds `gib` GiB (InnoDB's own estimate);
    `connect`: how to log in (default: the admin account of tests/support/mysql.py)."""
    conn = server.connect(**(connect or {"user": ADMIN_USER}), database=DB, timeout=3600)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE big (id BIGINT AUTO_INCREMENT PRIMARY KEY, pad VARBINARY(1024))")
        cur.execute(
            "INSERT INTO big (pad) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
            "WHERE i < 1000) SELECT RANDOM_BYTES(1000) FROM n"
        )
        while True:
            cur.execute("ANALYZE TABLE big")
            cur.execute(
                "SELECT DATA_LENGTH FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 'big'",
                (DB,),
            )
            if cur.fetchone()[0] >= gib * 1024 * MIB:
                break
            cur.execute("INSERT INTO big (pad) SELECT RANDOM_BYTES(1000) FROM big LIMIT 100000")
    conn.close()


def drop_caches() -> None:
    """Write back and drop the page cache, so that the copy and the tar it is compared with both
    read the donor's files from the disk (a fill just written is in the cache; whatever copy
    comes second would read it from memory)."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def innodb_bytes(datadir: Path) -> int:
    return sum(
        f.stat().st_size
        for f in datadir.rglob("*")
        if f.is_file() and not f.name.startswith(("binlog.", "relay-bin", "mysqld"))
    )


def tar_copy(datadir: Path) -> tuple[int, float]:
    """Bytes and seconds of `tar -cf - | tar -xf -` of the InnoDB files into a new folder."""
    with tempfile.TemporaryDirectory(dir=datadir.parent) as dest:
        started = time.monotonic()
        subprocess.run(
            f"tar -C {datadir} --exclude='binlog.*' --exclude='relay-bin*' --exclude='mysqld*' -cf - . "
            f"| tar -C {dest} -xf -",
            shell=True,
            check=True,
        )
        os.sync()
        seconds = time.monotonic() - started
        return innodb_bytes(Path(dest)), seconds


def one_size(factory: MySQLFactory, gib: float, window: float) -> list[tuple[str, str]]:
    servers = factory.create(3, prefix=f"rs{int(gib * 10)}", semisync=True)
    for k, s in enumerate(servers):
        s.name = f"db-{k}"
    engine = ReplicationEngine(
        [Member(s.name, k, s.host, s.port) for k, s in enumerate(servers)],
        Credentials(OPERATOR_USER, factory.admin_password),
        REPL,
        t.Settings(instances=3, semisync=True, reseed=True, reseed_errant=True),
        app=APP,
        app_database=DB,
    )
    engine.reseeds.keep_evidence = lambda name, gtids, events: "the benchmark's record (dropped)"
    state = ClusterState()
    by = {s.name: s for s in servers}
    shown = [(0, 0)]  # the most bytes the loop's observation of db-2 reported (its status would)

    def passes(until, timeout: float, restart: bool = False):
        def step():
            if restart and not by["db-2"].alive:
                by["db-2"].start()
            out = engine.reconcile(state)
            d = out.decision
            shown[0] = max([shown[0]] + [i.clone_bytes for i in out.observed if i.name == "db-2"])
            time.sleep(1.0)
            return d if until(d) else None

        return wait_for(step, timeout, "the cluster", interval=0)

    passes(lambda d: isinstance(d, t.Healthy) and not d.degraded, 120)
    primary = by[state.current_primary]
    primary.query("CREATE TABLE app.w (id INT PRIMARY KEY, note VARCHAR(40))")
    print(f"filling {gib} GiB ...", file=sys.stderr)
    fill(primary, gib)
    passes(lambda d: isinstance(d, t.Healthy) and not d.degraded, 1800)
    # the last id, not COUNT(*): counting 5 GiB of rows outlasts a query's 5 s timeout
    wait_for(
        lambda: (
            by["db-2"].query("SELECT MAX(id) FROM app.big")[0][0]
            == primary.query("SELECT MAX(id) FROM app.big")[0][0]
        ),
        1800,
        "db-2 caught up",
    )
    writer = Writer(
        lambda name: by[name].connect(user=APP.user, password=APP.password, database=DB, timeout=2),
        f"INSERT INTO {DB}.w VALUES (%s, %s)",
        target=lambda: state.current_primary,
        pause=0.0,
    )
    writer.start()
    try:
        before_start = time.monotonic()
        time.sleep(window)
        before_end = time.monotonic()
        victim = by["db-2"]
        drop_caches()
        victim.query("SET GLOBAL super_read_only = OFF")
        victim.query("INSERT INTO app.w VALUES (-1, 'errant')")
        victim.query("SET GLOBAL super_read_only = ON")
        decided = time.monotonic()
        passes(lambda d: isinstance(d, t.Reseed), 60)
        passes(lambda d: isinstance(d, t.Healthy) and not d.degraded, 3600, restart=True)
        healthy = time.monotonic()
        drop_caches()
        loaded_bytes, loaded_s = tar_copy(by["db-1"].datadir)  # the same write load going on
    finally:
        writer.stop()
    # the copy: DROP DATA -> FILE SYNC (clone_status' END_TIME is the end of the recovery after
    # the restart, which also counts the shutdown and how soon the server was started again)
    begin, end, copied = victim.query(
        "SELECT UNIX_TIMESTAMP(MIN(BEGIN_TIME)), UNIX_TIMESTAMP(MAX(CASE WHEN STAGE = 'FILE SYNC' "
        "THEN END_TIME END)), SUM(DATA) FROM performance_schema.clone_progress"
    )[0]
    copy_s = float(end) - float(begin)
    # the copy's window on this clock: it began after the decision; measured by wall time
    wall_offset = time.time() - time.monotonic()
    during = rate([a.at for a in writer.acked], float(begin) - wall_offset, float(end) - wall_offset)
    before = rate([a.at for a in writer.acked], before_start, before_end)
    lost = {a.id for a in writer.acked} - {r[0] for r in primary.query("SELECT id FROM app.w")}
    tar_bytes, tar_s = tar_copy(by["db-1"].datadir)
    clone_rate, tar_rate = int(copied) / MIB / copy_s, tar_bytes / MIB / tar_s
    loaded_rate = loaded_bytes / MIB / loaded_s
    label = f"{gib:g} GiB"
    return [
        (f"{label}: bytes copied (MiB)", f"{int(copied) / MIB:.0f}"),
        (f"{label}: copy (clone_progress DROP DATA -> FILE SYNC, s)", f"{copy_s:.1f}"),
        (
            f"{label}: most shown by the loop during the copy (MiB copied of MiB)",
            f"{shown[0][0] / MIB:.0f} of {shown[0][1] / MIB:.0f}",
        ),
        (f"{label}: re-seed, decision -> healthy again (s)", f"{healthy - decided:.1f}"),
        (f"{label}: copy rate (MiB/s)", f"{clone_rate:.0f}"),
        (
            f"{label}: tar | tar of the donor's InnoDB files, idle after ({tar_bytes / MIB:.0f} MiB, MiB/s)",
            f"{tar_rate:.0f}",
        ),
        (
            f"{label}: tar | tar, same write load, cache dropped as before the copy (MiB/s)",
            f"{loaded_rate:.0f}",
        ),
        (f"{label}: copy rate / that tar rate (goal >= 0.7)", f"{clone_rate / loaded_rate:.2f}"),
        (f"{label}: copy rate / idle tar rate (cache hot)", f"{clone_rate / tar_rate:.2f}"),
        (f"{label}: primary writes/s before", f"{before:.0f}"),
        (f"{label}: primary writes/s during the copy", f"{during:.0f}"),
        (f"{label}: during / before", f"{during / before:.2f}" if before else "-"),
        (f"{label}: acknowledged writes lost", str(len(lost))),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1", help="GiB per run, comma-separated (e.g. 1,5)")
    parser.add_argument("--window", type=float, default=10.0, help="seconds of writes measured before")
    args = parser.parse_args()
    missing = mysql_unavailable()
    if missing:
        sys.exit(f"no MySQL server: {missing}")
    rows: list[tuple[str, str]] = []
    for size in (float(x) for x in args.sizes.split(",")):
        factory = MySQLFactory()
        try:
            rows += one_size(factory, size, args.window)
        finally:
            factory.close()  # its servers stop and their data goes, also after an error
    print_table(rows)


if __name__ == "__main__":
    main()
