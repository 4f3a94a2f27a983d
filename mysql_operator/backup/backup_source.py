"""Which instance a backup copies, and what it holds: one observation of each candidate,
`choose_source`'s pick among them, then the pick's version, databases and (MySQL physical) plugins,
and the primary's scheduled events."""

from __future__ import annotations

from mysql_operator.backup import commands, copy_server, physical
from mysql_operator.backup.backup_types import BackupError, BackupRequest, Candidate, Source
from mysql_operator.db.instance import Instance
from mysql_operator.db.observation import Observation


def choose_source(observed: list[tuple[str, Observation]], max_lag_seconds: int = 300) -> str:
    """Pure: the healthy replica with the least lag, else the primary. Raises BackupError."""
    replicas, primaries, notes = [], [], []
    for name, o in observed:
        if not o.reachable:
            notes.append(f"{name}: unreachable ({o.error or 'no answer'})")
            continue
        r = o.replica
        if r is None:
            primaries.append((o.read_only, name))  # a writable one first
        elif (
            r.io_running
            and r.sql_running
            and r.seconds_behind is not None
            and r.seconds_behind <= max_lag_seconds
        ):
            replicas.append((r.seconds_behind, name))
        else:
            notes.append(
                f"{name}: replica not healthy (io {r.io_state}, sql "
                f"{'running' if r.sql_running else 'stopped'}, lag {r.seconds_behind})"
            )
    if replicas:
        return min(replicas)[1]
    if primaries:
        return min(primaries)[1]
    raise BackupError("no instance to back up from: " + "; ".join(notes or ["no instances given"]))


def read_source(req: BackupRequest, db_password: str, tls) -> Source:
    """The candidate to copy (choose_source over one observation of each), and what it holds."""
    observed = []
    for c in req.candidates:
        inst = _session(c, db_password, tls)
        observed.append((c.name, inst.observe()))
        inst.close()
    try:
        source_name = choose_source(observed, req.max_lag_seconds)
    except BackupError as e:
        raise BackupError(commands.tls_hint(str(e), req.tls_ca)) from None
    source = next(c for c in req.candidates if c.name == source_name)
    version = dict(observed)[source_name].version
    events = _primary_events(req, observed, db_password, tls)
    physical_copy = req.method == physical.METHOD_PHYSICAL
    donated = physical_copy and version.flavor.value == "mariadb"
    if physical_copy and not donated and not req.tools_dir:
        raise BackupError("a physical backup of MySQL needs the Job's client-tools sidecar (CLONE)")
    if donated and tls is None:
        raise BackupError(
            "a physical backup of MariaDB is asked for over TLS: it needs the cluster's CA (--tls-ca)"
        )
    inst = _session(source, db_password, tls)
    try:
        full_version = str(inst.scalar("SELECT VERSION()")).split("-")[0]
        databases = commands.user_databases([r[0] for r in inst.execute("SHOW DATABASES")])
        plugins = copy_server.donor_libraries(inst) if physical_copy and not donated else []
    except Exception as e:  # noqa: BLE001
        raise BackupError(f"reading the databases of {source_name}: {e}") from None
    finally:
        inst.close()
    return Source(source, version, full_version, databases, plugins, events, physical_copy, donated)


def _session(c: Candidate, db_password: str, tls) -> Instance:
    """A session of candidate `c` as the backup account, over TLS when `tls` is set."""
    return Instance(
        c.endpoint.host,
        c.endpoint.port,
        c.endpoint.user,
        db_password,
        name=c.name,
        tls=tls,
        plaintext=tls is None,
    )


def _primary_events(req: BackupRequest, observed, db_password: str, tls) -> list[tuple[str, str, str]] | None:
    """(schema, name, status) of each event on the primary - the writable instance that does not
    replicate - as the manifest keeps them (a replica holds every event replica-side disabled).
    None when no single primary answered or reading failed: the backup goes on without them."""
    primaries = [n for n, o in observed if o.reachable and not o.read_only and o.replica is None]
    if len(primaries) != 1:
        return None
    inst = _session(next(c for c in req.candidates if c.name == primaries[0]), db_password, tls)
    try:
        return sorted((e.schema, e.name, e.status) for e in inst.events())
    except Exception:  # noqa: BLE001 - a backup without them restores events as dumped
        return None
    finally:
        inst.close()
