{{- define "cloison.fullname" -}}{{ printf "%s-cloison" .Release.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "cloison.image" -}}{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{- end -}}
{{- define "cloison.labels" -}}
app.kubernetes.io/name: cloison
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}
{{- define "cloison.dbSecret" -}}{{ .Values.secrets.database.name | default (printf "%s-db" (include "cloison.fullname" .)) }}{{- end -}}
{{- define "cloison.keySecret" -}}{{ .Values.secrets.keys.name | default (printf "%s-keys" (include "cloison.fullname" .)) }}{{- end -}}
{{- define "cloison.metricsSecret" -}}{{ .Values.secrets.metrics.name | default (printf "%s-metrics" (include "cloison.fullname" .)) }}{{- end -}}
{{- define "cloison.prefillService" -}}{{ include "cloison.fullname" . }}-prefill{{- end -}}
{{/* Flags every node shares; the runtime URL comes from the environment (DATABASE_URL). */}}
{{- define "cloison.commonArgs" -}}
- --migrate=false
- --state-dir=/var/lib/cloison
- --issuer={{ .Values.node.issuer }}
- --audience={{ .Values.node.audience }}
- --kv-pages={{ .Values.node.kvPages }}
- --cluster-key=/etc/cloison/keys/cluster-key
- --db-runtime-password-file=/etc/cloison/db/runtime-password
- --tls-ca=/etc/cloison/tls/ca.crt
- --tls-cert=/etc/cloison/tls/tls.crt
- --tls-key=/etc/cloison/tls/tls.key
{{- if .Values.model.file }}
- --model=/models/{{ .Values.model.file }}
{{- end }}
{{- if .Values.model.name }}
- --model-name={{ .Values.model.name }}
{{- end }}
{{- with .Values.node.region }}
- --node-region={{ . }}
{{- end }}
{{- with .Values.node.tier }}
- --node-tier={{ . }}
{{- end }}
{{- with .Values.tracing.endpoint }}
- --otlp-endpoint={{ . }}
- --trace-sample-ratio={{ $.Values.tracing.sampleRatio }}
{{- if $.Values.tracing.insecure }}
- --otlp-insecure
{{- end }}
{{- end }}
- --metrics-addr=0.0.0.0:{{ .Values.metrics.port }}
- --metrics-token-file=/etc/cloison/metrics/token
{{- range .Values.node.extraArgs }}
- {{ . }}
{{- end }}
{{- end -}}
{{- define "cloison.env" -}}
- name: DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ include "cloison.dbSecret" . }}, key: runtime-url}}
- name: POD_IP
  valueFrom: {fieldRef: {fieldPath: status.podIP}}
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
{{- end -}}
{{- define "cloison.volumes" -}}
- name: state
  emptyDir: {}
- name: tmp
  emptyDir: {}
- name: keys
  secret: {secretName: {{ include "cloison.keySecret" . }}, defaultMode: 0400}
- name: db
  secret: {secretName: {{ include "cloison.dbSecret" . }}, defaultMode: 0400, items: [{key: runtime-password, path: runtime-password}]}
- name: tls
  secret: {secretName: {{ .Values.tls.secretName }}, defaultMode: 0400}
{{- if .Values.model.claimName }}
- name: models
  persistentVolumeClaim: {claimName: {{ .Values.model.claimName }}, readOnly: true}
{{- end }}
{{- end -}}
{{- define "cloison.mounts" -}}
- {name: state, mountPath: /var/lib/cloison}
- {name: tmp, mountPath: /tmp}
- {name: keys, mountPath: /etc/cloison/keys, readOnly: true}
- {name: db, mountPath: /etc/cloison/db, readOnly: true}
- {name: tls, mountPath: /etc/cloison/tls, readOnly: true}
{{- if .Values.model.claimName }}
- {name: models, mountPath: /models, readOnly: true}
{{- end }}
{{- end -}}
{{- define "cloison.resources" -}}
{{- $r := deepCopy (.res | default dict) -}}
{{- if gt (int .gpu) 0 -}}
{{- $lim := deepCopy (get $r "limits" | default dict) -}}
{{- $_ := set $lim "nvidia.com/gpu" (int .gpu) -}}
{{- $_ := set $r "limits" $lim -}}
{{- end -}}
{{- toYaml $r -}}
{{- end -}}
