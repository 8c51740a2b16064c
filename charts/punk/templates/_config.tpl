{{/*
The non-secret environment of one component (the data of its ConfigMap), as YAML: the chart's settings
(punk.chartConfig), then <component>.env. Call with (dict "root" $ "component" "gateway" "values"
.Values.gateway). Secrets (keys, URLs) are env entries of the Deployment instead (punk.secretEnv).
*/}}
{{- define "punk.componentConfig" -}}
{{ include "punk.chartConfig" . }}
{{- range $name, $value := .values.env }}
{{ $name }}: {{ include "punk.string" $value | quote }}
{{- end }}
{{- end -}}

{{/* The settings the chart itself puts into one component's ConfigMap. Same arguments as punk.componentConfig. */}}
{{- define "punk.chartConfig" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $publicUrl := include "punk.publicUrl" $root -}}
PUNK_HOST: "0.0.0.0"
PUNK_PORT: "8080"
{{- /* /metrics on a port of its own: scrapers are admitted to it, not to the APIs (the ledger's holds tool arguments). */}}
PUNK_METRICS_PORT: "9090"
PUNK_LOG_LEVEL: {{ $v.logLevel | quote }}
OTEL_SERVICE_NAME: {{ printf "punk-%s" .component | quote }}
{{- if and $v.tracing.otlpEndpoint (ne .component "operator") }}
OTEL_EXPORTER_OTLP_ENDPOINT: {{ $v.tracing.otlpEndpoint | quote }}
OTEL_EXPORTER_OTLP_PROTOCOL: {{ $v.tracing.protocol | quote }}
OTEL_TRACES_SAMPLER: parentbased_traceidratio
OTEL_TRACES_SAMPLER_ARG: {{ include "punk.string" $v.tracing.samplerRatio | quote }}
{{- end }}
{{- if eq .component "mcp-front" }}
PUNK_TENANT: {{ $v.tenant | quote }}
PUNK_AUTH_MODE: {{ $v.auth.mode | quote }}
{{- /* The front serves the ledger API (/api/v1/runs…, /api/v1/ledger/…) to admins by passing it on to the ledger's Service. */}}
PUNK_LEDGER_URL: {{ printf "http://%s-ledger:8080" (include "punk.fullname" $root) | quote }}
{{- if $publicUrl }}
PUNK_PUBLIC_URL: {{ $publicUrl | quote }}
{{- end }}
{{- if $v.ingress.enabled }}
{{- /* One reverse proxy (the ingress controller) appends X-Forwarded-For/-Proto. */}}
PUNK_TRUST_PROXY: "1"
{{- end }}
{{- with $v.auth.issuer }}
PUNK_AUTH_ISSUER: {{ . | quote }}
{{- end }}
{{- with $v.auth.jwksUrl }}
PUNK_AUTH_JWKS_URL: {{ . | quote }}
{{- end }}
{{- with $v.auth.requiredScopes }}
PUNK_AUTH_REQUIRED_SCOPES: {{ join "," . | quote }}
{{- end }}
{{- with $v.auth.audiences }}
PUNK_AUTH_AUDIENCES: {{ join "," . | quote }}
{{- end }}
{{- else if eq .component "gateway" }}
PUNK_TENANT: {{ $v.tenant | quote }}
{{- /* The SSRF guard refuses private addresses with auth on, unless they lie in the Service or pod network (headless Services resolve to pods). */}}
PUNK_AUTH_MODE: {{ $v.auth.mode | quote }}
PUNK_UPSTREAM_ALLOWED_NETWORKS: {{ join "," (concat $v.cluster.serviceCidrs $v.cluster.podCidrs) | quote }}
{{- /* Servers come from the operator (bucket PUNK_MCP_SERVERS), not from manifests: an empty directory. */}}
PUNK_MANIFESTS: /var/run/punk/manifests
{{- else if eq .component "operator" }}
PUNK_OPERATOR_NAMESPACES: {{ join "," $v.operator.watchNamespaces | quote }}
PUNK_OPERATOR_LEASE_NAMESPACE: {{ $root.Release.Namespace | quote }}
PUNK_OPERATOR_LEASE_NAME: {{ printf "%s-operator" (include "punk.fullname" $root) | quote }}
PUNK_GATEWAY_NAMESPACE: {{ $root.Release.Namespace | quote }}
PUNK_GATEWAY_POD_LABELS: {{ printf "app.kubernetes.io/name=punk-gateway,app.kubernetes.io/instance=%s" $root.Release.Name | quote }}
PUNK_BRIDGE_IMAGE: {{ include "punk.image" (dict "root" $root "image" $v.bridge.image) | quote }}
PUNK_RUNNER_NPM_IMAGE: {{ include "punk.image" (dict "root" $root "image" $v.runner.npm.image) | quote }}
PUNK_RUNNER_PYPI_IMAGE: {{ include "punk.image" (dict "root" $root "image" $v.runner.pypi.image) | quote }}
PUNK_CLUSTER_DOMAIN: {{ $v.cluster.domain | quote }}
{{- if $publicUrl }}
PUNK_PUBLIC_URL: {{ $publicUrl | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The secret environment of one component: env entries from Secrets. Same arguments as punk.componentConfig. */}}
{{- define "punk.secretEnv" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{ include "punk.natsEnv" $root | trim }}
{{- if has .component (list "gateway" "governance" "ledger") }}
{{ include "punk.databaseEnv" $root | trim }}
{{- end }}
{{- if eq .component "gateway" }}
- name: PUNK_ENCRYPTION_KEY
  valueFrom:
    secretKeyRef: { name: {{ include "punk.keysSecret" $root | quote }}, key: {{ ternary $v.secrets.encryptionKeyKey "encryption-key" (ne $v.secrets.existingSecret "") | quote }} }
{{- end }}
{{- if eq .component "mcp-front" }}
- name: PUNK_SESSION_SIGNING_KEY
  valueFrom:
    secretKeyRef: { name: {{ include "punk.keysSecret" $root | quote }}, key: {{ ternary $v.secrets.sessionSigningKeyKey "session-signing-key" (ne $v.secrets.existingSecret "") | quote }} }
{{- with $v.auth.bootstrapAdminKey.existingSecret }}
- name: PUNK_AUTH_BOOTSTRAP_ADMIN_KEY
  valueFrom:
    secretKeyRef: { name: {{ . | quote }}, key: {{ $v.auth.bootstrapAdminKey.key | quote }} }
{{- end }}
{{- end }}
{{- end -}}
