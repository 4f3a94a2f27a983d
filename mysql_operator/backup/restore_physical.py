"""Restore a physical backup (MySQL, method physical: backup/physical.py) into a new cluster.

    results, errors = restore(client, targets, source, manifest, donor, ...)   # from restore_job.restore_all

1. Verify the data object against the manifest (size, sha256, the key), as for a dump.
2. Check every instance is new: no user database but an empty spec.database.
3. Read the new cluster's accounts from its first instance (the init step made them; every
   instance has the same), as statements with their password hashes.
4. Unpack the copy into the folder shared with the client-tools sidecar (tar runs there: the
   bucket's bytes never reach a process with API credentials), start a server on it that replaces
   its accounts of the same names by the new cluster's, then serve it on `donor.port`.
5. Each instance in turn replaces its data by a CLONE of that server (as the restore account,
   encrypted) and restarts on it: under start.sh in place, else its container restarts it. Its
   GTID set must then be the manifest's.
6. Asked to check tables (a restore drill), the primary's tables, once it restarted on the copy,
   are compared with those the backup recorded from the copy (backup/table_check.py), as after
   a dump is loaded.
7. A point-in-time restore replays the archived binary logs into each, as after a dump; the
   restore account drops itself and the instance is read-only again, as after a dump.

Why CLONE into each instance rather than unpacking into its volume: the instances' volumes are
mounted by their own Pods only, and a running server replaces its data with CLONE atomically
(a copy that fails leaves it as it was). The throwaway server runs in the Job's sidecar, of the
cluster's own image, so the copy and the recipients are of the same server version, as CLONE
requires. The copy travels encrypted; the instances verify the server they clone: its
certificate, issued by the cluster's CA for the restore Service's name (the name they connect
to), is mounted in the Job's sidecar only (manifests/restore_jobs.restore_job). CLONE checks
the certificate's chain to the CA file it is given (clone_ssl_ca), not its name (measured: a
donor reached by an address its certificate does not name is accepted).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

from mysql_operator.backup import physical, storage

from mysql_operator.backup import copy_server
from mysql_operator.backup.manifest import Manifest
from mysql_operator.backup.restore import (
    checked_tables,
    finish_all,
    new_cluster_accounts,
    roll_forward,
    with_checks,
)
from mysql_operator.backup.restore_load import stream_into
from mysql_operator.backup.restore_server import settle_events
from mysql_operator.backup.user_checks import Check
from mysql_operator.backup.restore_types import (
    Donor,
    RestoreError,
    RestoreResult,
    Source,
    Target,
    instance_of,
)
from mysql_operator.db.gtid import MySQLGtidSet
from mysql_operator.topology import CLONE_FAILED
from mysql_operator.db.observation import InstanceError


def restore(
    client,
    targets: dict[str, Target],
    source: Source,
    m: Manifest,
    donor: Donor | None,
    app_database: str | None,
    *,
    drop_account: bool = False,
    chain: list | None = None,
    copy_timeout: float = 6 * 3600,
    primary: str | None = None,
    checks: tuple[Check, ...] = (),
    check_tables: bool = False,
) -> tuple[list[RestoreResult], list[str]]:
    """Restore the physical backup `m` into every target (one at a time). Returns the results and
    the errors, each naming its instance; never a password. `check_tables`: once the primary
    restarted on the copy, its tables are compared with those the backup recorded from the copy
    (restore.checked_tables; before any replay): a difference fails it, naming each table."""
    first = next(iter(targets.values()))
    if donor is None or not first.tools_dir:
        return [], [
            f"{m.backup} is a physical backup of {m.flavor} {m.server_version}: only a MySQL cluster "
            "can restore it (its restore Job's client-tools sidecar serves the copy to the new "
            "instances), and this restore Job has no such server; restore it into a MySQL cluster "
            "of the same series"
        ]
    results: list[RestoreResult] = []
    errors: list[str] = []
    try:
        started = time.monotonic()
        etag, accounts = new_cluster_accounts(client, targets, source, m, app_database)

        def unpack(folder) -> None:
            argv = copy_server.untar_command(folder)
            stream_into(client, source.s3, m, etag, source.key, argv, first.tools_dir)

        with physical.serving_copy(
            first.tools_dir,
            unpack,
            accounts,
            (first.user, first.password),
            donor.port,
            scratch=donor.scratch,
            tls_dir=donor.tls_dir,
        ) as copy:
            # verified, downloaded, decrypted, decompressed, unpacked and served
            unpacked = round(time.monotonic() - started, 2)
            if MySQLGtidSet.parse(copy.gtid_executed) != MySQLGtidSet.parse(m.gtid_position or ""):
                raise RestoreError(
                    f"the unpacked copy holds GTIDs {copy.gtid_executed}, its manifest says "
                    f"{m.gtid_position}: refusing to restore from it"
                )
            for name, t in targets.items():
                try:
                    done = _into(
                        client, t, source, m, donor, chain, copy_timeout, name == primary, check_tables
                    )
                    done = replace(done, phases={"unpack": unpacked, **done.phases})
                    results.append(with_checks(t, done, checks) if name == primary else done)
                except (RestoreError, InstanceError) as e:
                    errors.append(f"{name}: {e}")
                    break  # the others stay new and empty
    except (RestoreError, copy_server.PhysicalError, storage.StorageError) as e:
        errors.append(str(e))
    finally:  # as after a dump, whatever happened
        finish_all(targets, drop_account, errors)
    return results, errors


def _into(
    client,
    t: Target,
    source: Source,
    m: Manifest,
    donor: Donor,
    chain,
    timeout: float,
    primary: bool,
    check_tables: bool = False,
) -> RestoreResult:
    began = time.monotonic()
    inst = instance_of(t)
    try:
        # with a certificate, the instance verifies it against its own CA file (the cluster's)
        ca = donor.instance_ca if donor.tls_dir else None
        inst.start_clone(donor.host, donor.port, t.user, t.password, ca, require_ssl=True)
    finally:
        inst.close()
    wait_restarted_on_copy(lambda: instance_of(t), timeout)
    settle_events(t, m, source.key, primary, copy=True)
    inst = instance_of(t)
    try:
        executed = str(inst.scalar("SELECT @@GLOBAL.gtid_executed") or "").replace("\n", "")
        version = inst.dialect.version
    finally:
        inst.close()
    if MySQLGtidSet.parse(executed) != MySQLGtidSet.parse(m.gtid_position or ""):
        raise RestoreError(f"restarted on the copy with GTIDs {executed}, not the backup's {m.gtid_position}")
    # cloned from the served copy, restarted on it, its events settled
    phases = {"clone": round(time.monotonic() - began, 2)}
    checked = None
    if check_tables and primary:  # still fenced: the check only reads
        started = time.monotonic()
        checked = checked_tables(t, m, source.key, version)
        phases["checkTables"] = round(time.monotonic() - started, 2)
    if chain is not None:  # it restarted on the copy fenced (its my.cnf): the replay writes
        inst = instance_of(t)
        try:
            inst.set_read_only(False)
        finally:
            inst.close()
    result = RestoreResult(
        manifest=m,
        gtid_position=executed,
        bytes_loaded=m.compressed_size,
        table_check=checked,
        phases=phases,
    )
    if chain is None:
        return result
    started = time.monotonic()
    position = roll_forward(client, t, source, m, chain)
    phases["replay"] = round(time.monotonic() - started, 2)
    return replace(result, gtid_position=position, replayed=tuple(chain), phases=phases)


def wait_restarted_on_copy(connect: Callable, timeout: float, interval: float = 1.0) -> None:
    """Until the server answers again restarted on the copy (clone_status says so); RestoreError
    when the copy failed or `timeout` passed. It does not answer while it restarts."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        inst = connect()
        try:
            status = inst.clone_status()
            if status is None:
                return
            if status.stage == CLONE_FAILED:
                raise RestoreError(f"the copy failed: {status.error}")
            last = f"{status.stage} ({status.copied} of {status.total} bytes)"  # COPYING, COPIED
        except InstanceError as e:
            last = str(e)
        finally:
            inst.close()
        time.sleep(interval)
    raise RestoreError(f"the copy did not end with the server restarted on it within {timeout:.0f}s: {last}")
