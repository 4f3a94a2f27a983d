"""Where the operator reaches one instance: its Pod IP, or its stable DNS name.

By default ("auto", also "ip") the Pod IP, in a Pod as from a developer's shell: Pod IPs are
routable wherever the operator runs, and no DNS lookup sits in the failover path (a lookup can
stall for the resolver's whole 5 s timeout when a UDP answer is dropped, longer than the failover
delay). A Pod without an IP (not started yet, gone) has no address: the engine counts it
unreachable at once, as it is. "dns" uses `<pod>.<cluster>-headless.<ns>.svc` always.
A recreated Pod's IP may be an old Pod's: the engine checks who answers (server_id, hostname).
Replicas reach their source by its DNS name in every mode (the server resolves it, inside the
cluster): see `Member.source_host`.
"""

from __future__ import annotations

from typing import Any, Mapping

from mysql_operator.api import MySQLCluster
from mysql_operator.manifests import PORT, pod_host, pod_name

MODES = ("auto", "ip", "dns")


def resolve(
    c: MySQLCluster, ordinal: int, pod: Mapping[str, Any] | None, mode: str
) -> tuple[str | None, int]:
    if mode not in MODES:
        raise ValueError(f"resolver mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "dns":
        return pod_host(c, ordinal), PORT
    return ((pod or {}).get("status") or {}).get("podIP") or None, PORT


def member_name(c: MySQLCluster, ordinal: int) -> str:
    return pod_name(c, ordinal)
