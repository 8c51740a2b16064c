{{/*
The value to set instead of each environment variable the chart writes itself (ConfigMap keys and env entries),
as YAML; "" marks a variable the chart fixes.
*/}}
{{- define "punk.chartEnvSources" -}}
PUNK_HOST: ""
PUNK_PORT: ""
PUNK_METRICS_PORT: ""
PUNK_INSTANCE_ID: ""
PUNK_LOG_LEVEL: logLevel
PUNK_MCP_PATH: ""
OTEL_SERVICE_NAME: ""
OTEL_EXPORTER_OTLP_ENDPOINT: tracing.otlpEndpoint
OTEL_EXPORTER_OTLP_PROTOCOL: tracing.protocol
OTEL_TRACES_SAMPLER: tracing.samplerRatio
OTEL_TRACES_SAMPLER_ARG: tracing.samplerRatio
PUNK_TENANT: tenant
PUNK_AUTH_MODE: auth.mode
PUNK_PUBLIC_URL: publicUrl
PUNK_TRUST_PROXY: ingress.enabled
PUNK_AUTH_ISSUER: auth.issuer
PUNK_AUTH_JWKS_URL: auth.jwksUrl
PUNK_AUTH_REQUIRED_SCOPES: auth.requiredScopes
PUNK_AUTH_AUDIENCES: auth.audiences
PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: auth.bootstrapAdminKey.existingSecret
PUNK_UPSTREAM_ALLOWED_NETWORKS: cluster.serviceCidrs and cluster.podCidrs
PUNK_MANIFESTS: ""
PUNK_OPERATOR_NAMESPACES: operator.watchNamespaces
PUNK_OPERATOR_LEASE_NAMESPACE: ""
PUNK_OPERATOR_LEASE_NAME: ""
PUNK_GATEWAY_NAMESPACE: ""
PUNK_GATEWAY_POD_LABELS: ""
PUNK_BRIDGE_IMAGE: bridge.image
PUNK_RUNNER_NPM_IMAGE: runner.npm.image
PUNK_RUNNER_PYPI_IMAGE: runner.pypi.image
PUNK_CLUSTER_DOMAIN: cluster.domain
PUNK_NATS_URL: nats.url or nats.existingSecret
PUNK_DATABASE_URL: postgres.url or postgres.existingSecret
PUNK_POSTGRES_PASSWORD: ""
PUNK_ENCRYPTION_KEY: secrets.existingSecret
PUNK_SESSION_SIGNING_KEY: secrets.existingSecret
{{- end -}}

{{/*
Fails when <component>.env or <component>.extraEnv names a variable the chart sets for this component (a duplicate
ConfigMap key, or an env entry that silently overrides the chart's), naming the value to set instead; also when
extraEnv repeats a key of env. Call with (dict "root" $ "key" "mcpFront" "values" .Values.mcpFront "config"
<the chart's ConfigMap data as YAML> "secretEnv" <the chart's env entries as YAML>).
*/}}
{{- define "punk.checkEnv" -}}
{{- $sources := include "punk.chartEnvSources" . | fromYaml }}
{{- $chartKeys := keys (.config | fromYaml) }}
{{- range (.secretEnv | fromYamlArray) }}{{ $chartKeys = append $chartKeys .name }}{{ end }}
{{- $chartKeys = append $chartKeys "PUNK_INSTANCE_ID" }}
{{- /* The Ingress, NOTES and the helm test reach the endpoint at /mcp. */}}
{{- $chartKeys = append $chartKeys "PUNK_MCP_PATH" }}
{{- $userKeys := list }}
{{- $env := .values.env | default dict }}
{{- range $name, $_ := $env }}{{ $userKeys = append $userKeys (list (printf "%s.env.%s" $.key $name) $name) }}{{ end }}
{{- range (.values.extraEnv | default list) }}
{{- if hasKey $env .name }}
{{- fail (printf "%s.extraEnv names %s, which %s.env sets too: keep one" $.key .name $.key) }}
{{- end }}
{{- $userKeys = append $userKeys (list (printf "%s.extraEnv %s" $.key .name) .name) }}
{{- end }}
{{- range $userKeys }}
{{- $name := index . 1 }}
{{- if has $name $chartKeys }}
{{- $source := get $sources $name }}
{{- fail (printf "%s: %s is set by the chart; %s" (index . 0) $name (ternary (printf "set %s instead" $source) "the chart fixes it, remove it" (ne $source ""))) }}
{{- end }}
{{- end }}
{{- end -}}

{{/* A value as a string, whole numbers without an exponent (YAML reads 10000000 as a float: 1e+07 otherwise). */}}
{{- define "punk.string" -}}
{{- if and (kindIs "float64" .) (eq . (floor .)) }}{{ printf "%d" (int64 .) }}{{ else }}{{ toString . }}{{ end -}}
{{- end -}}
