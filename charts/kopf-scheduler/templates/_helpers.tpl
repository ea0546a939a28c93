{{- /*
The name of the objects' app (app.kubernetes.io/name): nameOverride or the chart's name.
*/}}
{{- define "kopf-scheduler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- /*
What every object of the release is named after: fullnameOverride, else the name. Not prefixed with the
release name as `helm create` does: the ClusterRoles are cluster-wide, so a cluster runs one release, and
its objects keep the names deploy/ gives them (kopf-scheduler, kopf-scheduler-metrics, ...).
*/}}
{{- define "kopf-scheduler.fullname" -}}
{{- default (include "kopf-scheduler.name" .) .Values.fullnameOverride | trunc 55 | trimSuffix "-" }}
{{- end }}

{{- define "kopf-scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kopf-scheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kopf-scheduler.labels" -}}
{{ include "kopf-scheduler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "kopf-scheduler.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- /*
The schedulerName the `helm test` pod asks for, one the release serves: tests.schedulerName, else
defaultSchedulerName, else that of the first of profiles (by name), else of the first of shippedProfiles.
*/}}
{{- define "kopf-scheduler.testSchedulerName" -}}
{{- $name := .Values.tests.schedulerName | default .Values.defaultSchedulerName }}
{{- range $profile, $spec := .Values.profiles }}
{{- if not $name }}
{{- $name = $spec.schedulerName }}
{{- end }}
{{- end }}
{{- range $file := .Values.shippedProfiles }}
{{- if not $name }}
{{- $name = (($.Files.Get (printf "files/profiles/%s.yaml" $file) | fromYaml).spec | default dict).schedulerName }}
{{- end }}
{{- end }}
{{- if not $name }}
{{- fail "tests.schedulerName: no schedulerName the release serves (defaultSchedulerName is empty and no profile names one); set it, or tests.enabled: false" }}
{{- end }}
{{- $name }}
{{- end }}
