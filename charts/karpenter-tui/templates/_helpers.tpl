{{/*
Helpers. The templates keep to a small set of functions (include, default, required, quote, printf, toYaml,
indent, nindent, trunc, trimSuffix, contains): tests/packaging.rs renders the chart with its own implementation of
exactly these.
*/}}

{{- define "karpenter-tui.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "karpenter-tui.fullname" -}}
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

{{- define "karpenter-tui.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpenter-tui.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "karpenter-tui.labels" -}}
{{ include "karpenter-tui.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "karpenter-tui.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "karpenter-tui.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* "name=true,other=false," for --feature-gates (the caller trims the last comma). */}}
{{- define "karpenter-tui.featureGates" -}}
{{- range $name, $on := .Values.featureGates }}{{ $name }}={{ $on }},{{ end }}
{{- end }}

{{/* The prometheus.io annotations for scraping /metrics (served on the health address). */}}
{{- define "karpenter-tui.scrapeAnnotations" -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ printf "%v" .Values.health.port | quote }}
prometheus.io/path: /metrics
{{- end }}
