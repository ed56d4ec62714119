{{- define "latchkey.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "latchkey.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "latchkey.selectorLabels" -}}
app.kubernetes.io/name: {{ include "latchkey.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "latchkey.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "latchkey.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "latchkey.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "latchkey.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "latchkey.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* SQLite on a volume when no PostgreSQL secret is given. */}}
{{- define "latchkey.sqlite" -}}
{{- if not .Values.database.existingSecret -}}true{{- end -}}
{{- end -}}

{{- define "latchkey.scheme" -}}
{{- if .Values.tls.existingSecret -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}

{{/* Cluster mode (docs/cluster.md): NATS configured, by URL or by a Secret. */}}
{{- define "latchkey.clustered" -}}
{{- if or .Values.cluster.natsUrl .Values.cluster.existingSecret -}}true{{- end -}}
{{- end -}}

{{/* The drain timeout in whole seconds, rounded up (limits.drain_timeout_ms, 10 s by default). */}}
{{- define "latchkey.drainSeconds" -}}
{{- $ms := int (default 10000 .Values.config.limits.drain_timeout_ms) -}}
{{- div (add $ms 999) 1000 -}}
{{- end -}}
