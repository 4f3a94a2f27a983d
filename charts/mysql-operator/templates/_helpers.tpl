{{/* Names, labels and the operator's arguments. */}}

{{- define "mysql-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mysql-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "mysql-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "mysql-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: set the name of an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "mysql-operator.peeringName" -}}
{{- default (include "mysql-operator.fullname" .) .Values.peering.name -}}
{{- end -}}

{{- define "mysql-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mysql-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mysql-operator.labels" -}}
{{- $own := dict
  "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-")
  "app.kubernetes.io/version" .Chart.AppVersion
  "app.kubernetes.io/managed-by" .Release.Service
  "app.kubernetes.io/component" "operator" -}}
{{- $own = merge $own (include "mysql-operator.selectorLabels" . | fromYaml) -}}
{{- toYaml (merge $own (deepCopy .Values.commonLabels)) -}}
{{- end -}}

{{/* metadata.annotations for every object, or nothing; use as `{{- include "mysql-operator.annotations" . }}`
right under `labels:` of a top-level metadata. */}}
{{- define "mysql-operator.annotations" -}}
{{- with .Values.commonAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- end -}}

{{/* A labels map merged over the chart's labels; selector labels always win.
Call with (dict "root" $ "extra" $map). */}}
{{- define "mysql-operator.labelsWith" -}}
{{- $base := include "mysql-operator.labels" .root | fromYaml -}}
{{- $sel := include "mysql-operator.selectorLabels" .root | fromYaml -}}
{{- toYaml (merge $sel (deepCopy (default (dict) .extra)) $base) -}}
{{- end -}}

{{- define "mysql-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Checks no schema can express. */}}
{{- define "mysql-operator.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- if .Values.peering.enabled -}}
{{- fail (printf "replicas: %d replicas with peering.enabled all run at one kopf priority, and kopf then pauses every one of them (no cluster is served); set leaderElection.enabled: true and peering.enabled: false, or replicas: 1" (int .Values.replicas)) -}}
{{- end -}}
{{- fail (printf "replicas: %d replicas need leaderElection.enabled=true (otherwise every replica acts on every cluster); set replicas: 1 or leaderElection.enabled: true" (int .Values.replicas)) -}}
{{- end -}}
{{- if and .Values.peering.enabled .Values.leaderElection.enabled -}}
{{- fail "peering.enabled and leaderElection.enabled: choose one way to elect the active replica (leaderElection is the default)" -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled: needs metrics.enabled=true (the ServiceMonitor scrapes the metrics Service)" -}}
{{- end -}}
{{- if eq (int .Values.livenessProbe.port) (int .Values.metrics.port) -}}
{{- if .Values.metrics.enabled -}}
{{- fail (printf "metrics.port: %d is also livenessProbe.port; choose two different ports" (int .Values.metrics.port)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* `mysql-operator run` arguments as a YAML list (see mysql_operator/cli.py). Without
--leader-elect or --peering the operator runs standalone. */}}
{{- define "mysql-operator.args" -}}
- run
{{- if .Values.watchNamespaces }}
{{- range .Values.watchNamespaces }}
- {{ printf "--namespace=%s" . | quote }}
{{- end }}
{{- else }}
- --all-namespaces
{{- end }}
- {{ printf "--liveness=http://0.0.0.0:%d/healthz" (int .Values.livenessProbe.port) | quote }}
- {{ printf "--log-format=%s" .Values.logFormat | quote }}
{{- if .Values.peering.enabled }}
- {{ printf "--peering=%s" (include "mysql-operator.peeringName" .) | quote }}
{{- end }}
{{- if .Values.leaderElection.enabled }}
- {{ printf "--leader-elect=%s" (include "mysql-operator.fullname" .) | quote }}
{{- end }}
{{- if .Values.crds.apply }}
- --apply-crds=/etc/mysql-operator/crds
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
A Prometheus Operator object (ServiceMonitor, PodMonitor, PrometheusRule) asked for where its
CRD is not installed: refused with the value to change, instead of an install that fails on an
unknown kind. `helm template` knows no cluster: give it --api-versions monitoring.coreos.com/v1/<Kind>.
*/}}
{{- define "mysql-operator.requireMonitoringKind" -}}
{{- if not (.root.Capabilities.APIVersions.Has (printf "monitoring.coreos.com/v1/%s" .kind)) }}
{{- fail (printf "%s: the cluster has no %s (monitoring.coreos.com/v1, a CRD of the Prometheus Operator). Install the Prometheus Operator's CRDs first, or set %s=false (without the Prometheus Operator, give Prometheus the files of the chart's files/ folder: docs/monitoring.md)" .value .kind .value) }}
{{- end }}
{{- end -}}

{{/* The sha256 of each of the chart's CRD files: "name=digest" (what the operator writes into
mysql.operator.dev/crd-digest when it applies one; `helm test` compares). */}}
{{- define "mysql-operator.crdDigests" -}}
{{- range $path, $_ := .Files.Glob "crds/*.yaml" }}
- {{ printf "--crd=%s=%s" ($.Files.Get $path | fromYaml).metadata.name ($.Files.Get $path | sha256sum) | quote }}
{{- end }}
{{- end -}}

{{/* The names of the chart's CRDs, comma-separated (the operator's patch right, by name). */}}
{{- define "mysql-operator.crdNames" -}}
{{- $names := list }}
{{- range $path, $_ := .Files.Glob "crds/*.yaml" }}
{{- $names = append $names ($.Files.Get $path | fromYaml).metadata.name }}
{{- end }}
{{- join ", " $names }}
{{- end -}}
