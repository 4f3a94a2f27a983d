"""spec.restore: the backup a new cluster starts from, and the point it is recovered to (`latest`, an
RFC 3339 time, or a GTID set, each as the CRD checks it)."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any


from .types import (
    Restore,
    SpecError,
)
from .fields import (
    read_bool,
    read_config_map_name,
    read_object,
    read_str,
)
from .s3_fields import read_encryption, read_s3


LATEST = "latest"
# the CRD's CEL rules on spec.restore.gtid and spec.restore.pointInTime match these texts
# (tests/integration/test_admission_parser_agree.py); [ \t\n\f\r] is RE2's \s (Python's \s also
# takes Unicode spaces)
_GTID_ITEM = r"(([0-9a-fA-F-]{36}(:[0-9]+(-[0-9]+)?)+)|([0-9]+-[0-9]+-[0-9]+))"
GTID_PATTERN = rf"^[ \t\n\f\r]*{_GTID_ITEM}([ \t\n\f\r]*,[ \t\n\f\r]*{_GTID_ITEM})*[ \t\n\f\r]*$"
_GTID_RE = re.compile(GTID_PATTERN)
_GTID_HINT = (
    "a GTID set as SELECT @@gtid_executed prints it (MySQL, uuid:1-42,...) or a position as "
    "SELECT @@gtid_binlog_pos does (MariaDB, 0-1-42,...)"
)

# to the second, 1970 to 2999 (a day its month lacks: refused by fromisoformat and a CEL rule)
_RFC3339 = (
    "(19[7-9][0-9]|2[0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    "T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
)
POINT_IN_TIME_PATTERN = f"^({LATEST}|{_RFC3339})$"
_RFC3339_RE = re.compile(_RFC3339)


def read_point_in_time(value: str | None, path: str) -> str | None:
    """RFC 3339 to the second (binary log events carry whole seconds), as a UTC stamp; or latest."""
    if value is None or value == LATEST:
        return value
    if not _RFC3339_RE.fullmatch(value):
        raise SpecError(
            path,
            f"{value!r} is not a time to the second in RFC 3339 between 1970 and 2999 (e.g. "
            "2026-11-26T10:42:17Z or 2026-11-26T11:42:17+01:00), nor 'latest': binary log events "
            "carry whole seconds",
        )
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise SpecError(path, f"{value!r} is not a valid date and time") from None
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_restore(value: Any, rpath: str) -> Restore:
    """spec.restore: the backup a new cluster starts from, and the point in time."""
    rs = read_object(
        value,
        rpath,
        {"fromBackup", "s3", "encryption", "pointInTime", "gtid", "checkTables", "checksConfigMap"},
    )
    if (rs.get("fromBackup") is None) == (rs.get("s3") is None):
        raise SpecError(rpath, "needs exactly one of spec.restore.fromBackup or spec.restore.s3")
    from_backup = None
    if rs.get("fromBackup") is not None:
        fb = read_object(rs["fromBackup"], f"{rpath}.fromBackup", {"name"})
        from_backup = read_str(fb, "name", f"{rpath}.fromBackup", required=True)
    restore = Restore(
        from_backup=from_backup,
        s3=read_s3(rs["s3"], f"{rpath}.s3", with_path=True) if rs.get("s3") is not None else None,
        encryption=read_encryption(rs.get("encryption"), f"{rpath}.encryption"),
        point_in_time=read_point_in_time(
            read_str(rs, "pointInTime", rpath, max_len=64), f"{rpath}.pointInTime"
        ),
        gtid=read_str(rs, "gtid", rpath, max_len=4096, pattern=_GTID_RE, hint=_GTID_HINT),
        check_tables=read_bool(rs, "checkTables", rpath, False),
        checks_config_map=read_config_map_name(rs, "checksConfigMap", rpath),
    )
    if restore.point_in_time and restore.gtid:
        raise SpecError(
            f"{rpath}.gtid", "give either spec.restore.pointInTime or spec.restore.gtid, not both"
        )
    return restore
