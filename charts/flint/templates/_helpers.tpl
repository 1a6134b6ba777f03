{{/* The Flint image the control plane runs. */}}
{{- define "flint.image" -}}
{{ .Values.chart.image.repository }}:{{ .Values.chart.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Labels on everything the chart makes. */}}
{{- define "flint.labels" -}}
app.kubernetes.io/name: flint
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: flint-{{ .Chart.Version }}
{{- end -}}

{{/* The install values `flint server` runs with: the chart's values, in kubernetes mode, listening on the pod's address. */}}
{{- define "flint.serverValues" -}}
{{- $v := deepCopy .Values -}}
{{- $_ := set $v "mode" "kubernetes" -}}
{{- $_ := set $v "dataDir" "/var/lib/flint" -}}
{{- $_ := set $v.controller "host" "0.0.0.0" -}}
{{- $_ := set $v.router "host" "0.0.0.0" -}}
{{- $_ := set $v.ingress "provider" "kubernetes" -}}
{{- if not $v.kubernetes.controllerUrl -}}
{{- $_ := set $v.kubernetes "controllerUrl" (printf "http://controller.%s.svc.cluster.local" .Release.Namespace) -}}
{{- end -}}
{{- toYaml $v -}}
{{- end -}}
