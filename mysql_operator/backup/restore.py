"""Restore a backup into a new, empty server: verify first, then load, then set the GTID position.

    from mysql_operator.backup.restore import restore_into
    from mysql_operator.backup.restore_types import Source, Target
    result = restore_into(Target(host, port, user, password), Source(s3, path), s3_credentials)

1. Read the manifest (a folder without one is not a complete backup: refused).
2. Download the data object once, streaming, computing its sha256 and size: refuse on any mismatch
   with the manifest. Nothing is written to the server and nothing to disk in this pass.
3. Check the target has no user databases (a restore never overwrites data).
4. Download again - pinned to the verified object's ETag, so a replaced object is refused - and
   stream it through the decompressor into the command-line client; the sha256 is checked again.
5. Set the server's GTID position to the backup's.

Verifying before loading costs one extra read of the compressed object and needs no disk. It is
cheap next to loading: measured with MinIO on the same 2-core machine (benchmarks/backup_bench.py),
the verify pass of a 398 MiB object takes about 0.5 s of a 30 s restore. Spooling the object to a
local file during the verify pass (then loading from it) would save that read but needs free disk of
the compressed size per instance restored at once, where the restore runs: in the restore Job,
whose /tmp is an in-memory emptyDir of 16 MiB.
"""

from __future__ import annotations

import concurrent.futures
import time
from dataclasses import replace
from typing import Callable

from mysql_operator.backup import commands, physical, pitr, storage, table_check, user_checks
from mysql_operator.backup.binlog_archive import Segment
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.manifest import Manifest
from mysql_operator.backup.pipeline import option_file
from mysql_operator.db.gtid import parser_for
from mysql_operator.db.flavor import Flavor, ServerVersion
from mysql_operator.db.observation import InstanceError
from mysql_operator.backup.restore_load import as_load_account, load_dump
from mysql_operator.backup.restore_server import (
    finish_instance,
    new_instance_or_refuse,
    refuse_foreign_definers,
    settle_events,
    user_databases,
)
from mysql_operator.backup.restore_source import read_manifest, segment_bytes, verify
from mysql_operator.backup.restore_types import (
    RestoreError,
    RestoreResult,
    Source,
    TableCheck,
    Target,
    instance_of,
)


def restore_into(
    target: Target,
    source: Source,
    s3_credentials: storage.Credentials,
    *,
    client=None,
    check_tables: bool = False,
) -> RestoreResult:
    """Restore `source` into the empty server `target` (the new cluster's primary). Raises
    RestoreError or StorageError; their text never contains a password. `check_tables`: once
    loaded, the tables are compared with those the backup recorded (table_check.py; before any
    binary log is replayed): a difference is a RestoreError naming each table."""
    client = client or storage.make_client(source.s3, s3_credentials)
    phases = _Phases()
    m = read_manifest(client, source)
    etag = verify(client, source.s3, m, source.key)
    phases.lap("verify")

    inst = instance_of(target, slow_timeout=120)
    try:
        version = inst.dialect.version
        if version.flavor.value != m.flavor:
            raise RestoreError(
                f"the backup is of a {m.flavor} server; the target runs {version}: restore "
                f"into a cluster with flavor {m.flavor}"
            )
        existing = user_databases(inst)
        if existing:
            raise RestoreError(
                f"the target already has databases ({', '.join(existing)}): a restore only "
                "goes into a new, empty cluster and never overwrites data"
            )
        for sql in commands.before_load_sql(version):
            inst.execute(sql)
    except InstanceError as e:
        raise RestoreError(f"preparing {target.host}:{target.port} for the restore: {e}") from None
    finally:
        inst.close()

    loaded, dump_gtid = load_dump(client, source.s3, m, etag, target, version, source.key)
    phases.lap("load")

    refuse_foreign_definers(
        target,
        "the dump defines",
        "these were written otherwise than the dump tools write a DEFINER: take the backup again "
        "with the operator (a MySQLBackup)",
    )

    inst = instance_of(target, slow_timeout=120)
    try:
        gtid = dump_gtid if version.flavor is Flavor.MYSQL else m.gtid_position
        for sql, args in commands.after_load_sql(version, gtid):
            inst.execute(sql, args)
    except InstanceError as e:
        raise RestoreError(f"setting the GTID position {gtid} on {target.host}:{target.port}: {e}") from None
    finally:
        inst.close()
    phases.lap("settle")
    checked = checked_tables(target, m, source.key, version) if check_tables else None
    if check_tables:
        phases.lap("checkTables")
    return RestoreResult(
        manifest=m,
        gtid_position=m.gtid_position,
        bytes_loaded=loaded,
        table_check=checked,
        phases=phases.seconds,
    )


class _Phases:
    """Seconds spent in each phase of a restore, in order, measured one after another."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._since = time.monotonic()

    def lap(self, phase: str) -> None:
        now = time.monotonic()
        self.seconds[phase] = round(now - self._since, 2)
        self._since = now


def checked_tables(target: Target, m: Manifest, key, version: ServerVersion) -> TableCheck | None:
    """The restored tables of `target` (loaded from a dump, or a physical copy's restarted on)
    against those the backup recorded; None when it recorded none. RestoreError naming each table
    that differs."""
    recorded = table_check.recorded_tables(m, key)
    if recorded is None:
        return None
    inst = instance_of(target, slow_timeout=120)
    try:
        databases = user_databases(inst)
    except InstanceError as e:
        raise RestoreError(f"listing the restored databases of {target.host}:{target.port}: {e}") from None
    finally:
        inst.close()
    checked = table_check.check_tables(target, version, databases, recorded)
    if not checked.passed:
        shown = "; ".join(checked.differences[:10])
        more = len(checked.differences) - 10
        raise RestoreError(
            f"the restored tables differ from those the backup recorded: {shown}"
            + (f" (and {more} more)" if more > 0 else "")
        )
    return checked


def load_instance(
    target: Target,
    source: Source,
    creds: storage.Credentials,
    app_database: str | None,
    *,
    client=None,
    drop_account: bool = False,
    chain: list[Segment] | None = None,
    primary: bool = True,
    check_tables: bool = False,
    checks: tuple[user_checks.Check, ...] = (),
) -> RestoreResult:
    """Restore into one instance of a new cluster (`primary`: the one the cluster starts with as
    its primary, see settle_events). Its server starts read-only (super_read_only on
    MySQL); the load needs it writable for its duration - no Pod carries a role label during a
    restore, so no Service routes to it meanwhile - and it is read-only again afterwards, failed
    or not. The init step creates spec.database empty: dropped (only if it has no table, outside
    the binary log) so that restore_into finds the server empty; the dump recreates it.
    `drop_account`: the account that loaded (the restore account, which holds ALL) drops itself
    at the end, outside the binary log, whatever the outcome. `check_tables`: see restore_into.
    `checks`: the user's, run once everything is loaded and replayed (backup/user_checks.py).
    The event scheduler is off while the server is writable: an ENABLED event of the dump would
    run as soon as it is loaded, writing rows and GTIDs of this instance alone (MariaDB 10.11:
    the restore then failed with 1956 at SET GLOBAL gtid_slave_pos); it is on again once the
    instance is read-only."""
    inst = instance_of(target)
    scheduler = False
    try:
        scheduler = str(inst.scalar("SELECT @@GLOBAL.event_scheduler")).upper() == "ON"
        if scheduler:
            inst.execute("SET GLOBAL event_scheduler = OFF")
        inst.set_read_only(False)  # first: MySQL's super_read_only refuses the DROP to everyone
        if app_database:
            tables = inst.scalar(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s", (app_database,)
            )
            if not tables:
                inst.execute("SET SESSION sql_log_bin = 0")
                inst.execute(f"DROP DATABASE IF EXISTS `{app_database.replace('`', '``')}`")
                inst.execute("SET SESSION sql_log_bin = 1")
    except InstanceError as e:
        raise RestoreError(f"preparing {target.host}:{target.port} for the restore: {e}") from None
    finally:
        inst.close()
    try:
        client = client or storage.make_client(source.s3, creds)
        result = restore_into(target, source, creds, client=client, check_tables=check_tables)
        settle_events(target, result.manifest, source.key, primary)
        if chain is not None:
            result = _replay(client, target, source, result, chain)
        return with_checks(target, result, checks)
    finally:
        finish_instance(target, drop_account, scheduler)


def _replay(
    client, target: Target, source: Source, result: RestoreResult, chain: list[Segment]
) -> RestoreResult:
    started = time.monotonic()
    position = roll_forward(client, target, source, result.manifest, chain)
    phases = {**result.phases, "replay": round(time.monotonic() - started, 2)}
    # the dump's objects are the application account's already: any other definer is the
    # replay's (a binary log's CREATE keeps its definer), which may name a privileged account
    refuse_foreign_definers(
        target,
        "the archived binary logs define",
        "a replay cannot rewrite these: recreate them as the application account in the "
        "source, take a new backup, and restore to a time after it",
    )
    return replace(result, gtid_position=position, replayed=tuple(chain), phases=phases)


def with_checks(
    target: Target, result: RestoreResult, checks: tuple[user_checks.Check, ...]
) -> RestoreResult:
    """`result` once the user's `checks` passed on `target` (RestoreError when one did not)."""
    if not checks:
        return result
    started = time.monotonic()
    passed = user_checks.run(target, checks)
    phases = {**result.phases, "userChecks": round(time.monotonic() - started, 2)}
    return replace(result, checks_passed=passed, phases=phases)


def load_all(
    targets: dict[str, Target],
    source: Source,
    creds: storage.Credentials,
    app_database: str | None,
    drop_account: bool,
    chain: list[Segment] | None,
    primary: str | None,
    results: list[RestoreResult],
    errors: list[str],
    check_tables: bool = False,
    checks: tuple[user_checks.Check, ...] = (),
) -> None:
    """A dump loaded into every instance at once; appends to `results` and `errors`.
    `check_tables`: the primary's tables are checked (restore_into); `checks`: the user's, on
    the primary (load_instance)."""
    primary = primary or next(iter(targets), None)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
        futures = {
            pool.submit(
                load_instance,
                t,
                source,
                creds,
                app_database,
                drop_account=drop_account,
                chain=chain,
                primary=n == primary,
                check_tables=check_tables and n == primary,
                checks=checks if n == primary else (),
            ): n
            for n, t in targets.items()
        }
        for f in concurrent.futures.as_completed(futures):
            try:
                results.append(f.result())
            except Exception as e:  # noqa: BLE001 - every failure is reported by instance
                name = futures[f]
                errors.append(
                    f"{name}: {commands.tls_hint(str(e) or type(e).__name__, targets[name].tls_ca)}"
                )


def new_cluster_accounts(
    client,
    targets: dict[str, Target],
    source: Source,
    m: Manifest,
    app_database: str | None,
    refuse: Callable[[ServerVersion], str | None] = lambda _v: None,
) -> tuple[str, list[str]]:
    """Before a physical backup is copied into a new cluster: the object verified (its pinned
    ETag), every instance new, the first of the flavor of the backup (and not refused by
    `refuse(its version)`), and the new cluster's accounts read from it (account_statements).
    Raises RestoreError."""
    etag = verify(client, source.s3, m, source.key)
    for t in targets.values():
        new_instance_or_refuse(t, app_database)
    inst = instance_of(next(iter(targets.values())))
    try:
        version = inst.dialect.version
        if version.flavor.value != m.flavor:
            raise RestoreError(
                f"the backup is of a {m.flavor} server; the new cluster runs {version.flavor.value}"
            )
        refusal = refuse(version)
        if refusal:
            raise RestoreError(refusal)
        return etag, physical.account_statements(inst.execute, mariadb=m.flavor == "mariadb")
    except InstanceError as e:
        raise RestoreError(f"reading the new cluster's accounts: {e}") from None
    finally:
        inst.close()


def finish_all(targets: dict[str, Target], drop_account: bool, errors: list[str]) -> None:
    """After a restore, whatever happened: the restore account goes, read-only again (errors
    added to `errors`, naming the instance)."""
    for name, t in targets.items():
        try:
            finish_instance(t, drop_account)
        except InstanceError as e:
            errors.append(f"{name}: after the restore: {e}")


def roll_forward(client, target: Target, source: Source, m: Manifest, chain: list[Segment]) -> str:
    """Replay `chain` into `target` after the backup was loaded (each instance replays it: the
    replayed transactions keep their GTIDs, so the instances end equal). Returns the target's
    GTID position afterwards."""
    assert source.stop is not None
    parse = parser_for(m.flavor)
    applied = m.gtid_position or ""
    inst = instance_of(target)
    try:
        version = inst.dialect.version
    finally:
        inst.close()
    launch = pitr.sidecar_launch(target.tools_dir) if target.tools_dir else pitr.local_launch
    with as_load_account(target) as (loader, account):
        with option_file(loader.user, loader.password, loader.tools_dir) as options:
            ep = Endpoint(loader.host, loader.port, loader.user)
            client_argv = commands.client_command(version, ep, options, loader.tls_ca, binlogged=True)
            for seg in chain:
                try:
                    pitr.replay_segment(
                        segment_bytes(client, source, seg),
                        pitr.tool_argv(m.flavor, applied, source.stop),
                        client_argv,
                        launch=launch,
                        secrets=(loader.password, target.password),
                        on_database=account.grant,
                    )
                except pitr.PitrError as e:
                    raise RestoreError(f"replaying {seg.file} of server {seg.server}: {e}") from None
                applied = str(parse(applied).union(parse(seg.gtids_after)))
    inst = instance_of(target)
    try:
        for sql in commands.after_replay_sql(version):
            inst.execute(sql)
        return str(inst.scalar(commands.executed_gtids_sql(version)) or "").replace("\n", "")
    except InstanceError as e:
        raise RestoreError(f"reading the GTID position of {target.host}:{target.port}: {e}") from None
    finally:
        inst.close()
