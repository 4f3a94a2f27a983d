"""MariaDB re-seed benchmark (not a test): how long replacing a replica's data by a physical copy
(sh/seed.sh: mariadb-backup streamed over TLS with socat, prepared on the recipient) takes, what it
costs the primary's writes, and how its copy rate compares with a raw `tar | tar` of the same data.

Three real MariaDB servers (tests/support/mariadb.py, 127.0.0.1 only; Debian's mariadbd) run the
operator's own pass (`ReplicationEngine.reconcile`, one pass a second) with errantPolicy Reseed and
semi-sync. Per size: a table is filled with incompressible rows to SIZE GiB and replicated; one
writer inserts rows through the primary for --window seconds (the rate before); a transaction is
written on db-2 by hand (errant); the loop records it and asks for db-2's copy (`request_seed`).
What a Pod does then is done here by the benchmark, with the production script: db-2 is stopped,
`seed.sh receive` copies from db-1's `seed.sh serve` (the donor replica, which keeps acknowledging
the primary's commits), and db-2 starts on the copy with its GTID state (`--init-file`, as
start.sh does); the loop makes it a replica again. Then the donor's data directory (without binary
and relay logs) is copied with `tar -cf - | tar -xf -` on the same file system.

    .venv/bin/python -m benchmarks.reseed_mariadb_bench [--sizes 1,5] [--window 10]

Reported per size: bytes of the copy, copy seconds (receive: stream + prepare), total re-seed
(decision -> healthy again), copy MiB/s, tar MiB/s and their ratio: the
tar runs with the writer going on and the page cache dropped, as the copy does (root only: it
writes /proc/sys/vm/drop_caches); then, the writer stopped, one more copy and one more tar, each
from a dropped cache (the transport alone, without the competition for the cores); writes/s on
the primary before and during the copy and their ratio, rows lost (must be 0). The stream alone
(seed.sh's "copy received in": from the donor's answer to the last file written, without the
prepare) is the counterpart of what reseed_bench times for CLONE (its file stages, without the
recovery); its rate is reported against the same tar rates.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.operator_scale import print_table
from benchmarks.reseed_bench import MIB, drop_caches, fill, rate
from mysql_operator import tls
from mysql_operator import topology as t
from mysql_operator.members import ClusterState, Credentials, Member
from mysql_operator.replication import ReplicationEngine
from tests.support.mariadb import ADMIN_USER as MARIADB_ADMIN
from tests.support.mariadb import OPERATOR_USER, MariaDBFactory, missing_binaries
from tests.support.ports import free_port
from tests.support.wait import wait_for
from tests.support.writer import Writer

APP = Credentials("app", "bench-app-pw-2b7d")
REPL = Credentials("repl", "bench-repl-pw-61c0")
DB = "app"
SEED_SH = Path(__file__).resolve().parents[1] / "mysql_operator" / "manifests" / "sh" / "seed.sh"
# what the copy does not carry (logs, the preallocated redo log and temporary tablespace)
LOGS = ("mysql-bin.", "relay-bin", "mysqld", "error.log", "stdout.log", "ib_logfile", "ibtmp")


def data_bytes(datadir: Path) -> int:
    return sum(f.stat().st_size for f in datadir.rglob("*") if f.is_file() and not f.name.startswith(LOGS))


def tar_copy(datadir: Path) -> tuple[int, float]:
    excludes = " ".join(f"--exclude='{p}*'" for p in LOGS)
    with tempfile.TemporaryDirectory(dir=datadir.parent) as dest:
        started = time.monotonic()
        subprocess.run(f"tar -C {datadir} {excludes} -cf - . | tar -C {dest} -xf -", shell=True, check=True)
        os.sync()
        return data_bytes(Path(dest)), time.monotonic() - started


class Seeder:
    """What a MariaDB Pod does around a re-seed, for servers of the factory: the donor's sidecar
    (`seed.sh serve` for each server, on its own port), and on request the recipient's restart:
    stopped, `seed.sh receive`, started on the copy with the copy's GTID state."""

    def __init__(self, root: Path, servers, admin_password: str, tls_dir: Path | None = None):
        """`tls_dir`: the sidecars' certificate (ca.crt, tls.crt, tls.key); by default one for
        *.bench of a new CA."""
        root.mkdir(parents=True, exist_ok=True)
        self.root, self.by = root, {s.name: s for s in servers}
        self.procs: list[subprocess.Popen] = []
        if tls_dir is None:
            now = dt.datetime.now(dt.timezone.utc)
            ca = tls.new_ca("bench", now)
            cert = tls.server_certificate(ca, ["*.bench"], now)
            tls_dir = root / "tls"
            tls_dir.mkdir()
            for name, text in (
                ("ca.crt", ca.cert_pem),
                ("tls.crt", cert.cert_pem),
                ("tls.key", cert.key_pem),
            ):
                (tls_dir / name).write_text(text)
        self.tls_dir = tls_dir
        self.token = root / "token"
        self.token.write_text(admin_password)
        (root / "reseed").mkdir()
        self.ports: dict[str, int] = {}
        for s in servers:  # the server's own account over TCP (the factory's accounts are @127.0.0.1)
            run = root / f"run-{s.name}"
            run.mkdir()
            (run / "client.cnf").write_text(
                f'[client]\nuser = "{OPERATOR_USER}"\npassword = "{admin_password}"\n'
                f"host = 127.0.0.1\nport = {s.port}\n"
            )
            self.ports[s.name] = free_port()
            self.procs.append(
                subprocess.Popen(
                    ["/bin/bash", str(SEED_SH), "serve"],
                    env=self.env(s, MYSQL_OPERATOR_SEED_PORT=str(self.ports[s.name]), TMPDIR=str(s.root)),
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        self.copies: list[tuple[float, float, int]] = []  # (start, end, bytes) on time.monotonic()
        self.streamed: list[float] = []  # per copy: seconds of the stream alone (seed.sh's own count)
        self.error: BaseException | None = None

    def env(self, s, **extra: str) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin",
            "MYSQL_OPERATOR_DATA_ROOT": str(s.root),
            "MYSQL_OPERATOR_RUN_DIR": str(self.root / f"run-{s.name}"),
            "MYSQL_OPERATOR_TLS_DIR": str(self.tls_dir),
            "MYSQL_OPERATOR_SEED_TOKEN_FILE": str(self.token),
            "MYSQL_OPERATOR_RESEED_DIR": str(self.root / "reseed"),
            "POD_NAME": s.name,
            **{k: v for k, v in os.environ.items() if k == "MYSQL_OPERATOR_SEED_COPY_THREADS"},
            **extra,
        }

    def request(self, instance: str, donor: str, _host: str) -> None:
        """engine.request_seed: the Pod's restart on a copy, in a thread (the loop goes on)."""
        (self.root / "reseed" / instance).write_text(f"{donor}.bench {time.time_ns()}\n")
        threading.Thread(target=self._restart, args=(instance, donor), daemon=True).start()

    def copy_now(self, instance: str, donor: str) -> None:
        """One more copy onto `instance`, here and now (no loop, no load: the transport alone)."""
        (self.root / "reseed" / instance).write_text(f"{donor}.bench {time.time_ns()}\n")
        self._restart(instance, donor)
        if self.error is not None:
            raise self.error

    def _restart(self, instance: str, donor: str) -> None:
        try:
            s = self.by[instance]
            s.stop()
            started = time.monotonic()
            env = self.env(
                s, MYSQL_OPERATOR_SEED_PORT=str(self.ports[donor]), MYSQL_OPERATOR_SEED_ADDRESS="127.0.0.1"
            )
            r = subprocess.run(
                ["/bin/bash", str(SEED_SH), "receive"], env=env, capture_output=True, text=True
            )
            if r.returncode != 0:
                raise RuntimeError(f"seed.sh receive: {r.stderr[-2000:]}")
            print(r.stderr, file=sys.stderr)  # its own account of the transfer and the prepare
            self.streamed.append(float(re.search(r"copy received in ([0-9.]+) s", r.stderr)[1]))
            self.copies.append((started, time.monotonic(), data_bytes(s.datadir)))
            init = s.root / "reseed-init.sql"
            given = s.root / "reseed-init.given.sql"
            init.rename(given)  # once, as start.sh does
            s.restart(init_file=given)
        except BaseException as e:  # noqa: BLE001 - reported by the benchmark's loop
            self.error = e

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, 15)
                p.wait(10)


def one_size(factory: MariaDBFactory, gib: float, window: float) -> list[tuple[str, str]]:
    servers = factory.create(3, semisync=True, prefix=f"rs{int(gib * 10)}")
    for k, s in enumerate(servers):
        s.name = f"db-{k}"
        s.restart(innodb_buffer_pool_size="512M", innodb_log_file_size="256M")
    seeder = Seeder(
        Path(tempfile.mkdtemp(prefix="seed-", dir=servers[0].root.parent)), servers, factory.admin_password
    )
    try:
        return _measure(servers, seeder, factory, gib, window)
    finally:
        seeder.close()


def _measure(
    servers, seeder: Seeder, factory: MariaDBFactory, gib: float, window: float
) -> list[tuple[str, str]]:
    engine = ReplicationEngine(
        [Member(s.name, k, s.host, s.port) for k, s in enumerate(servers)],
        Credentials(OPERATOR_USER, factory.admin_password, "127.0.0.1"),
        REPL,
        t.Settings(instances=3, semisync=True, reseed=True, reseed_errant=True),
        app=APP,
        app_database=DB,
    )
    engine.reseeds.keep_evidence = lambda name, gtids, events: "the benchmark's record (dropped)"
    engine.reseeds.request_seed = seeder.request
    state = ClusterState()
    by = {s.name: s for s in servers}
    shown = [(0, 0)]  # the most bytes the loop's observation of db-2 reported (its status would)

    def passes(until, timeout: float):
        def step():
            if seeder.error is not None:
                raise seeder.error
            out = engine.reconcile(state)
            d = out.decision
            shown[0] = max([shown[0]] + [i.clone_bytes for i in out.observed if i.name == "db-2"])
            time.sleep(1.0)
            return d if until(d) else None

        return wait_for(step, timeout, "the cluster", interval=0)

    passes(lambda d: isinstance(d, t.Healthy) and not d.degraded, 120)
    primary = by[state.current_primary]
    primary.query(f"CREATE TABLE {DB}.w (id INT PRIMARY KEY, note VARCHAR(40))")
    print(f"filling {gib} GiB ...", file=sys.stderr)
    fill(primary, gib, user=MARIADB_ADMIN)
    # the last id, not COUNT(*): counting 5 GiB of rows outlasts a query's 5 s timeout
    count = primary.query(f"SELECT MAX(id) FROM {DB}.big")[0][0]
    for name in ("db-1", "db-2"):
        wait_for(
            lambda n=name: by[n].query(f"SELECT MAX(id) FROM {DB}.big")[0][0] == count,
            3600,
            f"{name} caught up",
        )
    passes(lambda d: isinstance(d, t.Healthy) and not d.degraded, 300)
    writer = Writer(
        lambda name: by[name].connect(user=APP.user, password=APP.password, database=DB, timeout=2),
        f"INSERT INTO {DB}.w VALUES (%s, %s)",
        target=lambda: state.current_primary,
        pause=0.0,
    )
    writer.start()
    try:
        before_start = time.monotonic()
        wait_for(lambda: time.monotonic() - before_start >= window, window + 5, "the window before")
        before_end = time.monotonic()
        drop_caches()
        by["db-2"].query(f"INSERT INTO {DB}.w VALUES (-1, 'errant')")
        decided = time.monotonic()
        passes(lambda d: isinstance(d, t.Reseed), 60)
        passes(lambda d: isinstance(d, t.Healthy) and not d.degraded and seeder.copies, 7200)
        healthy = time.monotonic()
        drop_caches()
        loaded_bytes, loaded_s = tar_copy(by["db-1"].datadir)  # the same write load going on
    finally:
        writer.stop()
    (start, end, copied) = seeder.copies[-1]
    acks = [a.at for a in writer.acked]
    during, before = rate(acks, start, end), rate(acks, before_start, before_end)
    lost = {a.id for a in writer.acked} - {r[0] for r in primary.query(f"SELECT id FROM {DB}.w")}
    # the same pair with nothing else running: what the transport costs, apart from the
    # competition for 2 cores with three servers and the writer
    drop_caches()
    seeder.copy_now("db-2", "db-1")
    (idle_start, idle_end, idle_copied) = seeder.copies[-1]
    drop_caches()
    tar_bytes, tar_s = tar_copy(by["db-1"].datadir)
    copy_s, (stream_s, idle_stream_s) = end - start, seeder.streamed[-2:]
    copy_rate, tar_rate = copied / MIB / copy_s, tar_bytes / MIB / tar_s
    idle_rate = idle_copied / MIB / (idle_end - idle_start)
    loaded_rate = loaded_bytes / MIB / loaded_s
    label = f"{gib:g} GiB"
    return [
        (f"{label}: bytes of the copy (MiB)", f"{copied / MIB:.0f}"),
        (f"{label}: copy (seed.sh receive: stream + prepare, s)", f"{copy_s:.1f}"),
        (
            f"{label}: most shown by the loop during the copy (MiB copied of MiB)",
            f"{shown[0][0] / MIB:.0f} of {shown[0][1] / MIB:.0f}",
        ),
        (f"{label}: re-seed, decision -> healthy again (s)", f"{healthy - decided:.1f}"),
        (f"{label}: copy rate (MiB/s)", f"{copy_rate:.0f}"),
        (
            f"{label}: tar | tar, same write load, cache dropped as before the copy (MiB/s)",
            f"{loaded_rate:.0f}",
        ),
        (f"{label}: copy rate / that tar rate (goal >= 0.7)", f"{copy_rate / loaded_rate:.2f}"),
        (f"{label}: stream alone (its part of the copy, s)", f"{stream_s:.1f}"),
        (f"{label}: stream alone rate / that tar rate", f"{copied / MIB / stream_s / loaded_rate:.2f}"),
        (f"{label}: copy rate idle after, cache dropped (MiB/s)", f"{idle_rate:.0f}"),
        (
            f"{label}: tar | tar of the donor's data, idle after, cache dropped ({tar_bytes / MIB:.0f} MiB, MiB/s)",
            f"{tar_rate:.0f}",
        ),
        (f"{label}: idle copy rate / idle tar rate", f"{idle_rate / tar_rate:.2f}"),
        (
            f"{label}: idle stream alone rate / idle tar rate",
            f"{idle_copied / MIB / idle_stream_s / tar_rate:.2f}",
        ),
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
    missing = missing_binaries() + [b for b in ("socat", "mariadb-backup", "mbstream") if not _which(b)]
    if missing:
        sys.exit(f"missing: {', '.join(missing)} (apt-get install mariadb-server mariadb-backup socat)")
    rows: list[tuple[str, str]] = []
    for size in (float(x) for x in args.sizes.split(",")):
        factory = MariaDBFactory()
        try:
            rows += one_size(factory, size, args.window)
        finally:
            factory.close()
    print_table(rows)


def _which(binary: str) -> bool:
    import shutil

    return shutil.which(binary) is not None


if __name__ == "__main__":
    socket.setdefaulttimeout(None)
    main()
