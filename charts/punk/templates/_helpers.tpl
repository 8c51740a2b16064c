{{/* The chart name, or nameOverride. */}}
{{- define "punk.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object's name: <release>-punk, or the release name when it already says punk. */}}
{{- define "punk.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "punk.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "punk.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: punk
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/*
Selector labels of one component's pods. app.kubernetes.io/name is punk-<component>: the operator's default
PUNK_GATEWAY_POD_LABELS names the gateway pods by it. Call with (dict "root" $ "component" "gateway").
*/}}
{{- define "punk.selectorLabels" -}}
app.kubernetes.io/name: punk-{{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* All labels of one component's objects. Call with (dict "root" $ "component" "gateway"). */}}
{{- define "punk.componentLabels" -}}
{{ include "punk.labels" .root }}
{{ include "punk.selectorLabels" . }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* An image reference: registry/repository:tag. Call with (dict "root" $ "image" .Values.gateway.image). */}}
{{- define "punk.image" -}}
{{- printf "%s/%s:%s" .root.Values.image.registry .image.repository (.image.tag | default .root.Values.image.tag | default .root.Chart.AppVersion) -}}
{{- end -}}

{{/* The public URL: publicUrl, else from ingress.host; empty when neither is set. */}}
{{- define "punk.publicUrl" -}}
{{- if .Values.publicUrl -}}
{{- .Values.publicUrl | trimSuffix "/" -}}
{{- else if and .Values.ingress.enabled .Values.ingress.host -}}
{{- printf "%s://%s" (ternary "https" "http" .Values.ingress.tls.enabled) .Values.ingress.host -}}
{{- end -}}
{{- end -}}

{{/* Name of the Secret holding PUNK_ENCRYPTION_KEY and PUNK_SESSION_SIGNING_KEY. */}}
{{- define "punk.keysSecret" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-keys" (include "punk.fullname" .)) -}}
{{- end -}}

{{/* Name of the chart's Secret of connection URLs (nats.url, postgres.url). */}}
{{- define "punk.connectionsSecret" -}}
{{- printf "%s-connections" (include "punk.fullname" .) -}}
{{- end -}}

{{/*
The salt of the pods' checksum/connections annotation (base64), kept in the connections Secret: generated once
(lookup), the same in every template of one render (memoized in .Values), so the annotation of URLs that may hold
passwords cannot be brute-forced by whoever can read pods.
*/}}
{{- define "punk.connectionsSalt" -}}
{{- if not (hasKey .Values "_connectionsSalt") -}}
{{- $existing := (lookup "v1" "Secret" .Release.Namespace (include "punk.connectionsSecret" .)).data | default dict -}}
{{- $_ := set .Values "_connectionsSalt" (get $existing "checksum-salt" | default (randAlphaNum 32 | b64enc)) -}}
{{- end -}}
{{- .Values._connectionsSalt -}}
{{- end -}}

{{/* Name of the Secret of the bundled PostgreSQL's password. */}}
{{- define "punk.postgresSecret" -}}
{{- printf "%s-postgres" (include "punk.fullname" .) -}}
{{- end -}}

{{/*
The env entry of PUNK_NATS_URL: the bundled NATS when enabled, else nats.existingSecret, else nats.url (the chart's
Secret of it). existingSecret wins over url because url has a default (the official NATS chart's Service).
*/}}
{{- define "punk.natsEnv" -}}
- name: PUNK_NATS_URL
{{- if .Values.nats.bundled.enabled }}
  value: {{ printf "nats://%s-nats.%s.svc:4222" (include "punk.fullname" .) .Release.Namespace | quote }}
{{- else if .Values.nats.existingSecret.name }}
  valueFrom:
    secretKeyRef: { name: {{ .Values.nats.existingSecret.name | quote }}, key: {{ .Values.nats.existingSecret.key | quote }} }
{{- else if .Values.nats.url }}
  valueFrom:
    secretKeyRef: { name: {{ include "punk.connectionsSecret" . | quote }}, key: nats-url }
{{- else }}
{{- fail "NATS is not configured: set nats.url, nats.existingSecret.name, or nats.bundled.enabled=true (development only)" }}
{{- end }}
{{- end -}}

{{/*
The env entries of PUNK_DATABASE_URL: the bundled PostgreSQL when enabled (its password first, which the URL
expands), else postgres.url when set (the chart's Secret of it), else postgres.existingSecret.
*/}}
{{- define "punk.databaseEnv" -}}
{{- if .Values.postgres.bundled.enabled }}
- name: PUNK_POSTGRES_PASSWORD
  valueFrom:
    secretKeyRef: { name: {{ include "punk.postgresSecret" . | quote }}, key: password }
- name: PUNK_DATABASE_URL
  value: {{ printf "postgres://punk:$(PUNK_POSTGRES_PASSWORD)@%s-postgres.%s.svc:5432/punk" (include "punk.fullname" .) .Release.Namespace | quote }}
{{- else if .Values.postgres.url }}
- name: PUNK_DATABASE_URL
  valueFrom:
    secretKeyRef: { name: {{ include "punk.connectionsSecret" . | quote }}, key: database-url }
{{- else if .Values.postgres.existingSecret.name }}
- name: PUNK_DATABASE_URL
  valueFrom:
    secretKeyRef: { name: {{ .Values.postgres.existingSecret.name | quote }}, key: {{ .Values.postgres.existingSecret.key | quote }} }
{{- else }}
{{- fail "PostgreSQL is not configured: set postgres.url, postgres.existingSecret.name, or postgres.bundled.enabled=true (development only)" }}
{{- end }}
{{- end -}}

{{/*
Whether the chart's Secret of connection URLs holds nats.url / postgres.url ("true" or ""): the same precedence as
punk.natsEnv (bundled, existingSecret, url) and punk.databaseEnv (bundled, url, existingSecret).
*/}}
{{- define "punk.natsUrlInSecret" -}}
{{- if and .Values.nats.url (not .Values.nats.bundled.enabled) (not .Values.nats.existingSecret.name) }}true{{ end -}}
{{- end -}}
{{- define "punk.postgresUrlInSecret" -}}
{{- if and .Values.postgres.url (not .Values.postgres.bundled.enabled) }}true{{ end -}}
{{- end -}}

{{/* Security context of every Punk container: non-root 65532, read-only root filesystem, no capabilities. */}}
{{- define "punk.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Security context of every Punk pod. */}}
{{- define "punk.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}
