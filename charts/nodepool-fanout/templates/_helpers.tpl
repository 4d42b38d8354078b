{{/* The chart's name, app.kubernetes.io/name. */}}
{{- define "nodepool-fanout.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of every object: the release's name, prefixed with the chart's
unless it already holds it.
*/}}
{{- define "nodepool-fanout.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "nodepool-fanout.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* What selects the controller's pods. */}}
{{- define "nodepool-fanout.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodepool-fanout.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "nodepool-fanout.labels" -}}
helm.sh/chart: {{ include "nodepool-fanout.chart" . }}
{{ include "nodepool-fanout.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* --watch-label-selector, from shard or watchLabelSelector. */}}
{{- define "nodepool-fanout.watchLabelSelector" -}}
{{- if and .Values.shard .Values.watchLabelSelector }}
{{- fail "set shard or watchLabelSelector, not both" }}
{{- else if .Values.shard }}
{{- printf "sharding.fluxcd.io/key=%s" .Values.shard }}
{{- else }}
{{- .Values.watchLabelSelector }}
{{- end }}
{{- end }}

{{/* The console's name, app.kubernetes.io/name of its pods. */}}
{{- define "nodepool-fanout.consoleName" -}}
{{- printf "%s-console" (include "nodepool-fanout.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* What selects the console's pods. */}}
{{- define "nodepool-fanout.consoleSelectorLabels" -}}
app.kubernetes.io/name: {{ include "nodepool-fanout.consoleName" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "nodepool-fanout.consoleLabels" -}}
helm.sh/chart: {{ include "nodepool-fanout.chart" . }}
{{ include "nodepool-fanout.consoleSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}
