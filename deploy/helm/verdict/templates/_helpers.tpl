{{/* The names of the chart's objects: <release>-verdict-<component>. */}}
{{- define "verdict.fullname" -}}
{{- printf "%s-verdict" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "verdict.labels" -}}
app.kubernetes.io/name: verdict
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/version: {{ include "verdict.tag" .root | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "verdict.selector" -}}
app.kubernetes.io/name: verdict
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "verdict.tag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{- define "verdict.image" -}}
{{- printf "%s/%s:%s" .root.Values.image.registry .name (include "verdict.tag" .root) -}}
{{- end -}}

{{/* The URL of a component's API inside the cluster, https when it has a TLS Secret. */}}
{{- define "verdict.url" -}}
{{- $c := index .root.Values .component -}}
{{- printf "%s://%s-%s.%s.svc:%d" (ternary "https" "http" (ne $c.tlsSecret "")) (include "verdict.fullname" .root) .component .root.Release.Namespace (int .port) -}}
{{- end -}}

{{/* The restricted Pod Security profile, for the pod and its container. */}}
{{- define "verdict.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "verdict.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Probes on /healthz and /readyz. */}}
{{- define "verdict.probes" -}}
startupProbe:
  httpGet: {path: /healthz, port: http, scheme: {{ .scheme }}}
  periodSeconds: 2
  failureThreshold: 30
livenessProbe:
  httpGet: {path: /healthz, port: http, scheme: {{ .scheme }}}
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: http, scheme: {{ .scheme }}}
  periodSeconds: 5
  failureThreshold: 2
{{- end -}}

{{/* The CA bundle the daemons trust in addition to their roots, as VERDICT_EXTRA_CA_FILE
(SSL_CERT_FILE would replace the roots, and the public servers would no longer verify). */}}
{{- define "verdict.caEnv" -}}
{{- if .Values.caBundle.configMap }}
- name: VERDICT_EXTRA_CA_FILE
  value: /etc/verdict/ca/{{ .Values.caBundle.key }}
{{- end }}
{{- end -}}
{{- define "verdict.caMount" -}}
{{- if .Values.caBundle.configMap }}
- {name: ca, mountPath: /etc/verdict/ca, readOnly: true}
{{- end }}
{{- end -}}
{{- define "verdict.caVolume" -}}
{{- if .Values.caBundle.configMap }}
- name: ca
  configMap: {name: {{ .Values.caBundle.configMap }}}
{{- end }}
{{- end -}}
