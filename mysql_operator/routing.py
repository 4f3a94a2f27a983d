"""Whether the -rw Service reaches the primary: its Pod labelled and Ready, and a connection
through the Service's address answered by that server, writable (an endpoint lags its Pod by
seconds: EndpointSlice, kube-proxy). Probed once per primary; the status says so only then."""

from __future__ import annotations

import ssl
from typing import Mapping


from mysql_operator import manifests as m
from mysql_operator.api import MySQLCluster
from mysql_operator.k8s.cache import Reads
from mysql_operator.pass_state import ClusterEntry
from mysql_operator.db.instance import Instance
from mysql_operator.db.observation import InstanceError
from mysql_operator.pods import (
    PodView,
    pod_ordinal,
)
from mysql_operator.summary import primary_in_service


def service_routes_to(
    host: str | None,
    port: int,
    user: str,
    password: str,
    primary: str,
    tls_ctx: ssl.SSLContext | None = None,
    tls_name: str | None = None,
) -> bool:
    """A connection through a Service's ClusterIP reaches `primary` (its @@hostname, the Pod name)
    and it accepts writes: kube-proxy routes the -rw Service to the new primary, not to a stale
    endpoint (with none the connection is refused)."""
    if not host or host == "None":
        return False
    probe = Instance(
        host, port, user, password, connect_timeout=1.0, read_timeout=2.0, tls=tls_ctx, tls_name=tls_name
    )
    try:
        hostname, read_only = probe.execute("SELECT @@hostname, @@read_only")[0]
        return hostname == primary and not int(read_only)
    except InstanceError:
        return False
    finally:
        probe.close()


def probe_route(
    reads: Reads,
    c: MySQLCluster,
    pods: Mapping[int, PodView],
    primary: str | None,
    entry: ClusterEntry,
    passwords: Mapping[str, str],
) -> None:
    """Observe (reads only): whether a connection through -rw reaches the recorded `primary`, once
    its Pod is labelled and Ready (an endpoint lags its Pod by seconds: EndpointSlice,
    kube-proxy); probed until it does, once per primary (kept in `entry.routed_to`)."""
    if primary is None or entry.routed_to == primary:
        return
    if not primary_in_service(pods, pod_ordinal(primary, c.name)):
        return
    address = reads.service_ip(c.namespace, m.primary_service_name(c))
    if address is not None and service_routes_to(
        address,
        m.PORT,
        m.OPERATOR_USER,
        passwords[m.OPERATOR_PASSWORD_KEY],
        primary,
        entry.tls.context(),
        f"{m.primary_service_name(c)}.{c.namespace}.svc",
    ):
        entry.routed_to = primary


def primary_reached(
    c: MySQLCluster, pods: Mapping[int, PodView], primary: str | None, serving: bool, entry: ClusterEntry
) -> bool:
    """The primary serves writes, its Pod is labelled and Ready, and -rw was seen reaching it
    (`probe_route`: a primary new in this pass is reached at a later one)."""
    if not serving or not primary_in_service(pods, pod_ordinal(primary or "", c.name)):
        entry.routed_to = None
        return False
    return entry.routed_to == primary
