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

{{/* What a component's Deployment selects its pods by, and its Service them: `include "flint.selectorLabels" (list . "router")`. */}}
{{- define "flint.selectorLabels" -}}
{{- $ctx := index . 0 -}}
app.kubernetes.io/name: flint
app.kubernetes.io/instance: {{ $ctx.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* Labels on a component's Deployment and pods: the chart's, and which component. */}}
{{- define "flint.componentLabels" -}}
{{ include "flint.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/*
The pods' annotation that restarts them when what `flint server` runs with
changes: the server values without the keys only the chart reads (replica
counts, the autoscaler, chart.*), so scaling the routers restarts nothing.
*/}}
{{- define "flint.valuesChecksum" -}}
{{- $v := include "flint.serverValues" . | fromYaml -}}
{{- $_ := unset $v "chart" -}}
{{- $_ := unset $v.router "replicas" -}}
{{- $_ := unset $v.router "autoscaling" -}}
{{- $_ := unset $v.executor "replicas" -}}
{{- toYaml $v | sha256sum -}}
{{- end -}}

{{/*
The container's command line for one role (`include "flint.args" (list . "router" "router.host")`):
the values file, the role, and with chart.listenOnPodIP the role's listener on the pod's IP.
*/}}
{{- define "flint.args" -}}
{{- $ctx := index . 0 -}}
- server
- -f
- /etc/flint/values.yaml
- --set
- role={{ index . 1 }}
{{- if $ctx.Values.chart.listenOnPodIP }}
- --set
- {{ index . 2 }}=$(POD_IP)
{{- end }}
{{- end -}}

{{/* Every component's environment. */}}
{{- define "flint.env" -}}
# Fission's executor and builder read this; Flint reads enableIstio from its values.
- name: ENABLE_ISTIO
  value: {{ .Values.enableIstio | quote }}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end -}}

{{/* The install values `flint server` runs with: the chart's values, in kubernetes mode, listening on the pod's address. */}}
{{- define "flint.serverValues" -}}
{{- $v := deepCopy .Values -}}
{{- $_ := set $v "mode" "kubernetes" -}}
{{- $_ := set $v "dataDir" "/var/lib/flint" -}}
{{- $_ := set $v.controller "host" "0.0.0.0" -}}
{{- $_ := set $v.router "host" "0.0.0.0" -}}
{{- $_ := set $v.executor "host" "0.0.0.0" -}}
{{- $_ := set $v.ingress "provider" "kubernetes" -}}
{{- if not $v.kubernetes.controllerUrl -}}
{{- $_ := set $v.kubernetes "controllerUrl" (printf "http://controller.%s.svc.cluster.local" .Release.Namespace) -}}
{{- end -}}
{{- if not $v.kubernetes.routerUrl -}}
{{- $_ := set $v.kubernetes "routerUrl" (printf "http://router.%s.svc.cluster.local" .Release.Namespace) -}}
{{- end -}}
{{- toYaml $v -}}
{{- end -}}
