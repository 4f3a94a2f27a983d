"""Pure builders: typed MySQLCluster -> Kubernetes objects (plain dicts, ready for server-side apply).

Same input, same output: no clock, no randomness (passwords come from a function the caller
passes), keys in a stable order. Owner references are added by the caller with `owned()`.
"""

from __future__ import annotations

import base64
from typing import Any, Callable, Mapping, Sequence

from ..api import MySQLCluster
from . import common as k
from .servers import config_map, statefulset

PasswordFor = Callable[[str], str]  # Secret key -> password (existing one, or a new random one)


def credentials_secret(c: MySQLCluster, password_for: PasswordFor) -> dict[str, Any] | None:
    """The generated credentials Secret, or None when the user supplied spec.credentials."""
    if c.spec.credentials is not None:
        return None
    keys = [
        k.ROOT_PASSWORD_KEY,
        k.OPERATOR_PASSWORD_KEY,
        k.REPLICATION_PASSWORD_KEY,
        k.BACKUP_PASSWORD_KEY,
        k.SQL_PASSWORD_KEY,
        k.MONITOR_PASSWORD_KEY,
        k.BINLOG_PASSWORD_KEY,
    ]
    if c.spec.database and c.spec.database.user:
        keys.append(k.APP_PASSWORD_KEY)
    if c.spec.restore:
        keys.append(k.RESTORE_PASSWORD_KEY)
    data = {}
    for key in keys:
        pw = password_for(key)
        if not isinstance(pw, str) or not pw:
            raise ValueError(f"password_for({key!r}) must return a non-empty string")
        data[key] = base64.b64encode(pw.encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": k.metadata(c, k.generated_secret_name(c), "credentials"),
        "type": "Opaque",
        "data": data,
    }


def applied_credentials_secret(c: MySQLCluster, passwords: Mapping[str, str]) -> dict[str, Any]:
    """The passwords the servers have, as the operator last applied them (see
    credentials.rotation_pending); the caller adds the owner reference."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": k.metadata(c, k.applied_credentials_secret_name(c), "credentials"),
        "type": "Opaque",
        "data": {key: base64.b64encode(pw.encode()).decode() for key, pw in sorted(passwords.items())},
    }


def reseed_request(
    c: MySQLCluster, instance: str | None, donor_host: str = "", stamp: str = ""
) -> dict[str, Any]:
    """The operator's request that `instance`'s Pod replace its data by a copy of the donor's
    when it starts (MariaDB, sh/seed.sh receive): one key, the Pod's name; `stamp` names the
    request (a copy carried out once is never made again for it). `instance` None: no request."""
    return reseed_requests(c, {instance: f"{donor_host} {stamp}"} if instance else {})


def reseed_requests(
    c: MySQLCluster, requests: Mapping[str, str], annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The re-seed requests, by Pod name ("<donor host> <stamp>[ restore]": see reseed_request)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": k.metadata(c, k.reseed_config_map_name(c), "reseed", annotations),
        "data": dict(requests),
    }


EVIDENCE_LIMIT = 512 * 1024  # bytes of binary log events kept (a ConfigMap holds at most 1 MiB)


def errant_evidence(
    c: MySQLCluster, instance: str, gtids: str, events: Sequence[str], stamp: str
) -> dict[str, Any]:
    """The record of an instance's errant transactions, made before a re-seed discards them:
    their GTIDs and their binary log events as the server listed them (SHOW BINLOG EVENTS: the
    tables each touched, statements of statement-based events; row images are not listed).
    `stamp` is a UTC time (YYYYmmddHHMMSS) that keeps one record per re-seed. The caller owns it
    by the cluster only with deletionPolicy Delete (otherwise it outlives the cluster)."""
    text, kept = "", 0
    for line in events:
        if len(text) + len(line) + 1 > EVIDENCE_LIMIT:
            break
        text += line + "\n"
        kept += 1
    if kept < len(events):
        text += f"... {len(events) - kept} more events not kept (ConfigMap size)\n"
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": k.metadata(c, f"{c.name}-errant-{instance.rsplit('-', 1)[-1]}-{stamp}", "evidence"),
        "data": {"instance": instance, "gtids": gtids, "events": text},
    }
    return cm


def _port() -> list[dict[str, Any]]:
    return [{"name": "mysql", "port": k.PORT, "targetPort": "mysql", "protocol": "TCP"}]


def headless_service(c: MySQLCluster) -> dict[str, Any]:
    """Stable DNS names for every server, ready or not (replicas must reach a starting primary)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": k.metadata(c, k.headless_service_name(c)),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": k.selector_labels(c),
            "ports": _port(),
        },
    }


def _role_service(c: MySQLCluster, name: str, role: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": k.metadata(c, name, annotations=c.spec.service.annotations),
        "spec": {
            "type": c.spec.service.type,
            "selector": {**k.selector_labels(c), k.ROLE_LABEL: role},
            "ports": _port(),
        },
    }


def primary_service(c: MySQLCluster) -> dict[str, Any]:
    """Read-write: the Pod the operator labelled primary."""
    return _role_service(c, k.primary_service_name(c), k.ROLE_PRIMARY)


def replica_service(c: MySQLCluster) -> dict[str, Any]:
    """Read-only: ready Pods the operator labelled replica."""
    return _role_service(c, k.replica_service_name(c), k.ROLE_REPLICA)


def pod_disruption_budget(c: MySQLCluster) -> dict[str, Any]:
    """At most one server voluntarily down at a time (a one-server cluster can still be drained)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": k.metadata(c, k.pdb_name(c)),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": k.selector_labels(c)}},
    }


def build_all(
    c: MySQLCluster, password_for: PasswordFor, exporter_image: str = k.EXPORTER_IMAGE
) -> list[dict[str, Any]]:
    """Every object one cluster needs, in apply order (Secret and ConfigMap before the StatefulSet);
    `exporter_image` as `statefulset` takes it.

    The generated Secret (absent when the user supplied one) should be created only if missing:
    `password_for` is how the caller keeps existing passwords (return the stored value) and makes
    new ones (e.g. `random_password()`); the builders never read a clock or a random source.
    """
    out = []
    secret = credentials_secret(c, password_for)
    if secret is not None:
        out.append(secret)
    out += [
        config_map(c),
        headless_service(c),
        primary_service(c),
        replica_service(c),
        statefulset(c, exporter_image),
        pod_disruption_budget(c),
    ]
    return out
