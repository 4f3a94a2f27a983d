"""MySQLCluster specs for tests: the field walk's specs and changes, the spec schema, body(), cluster()."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from mysql_operator.api import parse

REPO = Path(__file__).resolve().parents[2]
CLUSTER_CRD = REPO / "crds" / "mysqlclusters.yaml"


def spec_schema() -> dict:
    crd = yaml.safe_load(CLUSTER_CRD.read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


S3 = {
    "bucket": "bucket-one",
    "prefix": "p1",
    "endpoint": "http://s3.local:9000",
    "region": "r1",
    "forcePathStyle": True,
    "credentialsSecret": {"name": "s3", "accessKeyIdKey": "AK", "secretAccessKeyKey": "SK"},
    "serverSideEncryption": {"type": "SSE-KMS", "kmsKeyId": "kms-1"},
}

# Every optional section present, so every field has something to change.
FULL = {
    "flavor": "mysql",
    "version": "8.4",
    "image": "registry.local/mysql:lts",
    "toolsImage": "registry.local/tools:mysql-8.4",
    "imagePullPolicy": "IfNotPresent",
    "instances": 3,
    "primary": 0,
    "replication": {
        "mode": "semisync",
        "semiSyncAcks": 1,
        "allowAsyncFallback": False,
        "failover": {"enabled": True, "delaySeconds": 10},
        "maxReadLagSeconds": 60,
    },
    "credentials": {"secretName": "my-credentials"},
    "database": {"name": "app", "user": "app"},
    "config": {"myCnf": "max_connections = 100\n"},
    "storage": {"size": "10Gi", "storageClassName": "standard"},
    "resources": {"limits": {"memory": "1Gi"}, "requests": {"cpu": "500m"}},
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                ]
            }
        }
    },
    "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
    "nodeSelector": {"zone": "a"},
    "priorityClassName": "high",
    "podLabels": {"team": "a"},
    "podAnnotations": {"note": "a"},
    "imagePullSecrets": [{"name": "registry-a"}],
    "service": {"type": "ClusterIP", "annotations": {"lb": "a"}},
    "backup": {
        "storage": {"s3": copy.deepcopy(S3)},
        "schedule": "0 3 * * *",
        "retention": {"keepLast": 7, "maxAge": "30d"},
        "encryption": {"keySecret": {"name": "backup-key", "key": "k1"}},
    },
    "restore": {"fromBackup": {"name": "backup-1"}, "encryption": {"keySecret": {"name": "old-key"}}},
    "deletionPolicy": "Retain",
    "operatorUpgrades": "Auto",
}
FULL_RESTORE_S3 = {**copy.deepcopy(FULL), "restore": {"s3": {**copy.deepcopy(S3), "path": "a/b.sql.gz"}}}
BASES = {"full": FULL, "restore-s3": FULL_RESTORE_S3}

# path -> (base, edits): edits are (dotted path, new value or None to delete).
_SSE_C = {"type": "SSE-C", "keySecret": {"name": "sse-key"}}
# field of an s3 -> its edits, relative to the s3 object
_S3_CHANGES: dict[str, list[tuple[str, object]]] = {
    **{
        key: [(key, value)]
        for key, value in {
            "bucket": "bucket-two",
            "prefix": "p2",
            "endpoint": "http://s3.other:9000",
            "region": "r2",
            "forcePathStyle": False,
            "credentialsSecret.name": "s3-other",
            "credentialsSecret.accessKeyIdKey": "AK2",
            "credentialsSecret.secretAccessKeyKey": "SK2",
            "serverSideEncryption.kmsKeyId": "kms-2",
        }.items()
    },
    "serverSideEncryption.type": [("serverSideEncryption", {"type": "SSE-S3"})],
    # SSE-C needs an https endpoint (refused otherwise: tests/invalid)
    "serverSideEncryption.keySecret.name": [
        ("endpoint", "https://s3.local:9000"),
        ("serverSideEncryption", _SSE_C),
    ],
    "serverSideEncryption.keySecret.key": [
        ("endpoint", "https://s3.local:9000"),
        ("serverSideEncryption", {**_SSE_C, "keySecret": {"name": "sse-key", "key": "k2"}}),
    ],
}
CHANGES: dict[str, tuple[str, list[tuple[str, object]]]] = {
    "flavor": ("full", [("flavor", "mariadb"), ("version", "10.11")]),
    "version": ("full", [("version", "9.7")]),
    "image": ("full", [("image", "registry.local/mysql:lts-next")]),
    "toolsImage": ("full", [("toolsImage", "registry.local/tools:mysql-8.4-b")]),
    "imagePullPolicy": ("full", [("imagePullPolicy", "Always")]),
    "instances": ("full", [("instances", 5)]),
    "primary": ("full", [("primary", 1)]),
    "replication.mode": ("full", [("replication.mode", "async"), ("replication.semiSyncAcks", None)]),
    "replication.semiSyncAcks": ("full", [("replication.semiSyncAcks", 2)]),
    "replication.allowAsyncFallback": ("full", [("replication.allowAsyncFallback", True)]),
    "replication.failover.enabled": ("full", [("replication.failover.enabled", False)]),
    "replication.failover.delaySeconds": ("full", [("replication.failover.delaySeconds", 30)]),
    "replication.failover.delay": ("full", [("replication.failover.delay", "30s")]),
    "replication.maxReadLagSeconds": ("full", [("replication.maxReadLagSeconds", 0)]),
    "replication.maxReadLag": ("full", [("replication.maxReadLag", "2m")]),
    "replication.errantPolicy": ("full", [("replication.errantPolicy", "Hold")]),
    "replication.binlogRetention.hours": ("full", [("replication.binlogRetention.hours", 24)]),
    "replication.binlogRetention.maxAge": ("full", [("replication.binlogRetention.maxAge", "36h")]),
    "replication.binlogRetention.maxSize": ("full", [("replication.binlogRetention.maxSize", "2Gi")]),
    "credentials.secretName": ("full", [("credentials.secretName", "other-credentials")]),
    "database.name": ("full", [("database.name", "other")]),
    "database.user": ("full", [("database.user", "other")]),
    "config.myCnf": ("full", [("config.myCnf", "max_connections = 200\n")]),
    "storage.size": ("full", [("storage.size", "20Gi")]),
    "storage.storageClassName": ("full", [("storage.storageClassName", "fast")]),
    "resources.limits": ("full", [("resources.limits", {"memory": "2Gi"})]),
    "resources.requests": ("full", [("resources.requests", {"cpu": "1"})]),
    "affinity": (
        "full",
        [
            (
                "affinity",
                {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {"matchLabels": {"x": "y"}},
                                "topologyKey": "kubernetes.io/hostname",
                            }
                        ]
                    }
                },
            )
        ],
    ),
    "tolerations": ("full", [("tolerations", [{"key": "other", "operator": "Exists"}])]),
    "nodeSelector": ("full", [("nodeSelector", {"zone": "b"})]),
    "priorityClassName": ("full", [("priorityClassName", "low")]),
    "podLabels": ("full", [("podLabels", {"team": "b"})]),
    "podAnnotations": ("full", [("podAnnotations", {"note": "b"})]),
    "imagePullSecrets": ("full", [("imagePullSecrets", [{"name": "registry-b"}])]),
    "service.type": ("full", [("service.type", "LoadBalancer")]),
    "service.annotations": ("full", [("service.annotations", {"lb": "b"})]),
    "monitoring.enabled": ("full", [("monitoring.enabled", False)]),
    "monitoring.image": ("full", [("monitoring.image", "r.example/mysqld-exporter:v0.16.0")]),
    "backup.schedule": ("full", [("backup.schedule", "30 1 * * 0")]),
    "backup.method": ("full", [("backup.method", "physical")]),
    "backup.retention.keepLast": ("full", [("backup.retention.keepLast", 3)]),
    "backup.retention.maxAge": ("full", [("backup.retention.maxAge", "2w")]),
    "backup.binlogs.enabled": ("full", [("backup.binlogs.enabled", True)]),
    "backup.drill.schedule": ("full", [("backup.drill.schedule", "0 5 * * *")]),
    "backup.drill.timeout": ("full", [("backup.drill.timeout", "2h")]),
    "backup.drill.resources.limits": ("full", [("backup.drill.resources.limits", {"memory": "2Gi"})]),
    "backup.drill.resources.requests": ("full", [("backup.drill.resources.requests", {"cpu": "200m"})]),
    "backup.drill.checksConfigMap.name": ("full", [("backup.drill.checksConfigMap.name", "orders-checks")]),
    "backup.binlogs.maxDelaySeconds": ("full", [("backup.binlogs.maxDelaySeconds", 5)]),
    "backup.binlogs.maxDelay": ("full", [("backup.binlogs.maxDelay", "1m")]),
    "restore.fromBackup.name": ("full", [("restore.fromBackup.name", "backup-2")]),
    "restore.pointInTime": ("full", [("restore.pointInTime", "2026-11-26T10:42:17Z")]),
    "restore.gtid": ("full", [("restore.gtid", "0-1-42")]),
    "restore.checkTables": ("full", [("restore.checkTables", True)]),
    "restore.checksConfigMap.name": ("full", [("restore.checksConfigMap.name", "orders-checks")]),
    "backup.encryption.keySecret.name": ("full", [("backup.encryption.keySecret.name", "key-two")]),
    "backup.encryption.keySecret.key": ("full", [("backup.encryption.keySecret.key", "k2")]),
    "restore.encryption.keySecret.name": ("full", [("restore.encryption.keySecret.name", "key-two")]),
    "restore.encryption.keySecret.key": ("full", [("restore.encryption.keySecret.key", "k2")]),
    "restore.s3.path": ("restore-s3", [("restore.s3.path", "c/d.sql.gz")]),
    "deletionPolicy": ("full", [("deletionPolicy", "Delete")]),
    "operatorUpgrades": ("full", [("operatorUpgrades", "Manual")]),
    "tls.required": ("full", [("tls.required", True)]),
    "tls.certificateValiditySeconds": ("full", [("tls.certificateValiditySeconds", 3600)]),
    "tls.certificateValidity": ("full", [("tls.certificateValidity", "2h")]),
    # added, never removed (a CEL transition rule refuses that: tests/invalid/update-tls-issuer-removed.yaml)
    "tls.issuerRef.name": ("full", [("tls.issuerRef.name", "ca-issuer")]),
    "tls.issuerRef.kind": ("full", [("tls.issuerRef", {"name": "ca-issuer", "kind": "ClusterIssuer"})]),
    "tls.issuerRef.group": (
        "full",
        [("tls.issuerRef", {"name": "ca-issuer", "group": "issuers.example.com"})],
    ),
}
for _k, _edits in _S3_CHANGES.items():
    CHANGES[f"backup.storage.s3.{_k}"] = ("full", [(f"backup.storage.s3.{p}", v) for p, v in _edits])
    CHANGES[f"restore.s3.{_k}"] = ("restore-s3", [(f"restore.s3.{p}", v) for p, v in _edits])

# Refused on update by a CEL transition rule (proven in tests/integration/test_crds.py).
IMMUTABLE_ROOTS = ("flavor", "credentials", "database", "restore")
IMMUTABLE_PATHS = ("storage.storageClassName",)

# Applied by the reconcile loop itself, not through a built object: the desired primary
# (a switchover), failover policy, and the backup schedule, storage and retention. They are inputs
# of the operator's decisions, so the reconcile/backup code must test them; listed here so that a
# new field cannot go unclassified.
RECONCILE_INPUTS = frozenset(
    {
        "primary",
        "storage.size",  # the PVCs are expanded (the StatefulSet keeps its claim template)
        "replication.failover.enabled",
        "replication.failover.delaySeconds",
        "replication.failover.delay",
        "replication.maxReadLagSeconds",  # the -ro Service's role labels
        "replication.maxReadLag",
        "replication.errantPolicy",  # topology: re-seed or hold out an errant replica
        "replication.semiSyncAcks",  # set on the primary at runtime (topology: ConfigureSemiSync)
        "replication.binlogRetention.hours",  # the engine's binary log purges
        "replication.binlogRetention.maxAge",
        "replication.binlogRetention.maxSize",
        "backup.schedule",
        "backup.drill.schedule",  # the drill controller (backup/drill.py) reads them at each tick
        "backup.drill.timeout",
        "backup.drill.resources.limits",  # the next drill's throwaway cluster (manifests/drill_cluster.py)
        "backup.drill.resources.requests",
        "backup.drill.checksConfigMap.name",
        "backup.method",  # read by the next backup Job
        "toolsImage",  # the next backup and restore Jobs', the archiver Deployment's client tools
        "backup.retention.keepLast",
        "backup.retention.maxAge",
        "backup.encryption.keySecret.name",  # read by the next backup Job (and checked before it)
        "backup.encryption.keySecret.key",
        "backup.binlogs.enabled",  # the archiver Deployment (manifests.binlog_archiver), applied or deleted
        "backup.binlogs.maxDelaySeconds",
        "backup.binlogs.maxDelay",
        "tls.certificateValiditySeconds",
        "tls.certificateValidity",
        "operatorUpgrades",  # whether a staged Pod template is written (rolling.template_step)
        "tls.issuerRef.name",
        "tls.issuerRef.kind",
        "tls.issuerRef.group",
    }
    | {f"backup.storage.s3.{k}" for k in _S3_CHANGES}
)


def is_immutable(path: str) -> bool:
    return path.split(".")[0] in IMMUTABLE_ROOTS or path in IMMUTABLE_PATHS


def immutable_field(path: str) -> str:
    """The field an immutability refusal names: the root, or the path itself."""
    return path if path in IMMUTABLE_PATHS else path.split(".")[0]


def set_path(spec: dict, path: str, value: object) -> None:
    *parents, last = path.split(".")
    node = spec
    for p in parents:
        node = node.setdefault(p, {})
    if value is None:
        node.pop(last, None)
    else:
        node[last] = copy.deepcopy(value)


def changed_spec(path: str) -> tuple[dict, dict]:
    """(base spec, the same spec with `path` changed)."""
    base_name, edits = CHANGES[path]
    base = copy.deepcopy(BASES[base_name])
    new = copy.deepcopy(base)
    for p, v in edits:
        set_path(new, p, v)
    return base, new


def body(
    spec: dict,
    name: str = "walk",
    namespace: str = "ns",
    *,
    uid: str | None = None,
    generation: int | None = None,
    status: dict | None = None,
) -> dict:
    """A MySQLCluster as the API server would hand it over: the one builder tests share."""
    meta: dict = {"name": name, "namespace": namespace}
    if uid is not None:
        meta["uid"] = uid
    if generation is not None:
        meta["generation"] = generation
    out = {
        "apiVersion": "mysql.operator.dev/v1alpha1",
        "kind": "MySQLCluster",
        "metadata": meta,
        "spec": copy.deepcopy(spec),
    }
    if status is not None:
        out["status"] = status
    return out


def cluster(**spec):
    return parse(body({"instances": 3, **spec}, name="db", namespace="prod"))


def running_pod(name: str, role: str | None, uid: str | None = None, ip: str = "10.1.0.1") -> dict:
    """A server Pod as the stores hold it: Running and Ready, with its role label."""
    meta: dict = {
        "name": name,
        "uid": uid or f"uid-{name}",
        "labels": {"mysql.operator.dev/role": role} if role else {},
    }
    return {
        "metadata": meta,
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "mysql", "ready": True, "state": {"running": {}}}],
        },
    }
