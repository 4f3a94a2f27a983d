{{/*
The ONE place that lists what the operator may do. rbac.yaml renders these rules into a
ClusterRole (watchNamespaces: []) or into one Role per watched namespace plus a ClusterRole holding
only the cluster-scoped rules. Keep them equal to mysql_operator/k8s/rbac.py (OPERATOR_RULES, PEERING_RULES_*,
CLUSTER_SCOPE_RULES): tests/unit/test_chart_rbac.py compares the two. No wildcards; no delete on Secrets.
*/}}

{{/* Rules on namespaced objects (OPERATOR_RULES + BACKUP_RULES + SQL_OBJECT_RULES = rbac.namespaced_rules()): granted in every watched namespace. */}}
{{- define "mysql-operator.rules.namespaced" -}}
# the custom resources: watched by kopf, annotated by kopf (progress), status written by the
# operator; a restore drill's throwaway cluster created (spec.backup.drill; deleted through its
# anchor Job, never by the operator)
- apiGroups: [mysql.operator.dev]
  resources: [mysqlclusters]
  verbs: [get, list, watch, create, patch]
- apiGroups: [mysql.operator.dev]
  resources: [mysqlclusters/status]
  verbs: [patch]
# owned objects, applied with server-side apply (a PATCH that may create: create and patch); a
# Service is read back to see where it routes
- apiGroups: [""]
  resources: [configmaps]
  verbs: [create, patch]
- apiGroups: [""]
  resources: [services]
  verbs: [get, create, patch]
# generated credentials: created if missing; user-supplied Secrets are only read (never deleted)
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, patch]
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [get, list, watch, create, patch]
# the binary-log archiver (spec.backup.binlogs): watched (its readiness), deleted when turned off
- apiGroups: [apps]
  resources: [deployments]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [create, patch]
# a restore Job's copy port reachable only from its cluster's servers (server-side apply)
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [create, patch]
# the servers' data volumes, grown when spec.storage.size is raised
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, patch]
# server pods: observed, watched to re-trigger reconciles, role labels patched, deleted one by
# one in a rolling update (StatefulSet updateStrategy OnDelete)
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch, patch, delete]
# Events for every significant action (the operator's and kopf's: both create core v1 Events)
- apiGroups: [""]
  resources: [events]
  verbs: [create]
# spec.tls.issuerRef: the cert-manager Certificate (server-side apply; read back for what
# cert-manager says of it) and the Issuer it names
- apiGroups: [cert-manager.io]
  resources: [certificates]
  verbs: [get, create, patch]
- apiGroups: [cert-manager.io]
  resources: [issuers]
  verbs: [get]
# backups (BACKUP_RULES): MySQLBackups (scheduled ones created, expired ones deleted), their
# status, and the Jobs that run them
- apiGroups: [mysql.operator.dev]
  resources: [mysqlbackups]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [mysql.operator.dev]
  resources: [mysqlbackups/status]
  verbs: [patch]
# read back (their Pod's outcome); a failed delete Job is removed to be run again
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, create, delete]
# SQL objects (SQL_OBJECT_RULES): MySQLDatabases, MySQLUsers and MySQLGrants watched, their
# finalizer added and removed, their status written
- apiGroups: [mysql.operator.dev]
  resources: [mysqldatabases, mysqlusers, mysqlgrants]
  verbs: [list, watch, patch]
- apiGroups: [mysql.operator.dev]
  resources: [mysqldatabases/status, mysqlusers/status, mysqlgrants/status]
  verbs: [patch]
{{- end -}}

{{/* kopf peering inside each watched namespace (PEERING_RULES_NAMESPACED). */}}
{{- define "mysql-operator.rules.namespacedPeering" -}}
- apiGroups: [kopf.dev]
  resources: [kopfpeerings]
  verbs: [get, list, watch, patch]
{{- end -}}

{{/* Cluster-scoped rules (CLUSTER_SCOPE_RULES), granted in both modes: kopf scans CRDs to find
the resources it serves and follows the namespaces it is given. */}}
{{- define "mysql-operator.rules.cluster" -}}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
{{- if .Values.crds.apply }}
# crds.apply: its own CRDs only, brought up to date (server-side apply)
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  resourceNames: [{{ include "mysql-operator.crdNames" . }}]
  verbs: [patch]
{{- end }}
# spec.tls.issuerRef of kind ClusterIssuer: is it Ready (read only)
- apiGroups: [cert-manager.io]
  resources: [clusterissuers]
  verbs: [get]
{{- end -}}

{{/* kopf peering across the cluster (PEERING_RULES_CLUSTER; all-namespaces operator only). */}}
{{- define "mysql-operator.rules.clusterPeering" -}}
- apiGroups: [kopf.dev]
  resources: [clusterkopfpeerings]
  verbs: [get, list, watch, patch]
{{- end -}}

{{/* The rules of the ClusterRole for the chosen scope. */}}
{{- define "mysql-operator.rules.clusterRole" -}}
{{ include "mysql-operator.rules.cluster" . }}
{{- if not .Values.watchNamespaces }}
{{ include "mysql-operator.rules.namespaced" . }}
{{- if .Values.peering.enabled }}
{{ include "mysql-operator.rules.clusterPeering" . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The rules of each per-namespace Role (watchNamespaces set). */}}
{{- define "mysql-operator.rules.role" -}}
{{ include "mysql-operator.rules.namespaced" . }}
{{- if .Values.peering.enabled }}
{{ include "mysql-operator.rules.namespacedPeering" . }}
{{- end }}
{{- end -}}


{{/* The operator's own Lease, in the release namespace (LEADER_ELECTION_RULES). */}}
{{- define "mysql-operator.rules.leaderElection" -}}
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
{{- end -}}
