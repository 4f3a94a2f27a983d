{{/*
The ONE place that lists what the operator may do. rbac.yaml renders these rules into a
ClusterRole (watchNamespaces: []) or into one Role per watched namespace plus a ClusterRole holding
only the cluster-scoped rules. Keep them equal to mysql_operator/k8s/rbac.py (OPERATOR_RULES):
tests/unit/test_chart_rbac.py compares the two. No wildcards; no delete on Secrets.
*/}}

{{/* Rules on namespaced objects: granted in every watched namespace. */}}
{{- define "mysql-operator.rules.namespaced" -}}
- apiGroups: [mysql.operator.dev]
  resources: [mysqlclusters, mysqlbackups]
  verbs: [get, list, watch, patch]
- apiGroups: [mysql.operator.dev]
  resources: [mysqlclusters/status, mysqlbackups/status]
  verbs: [get, patch]
- apiGroups: [mysql.operator.dev]
  resources: [mysqlclusters/finalizers, mysqlbackups/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, patch]
- apiGroups: [""]
  resources: [services, configmaps, secrets]
  verbs: [get, list, watch, create, patch]
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, list, delete]
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [get, list, watch, create, patch]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, patch]
- apiGroups: [batch]
  resources: [jobs, cronjobs]
  verbs: [get, list, watch, create, patch]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{/* kopf peering inside each watched namespace (namespaced operator only). */}}
{{- define "mysql-operator.rules.namespacedPeering" -}}
- apiGroups: [kopf.dev]
  resources: [kopfpeerings]
  verbs: [get, list, watch, patch]
{{- end -}}

{{/* Cluster-scoped rules, granted in both modes: kopf scans CRDs to find the resources it serves. */}}
{{- define "mysql-operator.rules.cluster" -}}
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [get, list, watch]
{{- end -}}

{{/* kopf peering across the cluster (all-namespaces operator only). */}}
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
