"""The server a restore loads into, before and after the load: empty or refused, stored programs
whose definers it does not have refused, scheduled events settled as the source had them, the
restore's own account dropped at the end."""

from __future__ import annotations

import base64
import json
from typing import Any

from mysql_operator.backup import commands
from mysql_operator.backup.crypto import CryptoError, Key, unseal
from mysql_operator.backup.manifest import Manifest, ManifestError, events_field
from mysql_operator.db.observation import REPLICA_SIDE_DISABLED, SPECIFIC_ACCESS_DENIED, Event, InstanceError
from mysql_operator.db.instance import Instance
from mysql_operator.db.statements import quote
from mysql_operator.manifests.common import LOAD_USER
from mysql_operator.backup.restore_types import RestoreError, Target, instance_of


def user_databases(inst: Instance) -> list[str]:
    return commands.user_databases([r[0] for r in inst.execute("SHOW DATABASES")])


_DEFINED = (
    ("routine", "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, DEFINER FROM information_schema.ROUTINES"),
    ("trigger", "SELECT TRIGGER_SCHEMA, TRIGGER_NAME, DEFINER FROM information_schema.TRIGGERS"),
    ("event", "SELECT EVENT_SCHEMA, EVENT_NAME, DEFINER FROM information_schema.EVENTS"),
    ("view", "SELECT TABLE_SCHEMA, TABLE_NAME, DEFINER FROM information_schema.VIEWS"),
)


def refuse_foreign_definers(target: Target, what: str, fix: str) -> None:
    """With target.definer (the application account): RestoreError naming each stored object of
    the user databases whose definer is another, after `what` ("the dump defines"), and `fix`."""
    if not target.definer:
        return
    inst = instance_of(target, slow_timeout=120)
    try:
        foreign = foreign_definers(inst, target.definer)
    except InstanceError as e:
        raise RestoreError(f"reading the definers on {target.host}:{target.port}: {e}") from None
    finally:
        inst.close()
    if foreign:
        raise RestoreError(
            f"{what} {', '.join(foreign[:10])}{' ...' if len(foreign) > 10 else ''}: a restore gives "
            f"every stored object the application account {target.definer}@% as its definer, and {fix}"
        )


def foreign_definers(inst: Instance, user: str) -> list[str]:
    """The stored objects of the user databases whose definer is not `user`@% (what the
    definer rewrite could not reach: a dump not written by the dump tools), as
    "kind schema.name (definer)"."""
    out = []
    for kind, sql in _DEFINED:
        for schema, name, definer in inst.execute(sql):
            if schema.lower() not in commands.SYSTEM_DATABASES and definer != f"{user}@%":
                out.append(f"{kind} {schema}.{name} ({definer})")
    return sorted(out)


def sealed_fields(m: Manifest, key: Key | None) -> dict[str, Any] | None:
    """The manifest's sensitive fields sealed with the backup's key (check_key ran); None when
    it is not encrypted or no key is given. Raises RestoreError."""
    if m.sealed is None or key is None:
        return None
    try:
        fields = json.loads(unseal(key, base64.b64decode(m.sealed), "the manifest's sealed fields"))
    except (CryptoError, ValueError) as e:
        raise RestoreError(f"reading the manifest's sealed fields: {e}") from None
    if not isinstance(fields, dict):
        raise RestoreError("reading the manifest's sealed fields: not a JSON object")
    return fields


def source_events(m: Manifest, key: Key | None) -> tuple[tuple[str, str, str], ...] | None:
    """The events' statuses on the source's primary the manifest keeps (inside `sealed` when
    encrypted: check_key ran). None: not known."""
    fields = sealed_fields(m, key)
    if fields is None:
        return m.events
    try:
        return events_field(fields.get("events"), "the manifest's sealed fields")
    except ManifestError as e:
        raise RestoreError(str(e)) from None


def event_changes(
    events: list[Event], source: tuple[tuple[str, str, str], ...] | None, primary: bool, flavor: str
) -> list[tuple[Event, str]]:
    """Pure: (event, ALTER EVENT clause) that give an instance of a restored cluster the events'
    statuses of the source's cluster. The new primary: each event the source's primary ran
    ENABLED, every other one it held DISABLED (one it held replica-side disabled did not run
    there either); an event the manifest does not name (`source` None: an older backup) is left
    as loaded. The others, replicas from the start: replica-side disabled, as replication would
    have made them (a dump of the primary loads ENABLED ones ENABLED, and they would run there)."""
    if not primary:
        clause = "DISABLE ON SLAVE" if flavor == "mariadb" else "DISABLE ON REPLICA"
        return [(e, clause) for e in events if e.status not in REPLICA_SIDE_DISABLED]
    wanted = {(schema, name): status == "ENABLED" for schema, name, status in source or ()}
    return [
        (e, "ENABLE" if wanted[e.key] else "DISABLE")
        for e in events
        if e.key in wanted and e.status != ("ENABLED" if wanted[e.key] else "DISABLED")
    ]


def settle_events(target: Target, m: Manifest, key: Key | None, primary: bool, *, copy: bool = False) -> None:
    """Give the restored `target` the source's events' statuses (event_changes), outside the binary
    log (each instance is settled by itself), each event keeping its definer: ALTER DEFINER, as
    the restore account, which holds ALL (SET USER / SET_ANY_DEFINER). After a dump the instance
    is writable, its scheduler off (load_instance). `copy`: an instance started on a physical
    copy, as the copy's source had them (a replica's: every event replica-side disabled), which
    runs fenced, its scheduler as its my.cnf says: the scheduler is off while it is writable for
    the statements, and on again after."""
    inst = instance_of(target)
    try:
        scheduler = copy and str(inst.scalar("SELECT @@GLOBAL.event_scheduler")).upper() == "ON"
        if scheduler:
            inst.execute("SET GLOBAL event_scheduler = OFF")
        if copy:
            inst.set_read_only(False)  # MySQL's super_read_only refuses ALTER EVENT to everyone
        _settle(inst, m, key, primary)
        if copy:
            inst.set_read_only(True)
        if scheduler:
            inst.execute("SET GLOBAL event_scheduler = ON")
    except InstanceError as e:
        raise RestoreError(
            f"giving the events the source's statuses on {target.host}:{target.port}: {e}"
        ) from None
    finally:
        inst.close()


def _settle(inst: Instance, m: Manifest, key: Key | None, primary: bool) -> None:
    """An event of a definer the restore account may not name (MySQL: one holding SYSTEM_USER,
    which the restore account does not; a physical copy can hold one) is left as it is."""
    changes = event_changes(inst.events(), source_events(m, key), primary, m.flavor)
    if changes:
        inst.execute("SET SESSION sql_log_bin = 0")
    for e, clause in changes:
        user, _, host = e.definer.rpartition("@")
        name = f"{quote(e.schema)}.{quote(e.name)}".replace("%", "%%")  # no placeholder
        try:
            inst.execute(f"ALTER DEFINER = %s@%s EVENT {name} {clause}", (user, host))
        except InstanceError as err:
            if err.errno != SPECIFIC_ACCESS_DENIED:
                raise


def finish_instance(target: Target, drop_account: bool, scheduler: bool = False) -> None:
    """After a restore into `target`, whatever its outcome: read-only again; with `drop_account`
    the account that restored (the restore account) drops itself first, outside the binary log.
    `scheduler`: the event scheduler was on before the restore: on again, once read-only."""
    inst = instance_of(target)
    try:
        if drop_account:  # before the fence: MySQL's super_read_only refuses DROP USER too
            for sql in inst.dialect.set_read_only(False):  # a server restarted on a copy is fenced
                inst.execute(sql)
            inst.execute("SET SESSION sql_log_bin = 0")
            inst.execute("DROP USER IF EXISTS %s@'%%'", (LOAD_USER,))  # left by a load that ended early
            inst.execute("DROP USER IF EXISTS %s@'%%'", (target.user,))
            # then fence in this same session, which keeps its privileges: no new connection
            # of the dropped account could log in
            for sql in inst.dialect.set_read_only(True):
                inst.execute(sql)
        else:
            inst.set_read_only(True)
        if scheduler:
            inst.execute("SET GLOBAL event_scheduler = ON")
    finally:
        inst.close()


def new_instance_or_refuse(target: Target, app_database: str | None) -> None:
    """RestoreError unless `target` holds no user database but `app_database` without a table
    (the init step creates it): a restore never replaces data."""
    inst = instance_of(target)
    try:
        names = user_databases(inst)
        if app_database in names and not inst.scalar(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s", (app_database,)
        ):
            names.remove(app_database)
    except InstanceError as e:
        raise RestoreError(f"looking at {target.host}:{target.port} before the restore: {e}") from None
    finally:
        inst.close()
    if names:
        raise RestoreError(
            f"{target.host}:{target.port} already has databases ({', '.join(names)}): a restore "
            "only goes into a new, empty cluster and never overwrites data"
        )
