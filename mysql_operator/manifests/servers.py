"""Pure builders: the servers' StatefulSet and the ConfigMap of their configuration (my.cnf and
the scripts beside it), whose digest rolls the servers when the configuration changes."""

from __future__ import annotations

import hashlib
from typing import Any

from ..api import MySQLCluster
from ..db import accounts
from . import common as k
from .config import my_cnf
from .scripts import EXPORTER_SH, INIT_SH, PROBE_SH, SEED_SH, START_SH
from .server_pod import (
    container_security,
    default_affinity,
    exporter_container,
    field_env,
    grants_env,
    probe,
    secret_env,
    seed_containers,
    server_mounts,
    server_resources,
    server_version,
)


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


def config_hash(c: MySQLCluster) -> str:
    """Digest of the server's configuration (my.cnf, from the spec): a change rolls the servers so
    they read it. Not of the scripts beside it: a new operator version's scripts reach the Pods
    through the mounted ConfigMap (the probe runs the new one at once, the others at the next
    start), so an operator upgrade restarts no database."""
    return hashlib.sha256(config_map(c)["data"]["my.cnf"].encode()).hexdigest()[:16]


def _common_env(c: MySQLCluster) -> list[dict[str, Any]]:
    return [
        {"name": "MYSQL_OPERATOR_FLAVOR", "value": c.spec.flavor},
        {"name": "MYSQL_OPERATOR_USER", "value": k.OPERATOR_USER},
    ]


def _init_env(c: MySQLCluster) -> list[dict[str, Any]]:
    """The init container's environment: the accounts init.sh creates on an empty data directory,
    their passwords from the credentials Secret and their privileges (db/accounts.py, one GRANT
    a line: see INIT_SH)."""
    s = c.spec
    secret = k.credentials_secret_name(c)
    version = server_version(c)
    app_database = s.database.name if s.database else None
    # privileges: db/accounts.py, one GRANT a line (see INIT_SH)
    env = _common_env(c) + [
        {"name": "MYSQL_REPLICATION_USER", "value": k.REPLICATION_USER},
        {"name": "MYSQL_BACKUP_USER", "value": k.BACKUP_USER},
        {"name": "MYSQL_SQL_USER", "value": k.SQL_USER},
        secret_env("MYSQL_ROOT_PASSWORD", secret, k.ROOT_PASSWORD_KEY),
        secret_env("MYSQL_OPERATOR_PASSWORD", secret, k.OPERATOR_PASSWORD_KEY),
        secret_env("MYSQL_REPLICATION_PASSWORD", secret, k.REPLICATION_PASSWORD_KEY),
        # optional: a Secret of the user's from before backup-password existed still starts
        secret_env("MYSQL_BACKUP_PASSWORD", secret, k.BACKUP_PASSWORD_KEY, optional=True),
        # optional likewise: without it the cluster has no account for MySQLDatabase/User/Grant
        secret_env("MYSQL_SQL_PASSWORD", secret, k.SQL_PASSWORD_KEY, optional=True),
        grants_env("MYSQL_OPERATOR_GRANTS", accounts.operator_grants(version, app_database)),
        grants_env("MYSQL_REPLICATION_GRANTS", accounts.replication_grants(version)),
        grants_env("MYSQL_BACKUP_GRANTS", accounts.backup_grants(version)),
        grants_env("MYSQL_SQL_GRANTS", accounts.sql_grants(version)),
    ]
    if s.database:
        env.append({"name": "MYSQL_APP_DATABASE", "value": s.database.name})
        if s.database.user:
            env.append({"name": "MYSQL_APP_USER", "value": s.database.user})
            env.append(secret_env("MYSQL_APP_PASSWORD", secret, k.APP_PASSWORD_KEY))
            env.append(grants_env("MYSQL_APP_GRANTS", accounts.app_grants(version, s.database.name)))
    if s.restore:  # the account that loads the dump; dropped once the restore is done
        env += [
            {"name": "MYSQL_RESTORE_USER", "value": k.RESTORE_USER},
            secret_env("MYSQL_RESTORE_PASSWORD", secret, k.RESTORE_PASSWORD_KEY, optional=True),
            grants_env(
                "MYSQL_RESTORE_GRANTS", accounts.restore_grants(version), accounts.restore_revokes(version)
            ),
        ]
    return env


def _server_env(c: MySQLCluster) -> list[dict[str, Any]]:
    return _common_env(c) + [
        field_env("POD_NAME", "metadata.name"),
        field_env("POD_NAMESPACE", "metadata.namespace"),
        {"name": "HEADLESS_SERVICE", "value": k.headless_service_name(c)},
        secret_env("MYSQL_OPERATOR_PASSWORD", k.credentials_secret_name(c), k.OPERATOR_PASSWORD_KEY),
    ]


def _seed_volumes(c: MySQLCluster) -> list[dict[str, Any]]:
    """MariaDB: what the seed init container and the seed-donor sidecar read - the tokens a copy is
    asked for with, and the re-seed request."""
    secret = k.credentials_secret_name(c)
    return [
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


def _pod_spec(c: MySQLCluster, exporter_image: str) -> dict[str, Any]:
    """The servers' Pod: the init container, mysqld, for MariaDB the seed containers, the
    exporter when monitoring is on; non-root, no API token, the spec's scheduling fields."""
    s = c.spec
    resources = server_resources(c)
    init = {
        "name": "init-datadir",
        "image": s.image_ref,
        "imagePullPolicy": s.image_pull_policy,
        "command": ["/bin/bash", f"{k.CONFIG_DIR}/init.sh"],
        "env": _init_env(c),
        "resources": resources,
        "securityContext": container_security(),
        "volumeMounts": server_mounts(),
    }
    server = {
        "name": k.SERVER_CONTAINER,
        "image": s.image_ref,
        "imagePullPolicy": s.image_pull_policy,
        "command": ["/bin/bash", f"{k.CONFIG_DIR}/start.sh"],
        "env": _server_env(c),
        "ports": [{"name": "mysql", "containerPort": k.PORT, "protocol": "TCP"}],
        "startupProbe": probe("alive", 10, 90),  # crash recovery of a large server can take minutes
        "livenessProbe": probe("alive", 10, 6),
        "readinessProbe": probe("ready", 5, 3),
        "resources": resources,
        "securityContext": container_security(),
        "volumeMounts": server_mounts() + [{"name": "tls", "mountPath": k.TLS_DIR, "readOnly": True}],
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
        receive, donor = seed_containers(c, resources)
        init_containers.insert(0, receive)
        containers.append(donor)
        volumes += _seed_volumes(c)
    if s.monitoring:
        exporter, monitor_volume = exporter_container(c, exporter_image)
        containers.append(exporter)
        volumes.append(monitor_volume)
    spec: dict[str, Any] = {
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
        "affinity": dict(s.affinity) if s.affinity is not None else default_affinity(c),
        "initContainers": init_containers,
        "containers": containers,
        "volumes": volumes,
    }
    if s.tolerations:
        spec["tolerations"] = [dict(t) for t in s.tolerations]
    if s.node_selector:
        spec["nodeSelector"] = dict(s.node_selector)
    if s.priority_class_name:
        spec["priorityClassName"] = s.priority_class_name
    if s.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": n} for n in s.image_pull_secrets]
    return spec


def _claim_spec(c: MySQLCluster) -> dict[str, Any]:
    s = c.spec
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": s.storage.size}},
    }
    if s.storage.storage_class_name:
        claim_spec["storageClassName"] = s.storage.storage_class_name
    return claim_spec


def statefulset(c: MySQLCluster, exporter_image: str = k.EXPORTER_IMAGE) -> dict[str, Any]:
    """The servers' StatefulSet; `exporter_image`: the metrics sidecar's unless the spec names one."""
    s = c.spec
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
                "spec": _pod_spec(c, exporter_image),
            },
            "volumeClaimTemplates": [
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "data", "labels": k.selector_labels(c)},
                    "spec": _claim_spec(c),
                }
            ],
        },
    }
