"""Names, labels and constants shared by the builders and the code that reads what they build."""

from __future__ import annotations

import copy
from typing import Any, Mapping

from ..api import GROUP, MySQLCluster

MANAGED_BY = "mysql-operator"
COMPONENT_DATABASE = "database"

# The operator sets this label on each server Pod (never in the Pod template, so a switchover
# does not roll the StatefulSet); the read-write and read-only Services select on it.
ROLE_LABEL = f"{GROUP}/role"
ROLE_PRIMARY = "primary"
ROLE_REPLICA = "replica"
CONFIG_HASH_ANNOTATION = f"{GROUP}/config-hash"

PORT = 3306
SERVER_CONTAINER = "mysqld"  # the server Pod's container that runs the server
DATA_ROOT = "/var/lib/mysql"  # the volume; the data directory is DATA_ROOT/data
DATADIR = f"{DATA_ROOT}/data"
RUN_DIR = "/run/mysql-operator"  # in-memory: socket, pid, per-start config, client option file
SOCKET = f"{RUN_DIR}/mysqld.sock"
CONFIG_DIR = "/opt/mysql-operator/config"  # the ConfigMap
RUN_AS = 999  # the mysql user of both official images
TLS_DIR = "/etc/mysql-operator/tls"  # Secret <name>-tls in server Pods
TLS_CA, TLS_CERT, TLS_KEY = f"{TLS_DIR}/ca.crt", f"{TLS_DIR}/tls.crt", f"{TLS_DIR}/tls.key"
CA_BUNDLE_DIR = "/etc/mysql-operator/ca"  # Secret <name>-ca-bundle (ca.crt) in Job Pods
CA_BUNDLE = f"{CA_BUNDLE_DIR}/ca.crt"
# MariaDB re-seeding (sh/seed.sh): the donor sidecar's port, the operator password as a file (the
# requester's token, renewed in place on rotation), and the operator's request (ConfigMap
# <name>-reseed: key = Pod name, value = "<donor host> <request id>")
SEED_PORT = 3307
# the recipient's `seed` init container answers there how far its copy is (db/seed_progress.py)
SEED_PROGRESS_PORT = 3308
SEED_TOKEN_DIR = "/etc/mysql-operator/seed"
RESEED_DIR = "/etc/mysql-operator/reseed"
# The metrics sidecar (sh/exporter.sh): mysqld_exporter's port, named "metrics"; the monitoring
# account's password as a file (renewed in place on rotation)
EXPORTER_PORT = 9104
# Its image unless the operator is told another (MYSQL_OPERATOR_EXPORTER_IMAGE: the chart's
# exporterImage) or the cluster names one (spec.monitoring.image): prometheus/mysqld_exporter's,
# built here by hack/build-images.sh exporter at hack/versions.env's MYSQLD_EXPORTER_VERSION
EXPORTER_IMAGE = "localhost/mysqld-exporter:v0.16.0"
# The Jobs' client-tools container (backup, restore, binary-log archiver) runs the tools of the
# servers' flavor and series from an image the project builds per series (hack/build-images.sh
# tools-*): REPOSITORY:FLAVOR-SERIES, the repository as the operator is told
# (MYSQL_OPERATOR_TOOLS_IMAGE: the chart's toolsImage.repository), unless the cluster names one
# (spec.toolsImage). A series without one runs them from the server image.
TOOLS_REPOSITORY = "localhost/mysql-operator-tools"
TOOLS_SERIES = {"mysql": ("9.7",), "mariadb": ("10.11", "11.8")}
MONITOR_DIR = "/etc/mysql-operator/monitor"

# Accounts created when the data directory is initialised; their privileges: db/accounts.py.
ROOT_USER = "root"
OPERATOR_USER = "mysql-operator"
REPLICATION_USER = "replication"
BACKUP_USER = "mysql-operator-backup"
RESTORE_USER = "mysql-operator-restore"  # only while spec.restore loads a dump into a new cluster
LOAD_USER = "mysql-operator-load"  # what a restored dump runs as; made and dropped by the restore Job
SQL_USER = "mysql-operator-sql"  # MySQLDatabase, MySQLUser and MySQLGrant
MONITOR_USER = "mysql-operator-monitor"  # the metrics sidecar, over the socket only (@localhost)
BINLOG_USER = "mysql-operator-binlog"  # the binary-log archiver (spec.backup.binlogs)

# Keys of the credentials Secret (generated, or the user's spec.credentials.secretName).
ROOT_PASSWORD_KEY = "root-password"
OPERATOR_PASSWORD_KEY = "operator-password"
REPLICATION_PASSWORD_KEY = "replication-password"
APP_PASSWORD_KEY = "app-password"
BACKUP_PASSWORD_KEY = "backup-password"
RESTORE_PASSWORD_KEY = "restore-password"
SQL_PASSWORD_KEY = "sql-password"
MONITOR_PASSWORD_KEY = "monitor-password"
BINLOG_PASSWORD_KEY = "binlog-password"


def statefulset_name(c: MySQLCluster) -> str:
    return c.name


def headless_service_name(c: MySQLCluster) -> str:
    return f"{c.name}-headless"


def primary_service_name(c: MySQLCluster) -> str:
    return f"{c.name}-rw"


def replica_service_name(c: MySQLCluster) -> str:
    return f"{c.name}-ro"


def config_map_name(c: MySQLCluster) -> str:
    return f"{c.name}-config"


def reseed_config_map_name(c: MySQLCluster) -> str:
    return f"{c.name}-reseed"


def generated_secret_name(c: MySQLCluster) -> str:
    return f"{c.name}-credentials"


def data_claim_name(c: MySQLCluster, ordinal: int) -> str:
    """The PersistentVolumeClaim the StatefulSet makes for a server (claim template "data")."""
    return f"data-{pod_name(c, ordinal)}"


def applied_credentials_secret_name(c: MySQLCluster) -> str:
    """The operator's record of the passwords the servers have (a rotation is pending while
    the credentials Secret holds others): read by the operator only."""
    return f"{c.name}-credentials-applied"


def credentials_secret_name(c: MySQLCluster) -> str:
    """The Secret the servers read passwords from: the user's, or the generated one."""
    creds = c.spec.credentials
    return creds.secret_name if creds else generated_secret_name(c)


def ca_secret_name(c: MySQLCluster) -> str:
    """The cluster's CA, key included: read by the operator only."""
    return f"{c.name}-ca"


def tls_secret_name(c: MySQLCluster) -> str:
    """The servers' certificate, its key and the CA certificate (mounted in server Pods)."""
    return f"{c.name}-tls"


def ca_bundle_secret_name(c: MySQLCluster) -> str:
    """The CA certificate alone, for applications and the operator's Jobs."""
    return f"{c.name}-ca-bundle"


def server_dns_names(c: MySQLCluster) -> list[str]:
    """The names a server certificate carries: every Pod through the headless Service (replicas
    and Jobs connect so) and the -rw/-ro Services (applications), short and qualified."""
    names = [f"*.{headless_service_name(c)}.{c.namespace}.svc"]
    for svc in (primary_service_name(c), replica_service_name(c)):
        names += [svc, f"{svc}.{c.namespace}", f"{svc}.{c.namespace}.svc"]
    names.append(f"*.{headless_service_name(c)}.{c.namespace}.svc.cluster.local")
    names += [
        f"{svc}.{c.namespace}.svc.cluster.local" for svc in (primary_service_name(c), replica_service_name(c))
    ]
    return names


def pdb_name(c: MySQLCluster) -> str:
    return c.name


def pod_name(c: MySQLCluster, ordinal: int) -> str:
    return f"{statefulset_name(c)}-{ordinal}"


def pod_host(c: MySQLCluster, ordinal: int) -> str:
    """Stable DNS name of one server (resolvable inside the cluster)."""
    return f"{pod_name(c, ordinal)}.{headless_service_name(c)}.{c.namespace}.svc"


def selector_labels(c: MySQLCluster) -> dict[str, str]:
    """Labels that select this cluster's server Pods. Built from immutable fields only."""
    return {
        "app.kubernetes.io/name": c.spec.flavor,
        "app.kubernetes.io/instance": c.name,
        "app.kubernetes.io/component": COMPONENT_DATABASE,
    }


def labels(c: MySQLCluster, component: str = COMPONENT_DATABASE) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": c.spec.flavor,
        "app.kubernetes.io/instance": c.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/version": c.spec.server_version,
    }


def metadata(
    c: MySQLCluster,
    name: str,
    component: str = COMPONENT_DATABASE,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": c.namespace, "labels": labels(c, component)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def owned(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `obj` with a controller owner reference to `owner` (a custom object as a dict).

    The garbage collector deletes `obj` when the owner is deleted. Never call this on a Secret the
    user supplied: the operator does not build those, and must not adopt them.
    """
    meta = owner.get("metadata") or {}
    if not meta.get("uid") or not meta.get("name"):
        raise ValueError("the owner needs metadata.name and metadata.uid (read it from the apiserver)")
    out = copy.deepcopy(dict(obj))
    ref = {
        "apiVersion": owner.get("apiVersion") or f"{GROUP}/v1alpha1",
        "kind": owner.get("kind") or "MySQLCluster",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    out.setdefault("metadata", {})["ownerReferences"] = [ref]
    return out
