{{/* Names and labels, as `helm create` makes them. */}}
{{- define "vllm-log-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "vllm-log-exporter.fullname" -}}
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

{{- define "vllm-log-exporter.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "vllm-log-exporter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "vllm-log-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vllm-log-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "vllm-log-exporter.labels" -}}
helm.sh/chart: {{ include "vllm-log-exporter.chart" . }}
{{ include "vllm-log-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "vllm-log-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "vllm-log-exporter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "vllm-log-exporter.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* The exporter listens on every interface of the pod at this port. */}}
{{- define "vllm-log-exporter.port" -}}
{{- .Values.service.port | int }}
{{- end }}

{{/*
The exporter's sources: one CRI glob per namespace pattern, kubelet's layout
<logDirectory>/<namespace>_<pod>_<uid>/<container>/<restart>.log. Each source's name is its state
file key: "pods" for "*", "pods-<namespace>" for a plain namespace, "pods-<8 hex of its sha256>" for a pattern.
*/}}
{{- define "vllm-log-exporter.sources" -}}
{{- $p := .Values.pods }}
{{- range $ns := $p.namespaces }}
{{- $name := printf "pods-%s" $ns }}
{{- if eq $ns "*" }}
{{- $name = "pods" }}
{{- else if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $ns) }}
{{- $name = printf "pods-%s" ($ns | sha256sum | trunc 8) }}
{{- end }}
- name: {{ $name | quote }}
  type: file
  path: {{ printf "%s/%s_%s_*/%s/*.log" (trimSuffix "/" $p.logDirectory) $ns $p.podName $p.container | quote }}
  server_label: file
  from_start: {{ $p.fromStart }}
{{- end }}
{{- end }}

{{/* One scrape endpoint of a ServiceMonitor or PodMonitor; call with (dict "root" $ "m" .Values.serviceMonitor). */}}
{{- define "vllm-log-exporter.endpoint" -}}
{{- $m := .m }}
- port: metrics
  path: /metrics
  scheme: {{ .root.Values.service.scheme }}
  interval: {{ $m.interval }}
  {{- with $m.scrapeTimeout }}
  scrapeTimeout: {{ . }}
  {{- end }}
  honorLabels: {{ $m.honorLabels }}
  {{- $relabelings := concat .root.Values.relabelings $m.relabelings }}
  {{- with $relabelings }}
  relabelings:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $m.metricRelabelings }}
  metricRelabelings:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $m.tlsConfig }}
  tlsConfig:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $m.basicAuth }}
  basicAuth:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
