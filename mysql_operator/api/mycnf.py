"""The user's extra server config (spec.config.myCnf): settings the operator owns are refused.

The CRD refuses the same keys with a CEL regex; this module is the precise check (it names the key
and the line) and the one the operator relies on, so an object stored before a CRD upgrade cannot
slip past it.
"""

from __future__ import annotations

import re

# Canonical names (lowercase, '_' separators). A key is owned when, after normalising, it equals one
# of these or starts with one of OWNED_PREFIXES.
OWNED_KEYS = frozenset(
    {
        "server_id",
        "gtid_mode",
        "gtid_strict_mode",
        "gtid_domain_id",
        "enforce_gtid_consistency",
        "log_bin",
        "log_slave_updates",
        "log_replica_updates",
        "read_only",
        "super_read_only",
        "port",
        "datadir",
        "socket",
        "bind_address",
        "report_host",
        "report_port",
        "skip_slave_start",
        "skip_replica_start",
        "pid_file",
        "relay_log",
        "binlog_format",
        "plugin_load",
        "user",
        "init_rpl_role",
        "ssl_ca",  # TLS: spec.tls
        "ssl_cert",
        "ssl_key",
        "require_secure_transport",
        "binlog_expire_logs_seconds",  # spec.replication.binlogRetention
        "expire_logs_days",
        "binlog_expire_logs_auto_purge",
        "max_binlog_total_size",
        "rpl_stop_replica_timeout",  # the operator's STOP REPLICA must not wait forever
        "rpl_stop_slave_timeout",
    }
)
OWNED_PREFIXES = ("rpl_semi_sync_",)

# Option-file modifiers MySQL and MariaDB accept in front of an option name.
_MODIFIERS = ("loose_", "maximum_")
_BOOL_PREFIXES = ("skip_", "disable_", "enable_")
_SECTION = re.compile(r"\[[^\]]+\]")
# what the server (and the CRD's CEL, [[:space:]]) takes for white space around a line and a name
_SPACE = " \t\r\v\f"


class MyCnfError(ValueError):
    """A problem in spec.config.myCnf; str() names the line and the fix."""


def is_owned(raw_key: str) -> bool:
    key = raw_key.strip(_SPACE).lower().replace("-", "_")
    for m in _MODIFIERS:
        if key.startswith(m):
            key = key[len(m) :]
            break
    candidates = {key}
    for p in _BOOL_PREFIXES:
        if key.startswith(p):
            candidates.add(key[len(p) :])
    return any(c in OWNED_KEYS or c.startswith(OWNED_PREFIXES) for c in candidates)


def check(text: str) -> list[tuple[str, str]]:
    """Validate the user's config; return its (key, value) settings in order.

    Raises MyCnfError naming the line for an owned key or an include directive.
    """
    settings: list[tuple[str, str]] = []
    for n, line in enumerate(text.split("\n"), start=1):  # lines as the server reads them
        s = line.strip(_SPACE)
        if not s or s.startswith(("#", ";")) or _SECTION.fullmatch(s):
            continue
        if s.startswith("!"):
            raise MyCnfError(
                f"line {n}: {s.split()[0]} is not allowed: put the settings themselves in spec.config.myCnf"
            )
        key, sep, value = s.partition("=")
        key = key.strip(_SPACE)
        if not key:
            raise MyCnfError(f"line {n}: a setting needs a name before '='")
        if is_owned(key):
            raise MyCnfError(
                f"line {n}: {key} is managed by the operator and cannot be set here: remove that line"
            )
        settings.append((key, value.strip(_SPACE) if sep else ""))
    return settings
