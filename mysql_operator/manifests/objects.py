"""Pure builders: typed MySQLCluster -> Kubernetes objects (plain dicts, ready for server-side apply).

Same input, same output: no clock, no randomness (passwords come from a function the caller
passes), keys in a stable order. Owner references are added by the caller with `owned()`.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any, Callable, Mapping, Sequence

from ..api import MySQLCluster
from ..db import accounts
from ..db.flavor import Flavor, ServerVersion
from . import common as k
from .config import my_cnf
from .scripts import EXPORTER_SH, INIT_SH, PROBE_SH, SEED_SH, START_SH

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


def config_map(c: MySQLCluster) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": k.metadata(c, k.config_map_name(c), "config"),
        "data": {
            "my.cnf": my_cnf(c.spec),
            "init.sh": INIT_SH,
            "start.sh": START_SH,
            "probe.sh": PROBE_SH,
            "seed.sh": SEED_SH,
            "exporter.sh": EXPORTER_SH,
        },
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


def config_hash(c: MySQLCluster) -> str:
    """Digest of the server's configuration (my.cnf, from the spec): a change rolls the servers so
    they read it. Not of the scripts beside it: a new operator version's scripts reach the Pods
    through the mounted ConfigMap (the probe runs the new one at once, the others at the next
    start), so an operator upgrade restarts no database."""
    return hashlib.sha256(config_map(c)["data"]["my.cnf"].encode()).hexdigest()[:16]


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


def _secret_env(name: str, secret: str, key: str, optional: bool = False) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": secret, "key": key}
    if optional:
        ref["optional"] = True
    return {"name": name, "valueFrom": {"secretKeyRef": ref}}


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": k.RUN_AS,
        "runAsGroup": k.RUN_AS,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _mounts() -> list[dict[str, Any]]:
    return [
        {"name": "data", "mountPath": k.DATA_ROOT},
        {"name": "config", "mountPath": k.CONFIG_DIR, "readOnly": True},
        {"name": "run", "mountPath": k.RUN_DIR},
        {"name": "tmp", "mountPath": "/tmp"},
    ]


def _probe(kind: str, period: int, failures: int) -> dict[str, Any]:
    return {
        "exec": {"command": ["/bin/bash", f"{k.CONFIG_DIR}/probe.sh", kind]},
        "periodSeconds": period,
        "timeoutSeconds": 10,
        "failureThreshold": failures,
    }


def _default_affinity(c: MySQLCluster) -> dict[str, Any]:
    """Prefer one server per node (preferred, so a one-node cluster still schedules all)."""
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": k.selector_labels(c)},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    }


def server_version(c: MySQLCluster) -> ServerVersion:
    """The spec's flavor and version; a missing patch level is 0 (`8.4` is 8.4.0), so a
    privilege that appeared in a patch release is never assumed."""
    numbers = [int(n) for n in c.spec.server_version.split(".")] + [0, 0]
    return ServerVersion(Flavor(c.spec.flavor), *numbers[:3])


def _grants_env(
    name: str, grants: tuple[accounts.Grant, ...], revokes: tuple[accounts.Grant, ...] = ()
) -> dict[str, Any]:
    return {"name": name, "value": accounts.grant_lines(grants, revokes)}


# The server's CPU request where spec.resources names no CPU. A container without one gets the
# smallest CPU weight there is (2 shares): any neighbour Pod busy with a request of its own takes
# the CPU from it. Measured on a 2-core node with three busy Pods requesting 100m beside the
# cluster (CREATE, INSERT and DROP through -rw, median / max of 20): 2,464 / 3,599 ms without a
# request, 279 / 738 ms with 10m, 8 / 136 ms with 25m, 11 / 74 ms with 50m (16 ms idle). 25m
# keeps the footprint small (three servers: 0.075 CPU).
SERVER_CPU_REQUEST = "25m"


def server_resources(c: MySQLCluster) -> dict[str, dict[str, str]]:
    """The server's (and its init container's) resources: spec.resources, plus a CPU request of
    SERVER_CPU_REQUEST where it sets neither a CPU request nor a CPU limit (a limit alone is the
    request too, as Kubernetes defaults it)."""
    out = {kind: dict(v) for kind, v in c.spec.resources.items()}
    if not any("cpu" in out.get(kind, {}) for kind in ("requests", "limits")):
        out.setdefault("requests", {})["cpu"] = SERVER_CPU_REQUEST
    return out


def _sidecar_resources(c: MySQLCluster) -> dict[str, dict[str, str]]:
    """The seed donor's and the exporter's: small where spec.resources sets any, none otherwise
    (what a cluster without resources asks of the node stays the server's default alone)."""
    return {"requests": {"cpu": "10m", "memory": "32Mi"}} if c.spec.resources else {}


def _seed_containers(c: MySQLCluster, resources: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """MariaDB re-seeding by a physical copy (sh/seed.sh): the init container that puts a copy in
    place when the operator asked for one (before the data directory is initialised), and the
    sidecar that makes copies of this server for others (mariadb-backup, over TLS)."""
    s = c.spec
    tls = {"name": "tls", "mountPath": k.TLS_DIR, "readOnly": True}
    token = {"name": "seed-token", "mountPath": k.SEED_TOKEN_DIR, "readOnly": True}
    common = {
        "image": s.image_ref,
        "imagePullPolicy": s.image_pull_policy,
        "securityContext": _container_security(),
    }
    receive = {
        "name": "seed",
        **common,
        "command": ["/bin/bash", f"{k.CONFIG_DIR}/seed.sh", "receive"],
        "env": [_field_env("POD_NAME", "metadata.name")],
        # why a copy failed (its last lines) reaches the status and a Warning Event (pods.py)
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {kind: dict(v) for kind, v in resources.items()},  # --prepare: like the server
        "volumeMounts": _mounts()
        + [tls, token, {"name": "reseed", "mountPath": k.RESEED_DIR, "readOnly": True}],
    }
    donor = {
        "name": "seed-donor",
        **common,
        "command": ["/bin/bash", f"{k.CONFIG_DIR}/seed.sh", "serve"],
        "ports": [{"name": "seed", "containerPort": k.SEED_PORT, "protocol": "TCP"}],
        "resources": _sidecar_resources(c),  # idle until a copy is asked for
        "volumeMounts": [
            {"name": "data", "mountPath": k.DATA_ROOT, "readOnly": True},
            {"name": "config", "mountPath": k.CONFIG_DIR, "readOnly": True},
            {"name": "run", "mountPath": k.RUN_DIR},  # the server's socket and client.cnf
            {"name": "tmp", "mountPath": "/tmp"},
            tls,
            token,
        ],
    }
    return receive, donor


def _exporter(c: MySQLCluster, image: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metrics sidecar (sh/exporter.sh: mysqld_exporter as the monitoring account over the
    server's socket, on the port named "metrics") and the volume with its password. It runs in an
    exporter image (spec.monitoring.image, else `image`: the operator's), never the server's:
    official server images have no mysqld_exporter, and the sidecar needs nothing of the server's."""
    s = c.spec
    container = {
        "name": "exporter",
        "image": s.monitoring_image or image,
        "imagePullPolicy": s.image_pull_policy,
        "command": ["/bin/sh", f"{k.CONFIG_DIR}/exporter.sh"],
        "env": [
            {"name": "MONITOR_USER", "value": k.MONITOR_USER},
            {"name": "EXPORTER_PORT", "value": str(k.EXPORTER_PORT)},
        ],
        "ports": [{"name": "metrics", "containerPort": k.EXPORTER_PORT, "protocol": "TCP"}],
        "resources": _sidecar_resources(c),
        "securityContext": _container_security(),
        "volumeMounts": [
            {"name": "config", "mountPath": k.CONFIG_DIR, "readOnly": True},
            {"name": "run", "mountPath": k.RUN_DIR},  # the server's socket
            {"name": "monitor", "mountPath": k.MONITOR_DIR, "readOnly": True},
        ],
    }
    volume = {
        "name": "monitor",
        "secret": {
            "secretName": k.credentials_secret_name(c),
            "items": [{"key": k.MONITOR_PASSWORD_KEY, "path": "password"}],
            "defaultMode": 0o440,
            "optional": True,  # a Secret of the user's from before monitor-password existed
        },
    }
    return container, volume


def statefulset(c: MySQLCluster, exporter_image: str = k.EXPORTER_IMAGE) -> dict[str, Any]:
    """The servers' StatefulSet; `exporter_image`: the metrics sidecar's unless the spec names one."""
    s = c.spec
    secret = k.credentials_secret_name(c)
    version = server_version(c)
    app_database = s.database.name if s.database else None
    common_env = [
        {"name": "MYSQL_OPERATOR_FLAVOR", "value": s.flavor},
        {"name": "MYSQL_OPERATOR_USER", "value": k.OPERATOR_USER},
    ]
    # privileges: db/accounts.py, one GRANT a line (see INIT_SH)
    init_env = common_env + [
        {"name": "MYSQL_REPLICATION_USER", "value": k.REPLICATION_USER},
        {"name": "MYSQL_BACKUP_USER", "value": k.BACKUP_USER},
        {"name": "MYSQL_SQL_USER", "value": k.SQL_USER},
        _secret_env("MYSQL_ROOT_PASSWORD", secret, k.ROOT_PASSWORD_KEY),
        _secret_env("MYSQL_OPERATOR_PASSWORD", secret, k.OPERATOR_PASSWORD_KEY),
        _secret_env("MYSQL_REPLICATION_PASSWORD", secret, k.REPLICATION_PASSWORD_KEY),
        # optional: a Secret of the user's from before backup-password existed still starts
        _secret_env("MYSQL_BACKUP_PASSWORD", secret, k.BACKUP_PASSWORD_KEY, optional=True),
        # optional likewise: without it the cluster has no account for MySQLDatabase/User/Grant
        _secret_env("MYSQL_SQL_PASSWORD", secret, k.SQL_PASSWORD_KEY, optional=True),
        _grants_env("MYSQL_OPERATOR_GRANTS", accounts.operator_grants(version, app_database)),
        _grants_env("MYSQL_REPLICATION_GRANTS", accounts.replication_grants(version)),
        _grants_env("MYSQL_BACKUP_GRANTS", accounts.backup_grants(version)),
        _grants_env("MYSQL_SQL_GRANTS", accounts.sql_grants(version)),
    ]
    if s.database:
        init_env.append({"name": "MYSQL_APP_DATABASE", "value": s.database.name})
        if s.database.user:
            init_env.append({"name": "MYSQL_APP_USER", "value": s.database.user})
            init_env.append(_secret_env("MYSQL_APP_PASSWORD", secret, k.APP_PASSWORD_KEY))
            init_env.append(_grants_env("MYSQL_APP_GRANTS", accounts.app_grants(version, s.database.name)))
    if s.restore:  # the account that loads the dump; dropped once the restore is done
        init_env += [
            {"name": "MYSQL_RESTORE_USER", "value": k.RESTORE_USER},
            _secret_env("MYSQL_RESTORE_PASSWORD", secret, k.RESTORE_PASSWORD_KEY, optional=True),
            _grants_env(
                "MYSQL_RESTORE_GRANTS", accounts.restore_grants(version), accounts.restore_revokes(version)
            ),
        ]
    server_env = common_env + [
        _field_env("POD_NAME", "metadata.name"),
        _field_env("POD_NAMESPACE", "metadata.namespace"),
        {"name": "HEADLESS_SERVICE", "value": k.headless_service_name(c)},
        _secret_env("MYSQL_OPERATOR_PASSWORD", secret, k.OPERATOR_PASSWORD_KEY),
    ]
    resources = server_resources(c)

    init = {
        "name": "init-datadir",
        "image": s.image_ref,
        "imagePullPolicy": s.image_pull_policy,
        "command": ["/bin/bash", f"{k.CONFIG_DIR}/init.sh"],
        "env": init_env,
        "resources": resources,
        "securityContext": _container_security(),
        "volumeMounts": _mounts(),
    }
    server = {
        "name": "mysqld",
        "image": s.image_ref,
        "imagePullPolicy": s.image_pull_policy,
        "command": ["/bin/bash", f"{k.CONFIG_DIR}/start.sh"],
        "env": server_env,
        "ports": [{"name": "mysql", "containerPort": k.PORT, "protocol": "TCP"}],
        "startupProbe": _probe("alive", 10, 90),  # crash recovery of a large server can take minutes
        "livenessProbe": _probe("alive", 10, 6),
        "readinessProbe": _probe("ready", 5, 3),
        "resources": resources,
        "securityContext": _container_security(),
        "volumeMounts": _mounts() + [{"name": "tls", "mountPath": k.TLS_DIR, "readOnly": True}],
    }
    init_containers, containers = [init], [server]
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": k.config_map_name(c), "defaultMode": 0o444}},
        # renewed in place: the kubelet updates the files, the operator makes the server reload
        {"name": "tls", "secret": {"secretName": k.tls_secret_name(c), "defaultMode": 0o440}},
        {"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
        {"name": "tmp", "emptyDir": {}},
    ]
    if s.flavor == "mariadb":
        receive, donor = _seed_containers(c, resources)
        init_containers.insert(0, receive)
        containers.append(donor)
        volumes += [
            {
                "name": "seed-token",
                "projected": {
                    "sources": [
                        {
                            "secret": {
                                "name": secret,
                                "items": [{"key": k.OPERATOR_PASSWORD_KEY, "path": "token"}],
                            }
                        },
                        # a physical backup Job asks for a copy with the backup account's
                        # password (a Secret of the user's may have none: no physical backups)
                        {
                            "secret": {
                                "name": secret,
                                "items": [{"key": k.BACKUP_PASSWORD_KEY, "path": "backup-token"}],
                                "optional": True,
                            }
                        },
                    ],
                    "defaultMode": 0o440,
                },
            },
            {
                "name": "reseed",
                "configMap": {"name": k.reseed_config_map_name(c), "optional": True, "defaultMode": 0o444},
            },
        ]
    if s.monitoring:
        exporter, monitor_volume = _exporter(c, exporter_image)
        containers.append(exporter)
        volumes.append(monitor_volume)
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 120,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": k.RUN_AS,
            "runAsGroup": k.RUN_AS,
            "fsGroup": k.RUN_AS,
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "affinity": dict(s.affinity) if s.affinity is not None else _default_affinity(c),
        "initContainers": init_containers,
        "containers": containers,
        "volumes": volumes,
    }
    if s.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in s.tolerations]
    if s.node_selector:
        pod_spec["nodeSelector"] = dict(s.node_selector)
    if s.priority_class_name:
        pod_spec["priorityClassName"] = s.priority_class_name
    if s.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": n} for n in s.image_pull_secrets]

    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": s.storage.size}},
    }
    if s.storage.storage_class_name:
        claim_spec["storageClassName"] = s.storage.storage_class_name

    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": k.metadata(c, k.statefulset_name(c)),
        "spec": {
            "replicas": s.instances,
            "serviceName": k.headless_service_name(c),
            "podManagementPolicy": "Parallel",
            # the operator deletes Pods one by one, replicas first, the primary after a switchover
            # (mysql_operator/rolling.py): the StatefulSet controller never restarts a primary
            "updateStrategy": {"type": "OnDelete"},
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": s.deletion_policy,
                "whenScaled": "Retain",
            },
            "selector": {"matchLabels": k.selector_labels(c)},
            "template": {
                "metadata": {
                    "labels": {**s.pod_labels, **k.labels(c)},
                    "annotations": {**s.pod_annotations, k.CONFIG_HASH_ANNOTATION: config_hash(c)},
                },
                "spec": pod_spec,
            },
            "volumeClaimTemplates": [
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "data", "labels": k.selector_labels(c)},
                    "spec": claim_spec,
                }
            ],
        },
    }


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
