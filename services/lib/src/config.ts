import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { z } from 'zod';
import { PunkError } from './errors.js';
import { isLoopbackAddress } from './service/hosts.js';

/**
 * A whole number from `min` to `max` (or `min` and above), coerced from its environment text; every failure
 * (not a number, a fraction, out of range) reads as one sentence, such as "must be an integer from 1 to 1000".
 */
function integer(min: number, max?: number) {
  const message =
    max === undefined
      ? min === 1
        ? 'must be a positive integer'
        : `must be an integer of ${min} or more`
      : `must be an integer from ${min} to ${max}`;
  const schema = z.coerce.number({ error: message }).int({ error: message }).min(min, { error: message });
  return max === undefined ? schema : schema.max(max, { error: message });
}
const port = integer(0, 65535);
const positiveInt = integer(1);
/** `true` or `false` (also `1`/`0`, `yes`/`no`, `on`/`off`). */
const boolean = z.stringbool({ error: 'must be true or false' });
/** A comma-separated list; blanks around entries and empty entries are dropped. */
/** The entries of a comma-separated setting: trimmed, empty ones dropped. */
const splitList = (value: string): string[] =>
  value
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
const commaSeparated = z.string().transform(splitList);
/** An encryption key as `PUNK_ENCRYPTION_KEY` spells it: `[<keyId>:]<32 bytes in base64 or base64url>`. */
const encryptionKeySpec = z
  .string()
  .regex(
    /^([A-Za-z0-9._-]{1,64}:)?[A-Za-z0-9+/_-]+={0,2}$/,
    'must be [<keyId>:]<32 bytes in base64>, e.g. the output of `openssl rand -base64 32`',
  )
  .refine(
    (value) => Buffer.from(value.slice(value.lastIndexOf(':') + 1), 'base64').length === 32,
    'must decode to exactly 32 bytes (AES-256)',
  );
const logLevel = z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);

/** A string holding JSON that must match `schema`. */
function jsonOf<T extends z.ZodType>(schema: T) {
  return z
    .string()
    .transform((value, ctx) => {
      try {
        return JSON.parse(value) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be JSON' });
        return z.NEVER;
      }
    })
    .pipe(schema);
}

/**
 * Paths other routes own on the same listener (health, admin and ledger APIs, per-server endpoints, the HTTP+SSE
 * endpoint, OAuth metadata, metrics): `PUNK_MCP_PATH` may be none of them nor lie under one. Express matches paths
 * case-insensitively, so the check does too.
 */
const RESERVED_PATH_PREFIXES = ['/healthz', '/readyz', '/metrics', '/api', '/servers', '/sse', '/.well-known'];

/** Whether `path` is a reserved prefix or lies under one. */
function isReservedPath(path: string): boolean {
  const lower = path.toLowerCase();
  return RESERVED_PATH_PREFIXES.some((prefix) => lower === prefix || lower.startsWith(`${prefix}/`));
}

/** Whether a string is a CIDR: an IPv4 address with a prefix of 0-32, or an IPv6 address with 0-128. */
function isCidr(value: string): boolean {
  const match = /^(.+)\/(\d{1,3})$/.exec(value);
  const family = match ? isIP(match[1]!) : 0;
  return family !== 0 && Number(match![2]) <= (family === 4 ? 32 : 128);
}

/** Whether a string is a serialized origin (RFC 6454 §6.2): `scheme://host[:port]` and nothing else. */
function isOrigin(value: string): boolean {
  try {
    return new URL(value).origin === value.replace(/\/$/, '');
  } catch {
    return false;
  }
}

/**
 * Every setting Punk reads from the environment, with its `PUNK_*` variable,
 * default and validation. docs/configuration.md mirrors this table.
 */
export const configSchema = z.object({
  /** `PUNK_LOG_LEVEL`: pino level. */
  logLevel: logLevel.default('info'),
  /** `PUNK_HOST`: address the HTTP listener binds. */
  host: z.string().min(1).default('127.0.0.1'),
  /** `PUNK_PORT`: port of the HTTP listener (0 picks a free one). */
  port: port.default(4100),
  /**
   * `PUNK_METRICS_PORT`: service processes serve `/metrics` on a listener of their own on this port (same host)
   * instead of `PUNK_PORT`'s, so scrapers can be admitted to the metrics alone. Unset: on `PUNK_PORT`.
   */
  metricsPort: port.optional(),
  /** `PUNK_DATA_DIR`: PGlite directory for the embedded database. */
  dataDir: z.string().min(1).default('.punk/data'),
  /** `PUNK_DATABASE_URL`: a Postgres URL; when set, replaces the embedded PGlite database. */
  databaseUrl: z.string().url('must be a URL').optional(),
  /**
   * `PUNK_LEDGER_URL`: an mcp-front process serves the ledger API (`/api/v1/runs…`, `/api/v1/ledger/…`) by passing
   * admins' requests on to the ledger replica at this base URL (`http://punk-ledger:8080`); unset, it serves no ledger paths.
   */
  ledgerUrl: z.string().url('must be a URL').optional(),
  /** `PUNK_MANIFESTS`: directory of McpServer manifests served by `punk up`. */
  manifests: z.string().min(1).default('examples'),
  /** `PUNK_TENANT`: tenant (namespace) of manifests that name none. */
  tenant: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a DNS label (lower-case letters, digits, -)')
    .default('default'),
  /** `PUNK_HEADERS_TIMEOUT_MS`: time a client has to send a request's head (line and headers) once it started, in milliseconds (then 408 and close). */
  headersTimeoutMs: positiveInt.default(10_000),
  /** `PUNK_REQUEST_TIMEOUT_MS`: time a client has to send a whole request, body included, in milliseconds (then 408 and close; responses such as SSE streams live on). */
  requestTimeoutMs: positiveInt.default(30_000),
  /** `PUNK_MAX_CONNECTIONS`: most TCP connections the HTTP listener holds open; more are closed at once. */
  maxConnections: positiveInt.default(4096),
  /** `PUNK_MAX_CONNECTIONS_PER_ADDRESS`: most TCP connections from one client address (not applied when `PUNK_TRUST_PROXY` > 0); more are closed at once. */
  maxConnectionsPerAddress: positiveInt.default(256),
  /** `PUNK_CONNECTION_IDLE_TIMEOUT_MS`: a TCP connection that sends no byte for this long is closed, in milliseconds. */
  connectionIdleTimeoutMs: positiveInt.default(10_000),
  /** `PUNK_MAX_BODY_BYTES`: largest accepted HTTP request body, in bytes. */
  maxBodyBytes: positiveInt.default(1024 * 1024),
  /**
   * `PUNK_MAX_RESULT_BYTES`: largest message the bus carries (a result, a resource, a request's arguments), as JSON
   * in UTF-8 bytes; past NATS's `max_payload` it travels in parts. A larger tool result is a tool error, a larger
   * resource a JSON-RPC error, each naming this limit.
   */
  maxResultBytes: positiveInt.default(32 * 1024 * 1024),
  /** `PUNK_CALL_TIMEOUT_MS`: deadline of one call to a server whose manifest sets no `spec.timeout`, in milliseconds. */
  callTimeoutMs: positiveInt.default(60_000),
  /** `PUNK_KEEPALIVE_MS`: interval of SSE keep-alive comments on every stream mcp-front answers with, in milliseconds. */
  keepAliveMs: positiveInt.default(15_000),
  /** `PUNK_SERVER_START_TIMEOUT_MS`: how long a server may take to start and answer its handshake, in milliseconds. */
  serverStartTimeoutMs: positiveInt.default(30_000),
  /** `PUNK_NATS_URL`: NATS server URL (distributed mode). */
  natsUrl: z.string().min(1).optional(),
  /** `PUNK_SHUTDOWN_TIMEOUT_MS`: how long a service may take, after SIGTERM, to finish in-flight work before it stops anyway, in milliseconds. */
  shutdownTimeoutMs: positiveInt.default(10_000),
  /**
   * `PUNK_SESSION_SIGNING_KEY`: HMAC-SHA256 key (at least 32 characters) signing the `requestState` mcp-front
   * mints for 2026-07-28 clients; the same on every front replica. Unset: a random key per process (retries
   * that reach another process fail).
   */
  sessionSigningKey: z.string().min(32, 'must be at least 32 characters').optional(),
  // mcp-front: the MCP endpoint (docs/configuration.md, endpoint options).
  /** `PUNK_MCP_PATH`: path of the aggregated MCP endpoint (per-server endpoints stay `/servers/…/mcp`). */
  mcpPath: z
    .string()
    .regex(/^\/[A-Za-z0-9._~/-]*$/, 'must be an absolute URL path such as /mcp')
    .refine((path) => !isReservedPath(path), `must not be or lie under a path Punk serves itself: ${RESERVED_PATH_PREFIXES.join(', ')}`)
    .default('/mcp'),
  /** `PUNK_SERVER_NAME`: `serverInfo.name` the endpoint reports to clients. */
  serverName: z.string().min(1).default('punk'),
  /** `PUNK_SERVER_TITLE`: `serverInfo.title` (display name). */
  serverTitle: z.string().min(1).optional(),
  /** `PUNK_SERVER_VERSION`: `serverInfo.version`. */
  serverVersion: z.string().min(1).default('0.1.0'),
  /** `PUNK_SERVER_DESCRIPTION`: `serverInfo.description`. */
  serverDescription: z.string().min(1).optional(),
  /** `PUNK_SERVER_WEBSITE_URL`: `serverInfo.websiteUrl`. */
  serverWebsiteUrl: z.string().url('must be a URL').optional(),
  /** `PUNK_SERVER_ICONS`: `serverInfo.icons`, a JSON array of `{ src, mimeType?, sizes?, theme? }` (MCP 2025-11-25 Icon). */
  serverIcons: jsonOf(
    z.array(
      z
        .object({
          src: z.string().url('must be a URL'),
          mimeType: z.string().optional(),
          sizes: z.array(z.string()).optional(),
          theme: z.enum(['light', 'dark']).optional(),
        })
        .strict(),
    ),
  ).optional(),
  /** `PUNK_SERVER_INSTRUCTIONS`: instructions sent to clients in place of the upstreams' own. */
  serverInstructions: z.string().min(1).optional(),
  /** `PUNK_ALLOWED_ORIGINS`: comma-separated browser origins (`https://app.example.com`) allowed besides the endpoint's own; also the CORS allow-list. */
  allowedOrigins: commaSeparated
    .pipe(z.array(z.string().refine(isOrigin, 'each entry must be an origin: scheme://host[:port], no path')))
    .default([]),
  /**
   * `PUNK_ALLOWED_HOSTS`: comma-separated host names (`punk.example.com`, `[::1]`) the MCP endpoint answers in
   * `Host`, on any port; others get 403 (DNS-rebinding protection). Unset: on a loopback `PUNK_HOST`, `localhost`,
   * `127.0.0.1` and `[::1]` plus the host of `PUNK_PUBLIC_URL`; on other addresses any host.
   */
  allowedHosts: commaSeparated
    .pipe(z.array(z.string().regex(/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)$/, 'each entry must be a host name, without a port')))
    .optional(),
  /** `PUNK_SESSION_TTL_MS`: idle time after which a 2025-era session expires, in milliseconds. */
  sessionTtlMs: positiveInt.default(30 * 60_000),
  /** `PUNK_MAX_SESSIONS`: most 2025-era sessions created or used within one session TTL, cluster-wide (503 with Retry-After above it). */
  maxSessions: positiveInt.default(10_000),
  /** `PUNK_MAX_SESSIONS_PER_PRINCIPAL`: most 2025-era sessions one principal (an anonymous caller: one client address) holds, cluster-wide (429 with Retry-After above it). */
  maxSessionsPerPrincipal: positiveInt.default(1000),
  /** `PUNK_INITIALIZE_RATE_LIMIT`: most `initialize` requests per client address per minute (429 above it). */
  initializeRateLimit: positiveInt.default(30),
  /** `PUNK_MAX_LISTEN_STREAMS`: most 2026-07-28 `subscriptions/listen` streams open on one front replica (429 above it). */
  maxListenStreams: positiveInt.default(1024),
  /** `PUNK_MAX_LISTEN_STREAMS_PER_PRINCIPAL`: most `subscriptions/listen` streams one principal (an anonymous caller: one client address) holds open on one front replica (429 above it). */
  maxListenStreamsPerPrincipal: positiveInt.default(64),
  /** `PUNK_RESPONSE_MODE`: how POST answers are sent: `auto` (JSON unless the call streams), `json`, `always` (SSE). */
  responseMode: z.enum(['auto', 'json', 'always']).default('auto'),
  /** `PUNK_PAGE_SIZE`: items per page of list results. */
  pageSize: integer(1, 1000).default(200),
  /** `PUNK_TOOL_TIMEOUTS`: per-tool deadlines, comma-separated `server__tool=ms`; others use `PUNK_CALL_TIMEOUT_MS`. */
  toolTimeouts: z
    .string()
    .transform((value, ctx) => {
      const out: Record<string, number> = {};
      for (const entry of value
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '')) {
        const match = /^([^=\s]+__[^=\s]+)=(\d+)$/.exec(entry);
        if (!match || Number(match[2]) <= 0) {
          ctx.addIssue({ code: 'custom', message: `entry ${JSON.stringify(entry)} must be server__tool=<positive milliseconds>` });
          return z.NEVER;
        }
        out[match[1]!] = Number(match[2]);
      }
      return out;
    })
    .default({}),
  /** `PUNK_LOGGING_CAPABILITY`: whether the endpoint advertises `logging` (2025 sessions: `logging/setLevel`; 2026 requests: the `_meta` log level) (`true`/`false`). */
  loggingCapability: boolean.default(true),
  /** `PUNK_TRUST_PROXY`: how many reverse proxies in front append to `X-Forwarded-For`/`-Proto` (0: use the socket's address and scheme). */
  trustProxy: integer(0, 10).default(0),
  // Who may call (docs/authentication.md); cross-field rules are checked by mcp-front's authOptionsFromConfig.
  /** `PUNK_AUTH_MODE`: `off` (every caller is the tenant's anonymous principal) or `on` (a bearer token is required). */
  authMode: z.enum(['off', 'on']).default('off'),
  /** `PUNK_PUBLIC_URL`: the URL clients reach Punk at (`https://punk.example.com`), behind any ingress; required when `PUNK_AUTH_MODE=on`. */
  publicUrl: z
    .string()
    .url('must be a URL')
    .refine((v) => /^https?:/.test(v), 'must be an http or https URL')
    .optional(),
  /** `PUNK_AUTH_ADMIN_SCOPE`: scope that grants the admin APIs (`/api/v1/…`) in the caller's own tenant: a tenant admin. */
  authAdminScope: z.string().min(1).default('punk:admin'),
  /** `PUNK_AUTH_PLATFORM_ADMIN_SCOPE`: scope that grants the admin APIs in every tenant, and minting keys that carry it: a platform admin. */
  authPlatformAdminScope: z.string().min(1).default('punk:platform-admin'),
  /** `PUNK_AUTH_BOOTSTRAP_ADMIN_KEY`: a bearer token (at least 32 characters) that acts as a platform admin, to create the first API keys. */
  authBootstrapAdminKey: z.string().min(32, 'must be at least 32 characters').optional(),
  /** `PUNK_AUTH_REQUIRED_SCOPES`: comma-separated scopes every MCP request's token must grant. */
  authRequiredScopes: commaSeparated.default([]),
  /** `PUNK_AUTH_ISSUER`: the OAuth authorization server; tokens' `iss` must equal it, and the resource metadata names it. */
  authIssuer: z.string().url('must be a URL').optional(),
  /** `PUNK_AUTH_JWKS_URL`: JWKS of the issuer; JWT access tokens are verified with its keys (refetched on an unknown `kid`). */
  authJwksUrl: z.string().url('must be a URL').optional(),
  /** `PUNK_AUTH_JWT_KEY`: one static public key verifying JWT access tokens, as PEM (SPKI) or JWK JSON. */
  authJwtKey: z.string().min(1).optional(),
  /** `PUNK_AUTH_INTROSPECTION_URL`: RFC 7662 token introspection endpoint, for opaque access tokens. */
  authIntrospectionUrl: z.string().url('must be a URL').optional(),
  /** `PUNK_AUTH_INTROSPECTION_CLIENT_ID`: client id Punk authenticates to the introspection endpoint with (HTTP Basic). */
  authIntrospectionClientId: z.string().min(1).optional(),
  /** `PUNK_AUTH_INTROSPECTION_CLIENT_SECRET`: its client secret. */
  authIntrospectionClientSecret: z.string().min(1).optional(),
  /** `PUNK_OAUTH_CLIENT_ID`: Punk's own OAuth client at `PUNK_AUTH_ISSUER`, for RFC 8693 token exchange (`spec.auth.tokenExchange`). */
  oauthClientId: z.string().min(1).optional(),
  /** `PUNK_OAUTH_CLIENT_SECRET`: its client secret (HTTP Basic at the token endpoint, RFC 6749 §2.3.1). */
  oauthClientSecret: z.string().min(1).optional(),
  /** `PUNK_AUTH_AUDIENCES`: comma-separated accepted token audiences; empty: the endpoint's canonical URL or `PUNK_PUBLIC_URL` (RFC 8707). */
  authAudiences: commaSeparated.default([]),
  /** `PUNK_AUTH_ALGORITHMS`: comma-separated JWS algorithms accepted on JWT access tokens (`none` is never accepted). */
  authAlgorithms: commaSeparated
    .pipe(
      z
        .array(z.string().refine((alg) => alg.toLowerCase() !== 'none', 'alg none is never accepted'))
        .min(1, 'must name at least one algorithm'),
    )
    .default(['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']),
  /** `PUNK_AUTH_CLOCK_TOLERANCE_MS`: clock skew allowed on `exp`/`nbf`/`iat`, in milliseconds. */
  authClockToleranceMs: integer(0).default(30_000),
  /** `PUNK_AUTH_TENANT_CLAIM`: token claim naming the caller's tenant; unset: tokens are for the front's tenant. */
  authTenantClaim: z.string().min(1).optional(),
  /** `PUNK_AUTH_GROUPS_CLAIM`: token claim holding the caller's groups (an array, or a space-separated string). */
  authGroupsClaim: z.string().min(1).default('groups'),
  /**
   * `PUNK_DASHBOARD_OAUTH_CLIENT_ID`: the dashboard's public client (no secret) at `PUNK_AUTH_ISSUER`; set, the
   * dashboard offers "Sign in with <issuer>" (authorization code with PKCE, docs/dashboard.md).
   */
  dashboardOauthClientId: z.string().min(1).optional(),
  /** `PUNK_DASHBOARD_OAUTH_SCOPES`: comma-separated scopes the dashboard asks for; empty: the admin scope and `PUNK_AUTH_REQUIRED_SCOPES`. */
  dashboardOauthScopes: commaSeparated.default([]),
  // gateway: credentials, egress, pool, tool pinning (docs/configuration.md, gateway options).
  /**
   * `PUNK_ENCRYPTION_KEY`: the key that encrypts credentials at rest (AES-256-GCM): 32 bytes in base64 or
   * base64url, optionally prefixed `<keyId>:`. The key id stored with each record defaults to the first 16 hex
   * digits of the key's SHA-256. Unset: the credentials API answers 503 and `cred:` references do not resolve.
   */
  encryptionKey: encryptionKeySpec.optional(),
  /** `PUNK_ENCRYPTION_PREVIOUS_KEYS`: comma-separated keys (same form) that still decrypt records written before a rotation. */
  encryptionPreviousKeys: commaSeparated.pipe(z.array(encryptionKeySpec)).default([]),
  /**
   * `PUNK_UPSTREAM_ALLOWED_NETWORKS`: comma-separated CIDRs (`10.96.0.0/12`, `fd00::/8`) that http registrations
   * may reach even with authentication on, when the SSRF guard would refuse them (the cluster's own networks).
   */
  upstreamAllowedNetworks: commaSeparated
    .pipe(
      z.array(
        z.string().refine(isCidr, 'each entry must be a CIDR such as 10.0.0.0/8 or fd00::/8 (an address and a prefix length it can have)'),
      ),
    )
    .default([]),
  /** `PUNK_UPSTREAM_MAX_CONCURRENT_CALLS`: most calls in flight to one server from one gateway replica (more wait in its queue). */
  upstreamMaxConcurrentCalls: positiveInt.default(32),
  /** `PUNK_UPSTREAM_MAX_QUEUED_CALLS`: most calls waiting for a slot per server and gateway replica (more fail at once with `ServerBusy`; 0: no queue). */
  upstreamMaxQueuedCalls: integer(0).default(128),
  /** `PUNK_UPSTREAM_QUEUE_TIMEOUT_MS`: longest wait of a queued call for a slot, in milliseconds (then `ServerBusy` with a retry hint). */
  upstreamQueueTimeoutMs: positiveInt.default(10_000),
  /** `PUNK_UPSTREAM_MAX_CALLS_PER_PRINCIPAL`: most calls of one authenticated principal in flight or queued per server and gateway replica (more fail at once with `ServerBusy`). */
  upstreamMaxCallsPerPrincipal: positiveInt.default(64),
  /** `PUNK_WORKFLOW_MAX_NODES`: most nodes one workflow run executes (docs/workflows.md "Runs"). */
  workflowMaxNodes: positiveInt.default(200),
  /** `PUNK_WORKFLOW_MAX_RUN_MS`: longest a workflow run may take, in milliseconds. */
  workflowMaxRunMs: positiveInt.default(5 * 60_000),
  /** `PUNK_WORKFLOW_MAX_RESULT_BYTES`: largest result a workflow node saves, and largest result of a run, as JSON in bytes. */
  workflowMaxResultBytes: positiveInt.default(1024 * 1024),
  /**
   * `PUNK_LEDGER_MAX_PENDING` (`punk up`): most ledger events appended and not yet committed to the database at once;
   * an append past it waits (back-pressure). Also the most events one commit writes.
   */
  ledgerMaxPending: positiveInt.default(1000),
  /** `PUNK_UPSTREAM_IDLE_TIMEOUT_MS`: idle time after which a pooled upstream connection is closed, in milliseconds. */
  upstreamIdleTimeoutMs: positiveInt.default(5 * 60_000),
  /**
   * `PUNK_TOOL_PINNING`: what happens when a tool's definition changes from the one first seen (`serve` the new one,
   * `hide` it until an admin accepts it, or require `approval` per call); a server's `spec.tools.pinning` wins.
   */
  toolPinning: z.enum(['serve', 'hide', 'approval']).default('hide'),
  /** `PUNK_INSTANCE_ID`: name of this replica in logs and NATS connection names (default `<hostname>-<pid>`). */
  instanceId: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/, 'must be letters, digits, ".", "_" or "-"')
    .default(() => `${hostname()}-${process.pid}`),
  // operator: what it watches and what it makes (docs/configuration.md, operator options).
  /** `PUNK_OPERATOR_NAMESPACES`: comma-separated namespaces whose McpServer, McpCredential and McpPolicy objects the operator reconciles; empty: every namespace. */
  operatorNamespaces: commaSeparated
    .pipe(z.array(z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'each entry must be a namespace name (a DNS label)')))
    .default([]),
  /** `PUNK_GATEWAY_NAMESPACE`: namespace of the gateway pods, the only peers a server pod's NetworkPolicy admits. */
  gatewayNamespace: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a namespace name (a DNS label)')
    .default('punk-system'),
  /** `PUNK_GATEWAY_POD_LABELS`: labels of the gateway pods, comma-separated `key=value`. */
  gatewayPodLabels: z
    .string()
    .transform((value, ctx) => {
      const labels: Record<string, string> = {};
      for (const entry of splitList(value)) {
        const match = /^([A-Za-z0-9./_-]+)=([A-Za-z0-9._-]*)$/.exec(entry);
        if (!match) {
          ctx.addIssue({ code: 'custom', message: `entry ${JSON.stringify(entry)} must be key=value (a Kubernetes label)` });
          return z.NEVER;
        }
        labels[match[1]!] = match[2]!;
      }
      return labels;
    })
    .default({ 'app.kubernetes.io/name': 'punk-gateway' }),
  /** `PUNK_BRIDGE_IMAGE`: image of the bridge container that serves a stdio server's pod over Streamable HTTP. */
  bridgeImage: z.string().min(1).default('ghcr.io/punk-dev/punk-bridge:0.1.0'),
  /** `PUNK_RUNNER_NPM_IMAGE`: image that runs an McpServer's npm `package` (node, npx and the bridge). */
  runnerNpmImage: z.string().min(1).default('ghcr.io/punk-dev/punk-runner-npm:0.1.0'),
  /** `PUNK_RUNNER_PYPI_IMAGE`: image that runs an McpServer's PyPI `package` (uv, uvx and the bridge). */
  runnerPypiImage: z.string().min(1).default('ghcr.io/punk-dev/punk-runner-pypi:0.1.0'),
  /** `PUNK_RUNNER_NPM_REGISTRIES`: comma-separated `host[:port]` an npm `package` server may reach to download its package (a mirror instead of the public registry). */
  runnerNpmRegistries: commaSeparated
    .pipe(z.array(z.string().min(1)).min(1, 'must name at least one host'))
    .default(['registry.npmjs.org:443']),
  /** `PUNK_RUNNER_PYPI_REGISTRIES`: comma-separated `host[:port]` a PyPI `package` server may reach to download its package. */
  runnerPypiRegistries: commaSeparated
    .pipe(z.array(z.string().min(1)).min(1, 'must name at least one host'))
    .default(['pypi.org:443', 'files.pythonhosted.org:443']),
  /** `PUNK_CLUSTER_DOMAIN`: the cluster's DNS domain, in the Service URLs the gateway connects to. */
  clusterDomain: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be a DNS domain such as cluster.local')
    .default('cluster.local'),
  /** `PUNK_OPERATOR_LEASE_NAMESPACE`: namespace of the operator's leader-election Lease. */
  operatorLeaseNamespace: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a namespace name (a DNS label)')
    .default('punk-system'),
  /** `PUNK_OPERATOR_LEASE_NAME`: name of that Lease (coordination.k8s.io/v1). */
  operatorLeaseName: z
    .string()
    .regex(/^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$/, 'must be a DNS subdomain name')
    .default('punk-operator'),
  /** `PUNK_OPERATOR_RESYNC_MS`: how often every object is reconciled again and orphaned bucket entries are swept, in milliseconds. */
  operatorResyncMs: positiveInt.default(5 * 60_000),
  /** `PUNK_OPERATOR_WORKERS`: most objects reconciled at once. */
  operatorWorkers: integer(1, 64).default(4),
  /** `PUNK_OPERATOR_RECONCILE_TIMEOUT_MS`: longest one reconcile may take before it counts as failed and is retried, in milliseconds. */
  operatorReconcileTimeoutMs: positiveInt.default(60_000),
});

/** Validated configuration. */
export type PunkConfig = z.infer<typeof configSchema>;

const envNames: Record<keyof PunkConfig, string> = {
  logLevel: 'PUNK_LOG_LEVEL',
  host: 'PUNK_HOST',
  port: 'PUNK_PORT',
  metricsPort: 'PUNK_METRICS_PORT',
  dataDir: 'PUNK_DATA_DIR',
  databaseUrl: 'PUNK_DATABASE_URL',
  ledgerUrl: 'PUNK_LEDGER_URL',
  manifests: 'PUNK_MANIFESTS',
  tenant: 'PUNK_TENANT',
  maxBodyBytes: 'PUNK_MAX_BODY_BYTES',
  maxResultBytes: 'PUNK_MAX_RESULT_BYTES',
  callTimeoutMs: 'PUNK_CALL_TIMEOUT_MS',
  keepAliveMs: 'PUNK_KEEPALIVE_MS',
  serverStartTimeoutMs: 'PUNK_SERVER_START_TIMEOUT_MS',
  natsUrl: 'PUNK_NATS_URL',
  shutdownTimeoutMs: 'PUNK_SHUTDOWN_TIMEOUT_MS',
  instanceId: 'PUNK_INSTANCE_ID',
  authMode: 'PUNK_AUTH_MODE',
  publicUrl: 'PUNK_PUBLIC_URL',
  authAdminScope: 'PUNK_AUTH_ADMIN_SCOPE',
  authPlatformAdminScope: 'PUNK_AUTH_PLATFORM_ADMIN_SCOPE',
  authBootstrapAdminKey: 'PUNK_AUTH_BOOTSTRAP_ADMIN_KEY',
  authRequiredScopes: 'PUNK_AUTH_REQUIRED_SCOPES',
  authIssuer: 'PUNK_AUTH_ISSUER',
  authJwksUrl: 'PUNK_AUTH_JWKS_URL',
  authJwtKey: 'PUNK_AUTH_JWT_KEY',
  authIntrospectionUrl: 'PUNK_AUTH_INTROSPECTION_URL',
  authIntrospectionClientId: 'PUNK_AUTH_INTROSPECTION_CLIENT_ID',
  authIntrospectionClientSecret: 'PUNK_AUTH_INTROSPECTION_CLIENT_SECRET',
  oauthClientId: 'PUNK_OAUTH_CLIENT_ID',
  oauthClientSecret: 'PUNK_OAUTH_CLIENT_SECRET',
  authAudiences: 'PUNK_AUTH_AUDIENCES',
  authAlgorithms: 'PUNK_AUTH_ALGORITHMS',
  authClockToleranceMs: 'PUNK_AUTH_CLOCK_TOLERANCE_MS',
  authTenantClaim: 'PUNK_AUTH_TENANT_CLAIM',
  authGroupsClaim: 'PUNK_AUTH_GROUPS_CLAIM',
  dashboardOauthClientId: 'PUNK_DASHBOARD_OAUTH_CLIENT_ID',
  dashboardOauthScopes: 'PUNK_DASHBOARD_OAUTH_SCOPES',
  sessionSigningKey: 'PUNK_SESSION_SIGNING_KEY',
  mcpPath: 'PUNK_MCP_PATH',
  serverName: 'PUNK_SERVER_NAME',
  serverTitle: 'PUNK_SERVER_TITLE',
  serverVersion: 'PUNK_SERVER_VERSION',
  serverDescription: 'PUNK_SERVER_DESCRIPTION',
  serverWebsiteUrl: 'PUNK_SERVER_WEBSITE_URL',
  serverIcons: 'PUNK_SERVER_ICONS',
  serverInstructions: 'PUNK_SERVER_INSTRUCTIONS',
  allowedOrigins: 'PUNK_ALLOWED_ORIGINS',
  allowedHosts: 'PUNK_ALLOWED_HOSTS',
  sessionTtlMs: 'PUNK_SESSION_TTL_MS',
  maxSessions: 'PUNK_MAX_SESSIONS',
  maxSessionsPerPrincipal: 'PUNK_MAX_SESSIONS_PER_PRINCIPAL',
  headersTimeoutMs: 'PUNK_HEADERS_TIMEOUT_MS',
  requestTimeoutMs: 'PUNK_REQUEST_TIMEOUT_MS',
  maxConnections: 'PUNK_MAX_CONNECTIONS',
  maxConnectionsPerAddress: 'PUNK_MAX_CONNECTIONS_PER_ADDRESS',
  connectionIdleTimeoutMs: 'PUNK_CONNECTION_IDLE_TIMEOUT_MS',
  initializeRateLimit: 'PUNK_INITIALIZE_RATE_LIMIT',
  maxListenStreams: 'PUNK_MAX_LISTEN_STREAMS',
  maxListenStreamsPerPrincipal: 'PUNK_MAX_LISTEN_STREAMS_PER_PRINCIPAL',
  responseMode: 'PUNK_RESPONSE_MODE',
  pageSize: 'PUNK_PAGE_SIZE',
  toolTimeouts: 'PUNK_TOOL_TIMEOUTS',
  loggingCapability: 'PUNK_LOGGING_CAPABILITY',
  trustProxy: 'PUNK_TRUST_PROXY',
  encryptionKey: 'PUNK_ENCRYPTION_KEY',
  encryptionPreviousKeys: 'PUNK_ENCRYPTION_PREVIOUS_KEYS',
  upstreamAllowedNetworks: 'PUNK_UPSTREAM_ALLOWED_NETWORKS',
  upstreamMaxConcurrentCalls: 'PUNK_UPSTREAM_MAX_CONCURRENT_CALLS',
  upstreamMaxQueuedCalls: 'PUNK_UPSTREAM_MAX_QUEUED_CALLS',
  upstreamQueueTimeoutMs: 'PUNK_UPSTREAM_QUEUE_TIMEOUT_MS',
  upstreamMaxCallsPerPrincipal: 'PUNK_UPSTREAM_MAX_CALLS_PER_PRINCIPAL',
  workflowMaxNodes: 'PUNK_WORKFLOW_MAX_NODES',
  workflowMaxRunMs: 'PUNK_WORKFLOW_MAX_RUN_MS',
  workflowMaxResultBytes: 'PUNK_WORKFLOW_MAX_RESULT_BYTES',
  ledgerMaxPending: 'PUNK_LEDGER_MAX_PENDING',
  upstreamIdleTimeoutMs: 'PUNK_UPSTREAM_IDLE_TIMEOUT_MS',
  toolPinning: 'PUNK_TOOL_PINNING',
  operatorNamespaces: 'PUNK_OPERATOR_NAMESPACES',
  gatewayNamespace: 'PUNK_GATEWAY_NAMESPACE',
  gatewayPodLabels: 'PUNK_GATEWAY_POD_LABELS',
  bridgeImage: 'PUNK_BRIDGE_IMAGE',
  runnerNpmImage: 'PUNK_RUNNER_NPM_IMAGE',
  runnerPypiImage: 'PUNK_RUNNER_PYPI_IMAGE',
  runnerNpmRegistries: 'PUNK_RUNNER_NPM_REGISTRIES',
  runnerPypiRegistries: 'PUNK_RUNNER_PYPI_REGISTRIES',
  clusterDomain: 'PUNK_CLUSTER_DOMAIN',
  operatorLeaseNamespace: 'PUNK_OPERATOR_LEASE_NAMESPACE',
  operatorLeaseName: 'PUNK_OPERATOR_LEASE_NAME',
  operatorResyncMs: 'PUNK_OPERATOR_RESYNC_MS',
  operatorWorkers: 'PUNK_OPERATOR_WORKERS',
  operatorReconcileTimeoutMs: 'PUNK_OPERATOR_RECONCILE_TIMEOUT_MS',
};

/**
 * Keys whose values are secrets or may carry one (a password in a database or NATS URL, an `oct` JWK):
 * an error names their variable and length, never their value.
 */
const secretKeys = new Set<keyof PunkConfig>([
  'authBootstrapAdminKey',
  'sessionSigningKey',
  'authIntrospectionClientSecret',
  'oauthClientSecret',
  'authJwtKey',
  'databaseUrl',
  'natsUrl',
  'encryptionKey',
  'encryptionPreviousKeys',
]);

/** The environment variable that sets each configuration key. */
export function envNameOf(key: keyof PunkConfig): string {
  return envNames[key];
}

/**
 * Reads and validates configuration from `PUNK_*` environment variables,
 * then applies `overrides` (command-line flags win over the environment).
 * `overrideNames` names where each override came from (`--port`), so an
 * error names what the user typed.
 *
 * @throws PunkError `InvalidConfig` listing every bad variable or flag with its value (only the length of a
 *   secret's, such as `PUNK_SESSION_SIGNING_KEY=<redacted, 5 characters>`) and the rule it broke.
 */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  overrides: Partial<Record<keyof PunkConfig, unknown>> = {},
  overrideNames: Partial<Record<keyof PunkConfig, string>> = {},
): PunkConfig {
  const raw: Record<string, unknown> = {};
  for (const [key, name] of Object.entries(envNames)) {
    const value = env[name];
    if (value !== undefined && value !== '') raw[key] = value;
  }
  const fromOverride = new Set<string>();
  for (const [key, value] of Object.entries(overrides)) {
    if (value !== undefined) {
      raw[key] = value;
      fromOverride.add(key);
    }
  }
  const parsed = configSchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const described = parsed.error.issues.map((issue) => {
    const key = String(issue.path[0]) as keyof PunkConfig;
    let name = (fromOverride.has(key) ? overrideNames[key] : undefined) ?? envNames[key] ?? key;
    let value = raw[key];
    // A list setting's issue is about one entry (path [key, index]): name that entry (1-based) and show only it.
    const index = issue.path[1];
    if (typeof index === 'number') {
      const entries = typeof value === 'string' ? splitList(value) : Array.isArray(value) ? value : [];
      name = `${name} entry ${index + 1}`;
      value = entries[index];
    }
    const shown = secretKeys.has(key) ? `<redacted, ${String(value).length} characters>` : JSON.stringify(value);
    return `${name}=${shown}: ${issue.message}`;
  });
  // One bad entry can break several rules that say the same thing; say each problem once.
  const problems = [...new Set(described)];
  throw new PunkError('InvalidConfig', `invalid configuration: ${problems.join('; ')}`, { problems });
}

/**
 * The start-up warning for a listener any network peer can reach with nobody authenticated: `config.host` is
 * not a loopback address and `PUNK_AUTH_MODE=off`. `served` names what the process serves there ("the MCP
 * endpoint and the ledger API"). Undefined when the listener is loopback-only or authentication is on.
 */
export function unauthenticatedExposureWarning(config: PunkConfig, served: string): string | undefined {
  if (config.authMode !== 'off' || isLoopbackAddress(config.host)) return undefined;
  return (
    `listening on ${config.host}, which is not a loopback address, with PUNK_AUTH_MODE=off: anyone on the network can use ${served} without authentication; ` +
    'set PUNK_AUTH_MODE=on (docs/authentication.md) or listen on 127.0.0.1'
  );
}
