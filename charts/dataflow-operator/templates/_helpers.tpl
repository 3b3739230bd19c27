{{- define "dataflow-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dataflow-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "dataflow-operator.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "dataflow-operator.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "dataflow-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "dataflow-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "dataflow-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dataflow-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "dataflow-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dataflow-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "dataflow-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Namespaces where Replica drivers run: the release's, every watched one and every
one listed in replicaNamespaces (needed when the operator watches all namespaces). */}}
{{- define "dataflow-operator.replicaNamespaces" -}}
{{- $namespaces := list .Release.Namespace }}
{{- range .Values.operator.watchNamespaces }}{{ $namespaces = append $namespaces . }}{{ end }}
{{- range .Values.replicaNamespaces }}{{ $namespaces = append $namespaces . }}{{ end }}
{{- $namespaces | uniq | join "," }}
{{- end }}
