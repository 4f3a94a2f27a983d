"""A restored server's tables checked against what its backup recorded (issue 49): the restored
databases are dumped with the same tool and options as the backup was, through the same table
digests (backup/table_digest.py), and every table must have the rows the backup's dump had -
their number and their values, in any order. A table missing, one more, another row count or
other values is named."""

from __future__ import annotations

from mysql_operator.backup import commands
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.crypto import Key
from mysql_operator.backup.digest_process import dump_digests
from mysql_operator.backup.manifest import Manifest, ManifestError, tables_field
from mysql_operator.backup.pipeline import option_file
from mysql_operator.backup.pitr import local_launch, sidecar_launch
from mysql_operator.backup.restore_server import sealed_fields
from mysql_operator.backup.restore_types import RestoreError, TableCheck, Target
from mysql_operator.backup.table_digest import TableDigest, differences, tables_from_json
from mysql_operator.db.flavor import ServerVersion


def recorded_tables(m: Manifest, key: Key | None) -> dict[str, TableDigest] | None:
    """The tables the backup's manifest recorded (inside `sealed` when encrypted); None: it
    recorded none (`tables_note` says why when it tried)."""
    sealed = sealed_fields(m, key)
    if sealed is None:
        return None if m.tables is None else tables_from_json(m.tables)
    try:
        value = tables_field(sealed.get("tables"), "the manifest's sealed fields")
    except ManifestError as e:
        raise RestoreError(f"reading the manifest's sealed fields: {e}") from None
    return None if value is None else tables_from_json(value)


def restored_tables(target: Target, version: ServerVersion, databases: list[str]) -> dict[str, TableDigest]:
    """The tables of `databases` on `target`, read from a dump as the backup Job dumps (its tool
    in the sidecar when the target names one). Raises RestoreError."""
    if not databases:
        return {}
    launch = sidecar_launch(target.tools_dir, stdin=False) if target.tools_dir else local_launch
    with option_file(target.user, target.password, target.tools_dir) as options:
        ep = Endpoint(target.host, target.port, target.user)
        argv = commands.dump_command(version, ep, options, databases, target.tls_ca)
        read = dump_digests(launch(argv))
    if read.status != 0:
        raise RestoreError(
            f"{argv[0]} of the restored databases failed (exit status {read.status}): "
            f"{read.stderr.text((target.password,)) or 'no message'}"
        )
    if read.tables is None:
        raise RestoreError(f"reading the dump of the restored databases: {read.note}")
    return read.tables


def check_tables(
    target: Target, version: ServerVersion, databases: list[str], recorded: dict[str, TableDigest]
) -> TableCheck:
    """The restored `databases` compared with the backup's `recorded` tables."""
    found = restored_tables(target, version, databases)
    return TableCheck(
        tables=len(recorded),
        rows=sum(t.rows for t in recorded.values()),
        differences=tuple(differences(recorded, found)),
    )
