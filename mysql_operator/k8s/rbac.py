"""Every permission the operator uses, in one place (the chart's RBAC and the tests read this).

The integration tests run the operator as a ServiceAccount bound to exactly these rules, so a
missing permission fails a test instead of a production install.
"""

from __future__ import annotations

from mysql_operator.api import GROUP

OPERATOR_RULES: list[dict] = [
    # the custom resources: watched by kopf, annotated by kopf (progress), status written by us
    # ... and a restore drill's throwaway cluster created (spec.backup.drill; deleted through its
    # anchor Job, never by the operator: manifests/drill_cluster.py)
    {
        "apiGroups": [GROUP],
        "resources": ["mysqlclusters"],
        "verbs": ["get", "list", "watch", "create", "patch"],
    },
    {"apiGroups": [GROUP], "resources": ["mysqlclusters/status"], "verbs": ["patch"]},
    # owned objects, applied with server-side apply (a PATCH that may create: create and patch);
    # a Service is read back to see where it routes
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "patch"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "create", "patch"]},
    # generated credentials: created if missing, missing keys added; user Secrets only read
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "patch"]},
    {
        "apiGroups": ["apps"],
        "resources": ["statefulsets"],
        "verbs": ["get", "list", "watch", "create", "patch"],
    },
    # the binary-log archiver (spec.backup.binlogs): deleted when turned off
    {
        "apiGroups": ["apps"],
        "resources": ["deployments"],
        "verbs": ["list", "watch", "create", "patch", "delete"],
    },
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["create", "patch"]},
    # a restore Job's copy port reachable only from its cluster's servers (server-side apply)
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["create", "patch"]},
    # the servers' data volumes, grown when spec.storage.size is raised
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "patch"]},
    # server pods: observed (and watched to re-trigger reconciles), role labels patched, deleted
    # one by one in a rolling update (StatefulSet updateStrategy OnDelete)
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch", "patch", "delete"]},
    # Events for every significant action (ours and kopf's: both create core v1 Events)
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    # spec.tls.issuerRef: the cert-manager Certificate (server-side apply; read back for what
    # cert-manager says of it) and the Issuer it names
    {"apiGroups": ["cert-manager.io"], "resources": ["certificates"], "verbs": ["get", "create", "patch"]},
    {"apiGroups": ["cert-manager.io"], "resources": ["issuers"], "verbs": ["get"]},
]

# Leader election (mysql_operator/leader.py): the operator's own Lease, in its own namespace only.
LEADER_ELECTION_RULES: list[dict] = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
]

# Only with kopf peering instead of leader election (the chart ships kopf's peering CRDs).
PEERING_RULES_NAMESPACED: list[dict] = [
    {"apiGroups": ["kopf.dev"], "resources": ["kopfpeerings"], "verbs": ["get", "list", "watch", "patch"]},
]
PEERING_RULES_CLUSTER: list[dict] = [
    {
        "apiGroups": ["kopf.dev"],
        "resources": ["clusterkopfpeerings"],
        "verbs": ["get", "list", "watch", "patch"],
    },
]
# kopf needs these cluster-wide even for a namespaced install (checked by the integration test:
# it watches CRDs to discover resources and lists namespaces to follow its namespace list).
# Namespaced install: a Role of OPERATOR_RULES per watched namespace + a ClusterRole of these.
# All-namespaces install: one ClusterRole of OPERATOR_RULES + these.
# the chart's crds/: ours and kopf's peering CRDs (k8s/crds.py applies what the chart ships)
OWN_CRDS = [
    "clusterkopfpeerings.kopf.dev",
    "kopfpeerings.kopf.dev",
    *(
        f"{plural}.{GROUP}"
        for plural in ("mysqlbackups", "mysqlclusters", "mysqldatabases", "mysqlgrants", "mysqlusers")
    ),
]
CLUSTER_SCOPE_RULES: list[dict] = [
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["list", "watch"],
    },
    # --apply-crds (k8s/crds.py): its own CRDs only, brought up to date (server-side apply)
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "resourceNames": OWN_CRDS,
        "verbs": ["patch"],
    },
    # spec.tls.issuerRef of kind ClusterIssuer: is it Ready (cluster-scoped, read only)
    {"apiGroups": ["cert-manager.io"], "resources": ["clusterissuers"], "verbs": ["get"]},
]

# What BackupController uses (mysql_operator/backup/controller.py and the classes it extends; the
# same operator process runs it): MySQLBackup objects (scheduled ones created, expired ones
# deleted), their status, and the backup Jobs.
BACKUP_RULES: list[dict] = [
    {
        "apiGroups": [GROUP],
        "resources": ["mysqlbackups"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    {"apiGroups": [GROUP], "resources": ["mysqlbackups/status"], "verbs": ["patch"]},
    # read back (status of its Pod's outcome), a failed delete Job removed to be run again
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "create", "delete"]},
]

# What mysql_operator/sql_objects.py uses: MySQLDatabases, MySQLUsers and MySQLGrants are watched
# and listed, their finalizer added and removed (patch), their status written. The generated
# password Secrets of MySQLUsers fall under OPERATOR_RULES' secrets (get, create).
SQL_OBJECT_RULES: list[dict] = [
    {
        "apiGroups": [GROUP],
        "resources": ["mysqldatabases", "mysqlusers", "mysqlgrants"],
        "verbs": ["list", "watch", "patch"],
    },
    {
        "apiGroups": [GROUP],
        "resources": ["mysqldatabases/status", "mysqlusers/status", "mysqlgrants/status"],
        "verbs": ["patch"],
    },
]


def namespaced_rules() -> list[dict]:
    """The Role for each watched namespace (or, with CLUSTER_SCOPE_RULES, the ClusterRole)."""
    return OPERATOR_RULES + BACKUP_RULES + SQL_OBJECT_RULES
