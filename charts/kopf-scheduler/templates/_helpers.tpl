{{- define "kopf-scheduler.selectorLabels" -}}
app.kubernetes.io/name: kopf-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kopf-scheduler.labels" -}}
{{ include "kopf-scheduler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}
