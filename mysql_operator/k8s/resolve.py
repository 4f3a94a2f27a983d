"""Where the operator reaches one instance: its pod IP, or its stable DNS name.

In a Pod the stable name (`<pod>.<cluster>-headless.<ns>.svc`) always works. From a developer's
shell cluster DNS usually does not resolve, but pod IPs are routable on the local cluster, so
the pod IP is used. `mode` forces one: "ip", "dns", or "auto" (dns in-cluster, else ip).
A Pod without an IP (not started, deleted) resolves to its DNS name: unreachable from outside,
which the engine measures as an outage, exactly what it is.
"""

from __future__ import annotations

from typing import Any, Mapping

from mysql_operator.api import MySQLCluster
from mysql_operator.manifests import PORT, pod_host, pod_name

MODES = ("auto", "ip", "dns")


def resolve(c: MySQLCluster, ordinal: int, pod: Mapping[str, Any] | None, mode: str,
            in_cluster: bool) -> tuple[str, int]:
    if mode not in MODES:
        raise ValueError(f"resolver mode must be one of {', '.join(MODES)}, not {mode!r}")
    use_dns = mode == "dns" or (mode == "auto" and in_cluster)
    ip = ((pod or {}).get("status") or {}).get("podIP")
    running = ((pod or {}).get("status") or {}).get("phase") == "Running"
    deleting = bool(((pod or {}).get("metadata") or {}).get("deletionTimestamp"))
    if use_dns or not ip or not running or deleting:
        return pod_host(c, ordinal), PORT
    return ip, PORT


def member_name(c: MySQLCluster, ordinal: int) -> str:
    return pod_name(c, ordinal)
