/**
 * The bodies of Punk's REST API under `/api/v1`, each declared once: the services validate requests with these
 * schemas (the gateway the registrations, credentials and accepts, the front the API keys and `?tenant=`, the
 * ledger the `/runs` query) and the front generates its OpenAPI document from them (`z.toJSONSchema`). Schemas
 * registered in {@link apiComponents} become `#/components/schemas/<id>` of that document.
 */
import { z } from 'zod';
import { apiKeySchema } from './contracts.js';
import { dnsLabel, durationSchema, envVarSchema, headerSchema, referenceText } from './spec/mcpserver.js';

/** The named schemas of the OpenAPI document (`components.schemas`), by `id`. */
export const apiComponents = z.registry<{ id: string; description?: string }>();

/** One of `values`; the error lists them (`must be a, b or c`), or says `required` when the field is absent. */
export function choice<const T extends readonly [string, ...string[]]>(values: T) {
  const listed = values.length === 2 ? values.join(' or ') : `${values.slice(0, -1).join(', ')} or ${String(values.at(-1))}`;
  return z.enum(values, { error: (issue) => (issue.input === undefined ? 'required' : `must be ${listed}`) });
}

/** An RFC 3339 time in an answer. */
const time = (description: string) => z.string().meta({ format: 'date-time', description });
const integer = z.number().int().min(0);

// ---------------------------------------------------------------- query parameters

/** A tenant (namespace): one DNS label. */
export const tenantSchema = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be one DNS label')
  .describe("Tenant (namespace). Default: the caller's tenant (with authentication off, the endpoint's configured tenant).");

/** `?tenant=` of the registry, credentials and API-key routes. */
export const tenantQuerySchema = z.object({ tenant: tenantSchema.optional() });

/** Largest `limit` of `GET /runs`. */
export const MAX_RUNS_LIMIT = 500;
const limitRule = `must be an integer from 1 to ${String(MAX_RUNS_LIMIT)}`;
const dateTimeRule = 'must be an RFC 3339 date-time';

/** The query of `GET /runs` (each value a single string; the ledger refuses repeated ones). */
export const runsQuerySchema = z.object({
  tenant: z.string().min(1, 'must not be empty').describe('Tenant (default `default`).').optional(),
  limit: z
    .string()
    .regex(/^\d+$/, limitRule)
    .pipe(z.transform(Number))
    .pipe(z.number().min(1, limitRule).max(MAX_RUNS_LIMIT, limitRule))
    .describe(`Runs per page, 1 to ${String(MAX_RUNS_LIMIT)} (default 50).`)
    .optional(),
  before: z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}T/, dateTimeRule)
    .refine((text) => !Number.isNaN(new Date(text).getTime()), dateTimeRule)
    .meta({ format: 'date-time' })
    .describe("Runs whose last event is earlier (RFC 3339); pass the last run's `lastAt` for the next page.")
    .optional(),
});

/** `?tenant=` of `GET /runs/{id}` and `GET /ledger/verify`. */
export const ledgerTenantQuerySchema = runsQuerySchema.pick({ tenant: true });

// ---------------------------------------------------------------- errors

/** Every error answer: `{ error: { code, message } }`. */
export const apiErrorSchema = z
  .object({
    error: z.object({
      code: z.string().describe('Machine-readable code, such as `InvalidRegistration` or `ServerNotFound`.'),
      message: z.string().describe('What is wrong, naming the field or object.'),
    }),
  })
  .register(apiComponents, { id: 'Error' });

// ---------------------------------------------------------------- registry

const envName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name (letters, digits and _, not starting with a digit)');
const headerName = z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP header name (RFC 9110 token)');

/**
 * `env` or `headers` of a registration: a record of values (`{ "TOKEN": "cred:github" }`), or a list of
 * `{ name, value | valueFrom }` entries as a manifest has them, which becomes that record (a
 * `valueFrom.credentialRef` its `cred:<name>[/<key>]` reference). A list must not name an entry twice, and
 * cannot take a `valueFrom.secretKeyRef`: the gateway reads no Kubernetes Secret.
 */
function namedValues(name: z.ZodString, entry: typeof envVarSchema | typeof headerSchema, caseInsensitive: boolean) {
  const list = z.array(entry).transform((entries, ctx) => {
    const out: Record<string, string> = {};
    const seen = new Map<string, number>();
    entries.forEach((item, i) => {
      const key = caseInsensitive ? item.name.toLowerCase() : item.name;
      const first = seen.get(key);
      if (first !== undefined) {
        ctx.issues.push({ code: 'custom', input: item, path: [i, 'name'], message: `names the same entry as [${String(first)}]` });
      }
      seen.set(key, i);
      const { secretKeyRef, credentialRef } = item.valueFrom ?? {};
      if (secretKeyRef) {
        ctx.issues.push({
          code: 'custom',
          input: item,
          path: [i, 'valueFrom', 'secretKeyRef'],
          message: 'the gateway reads no Kubernetes Secret: store the value as a credential and use valueFrom.credentialRef',
        });
      } else if (item.value !== undefined) out[item.name] = item.value;
      else if (credentialRef) out[item.name] = referenceText(credentialRef);
      else ctx.issues.push({ code: 'custom', input: item, path: [i, 'valueFrom'], message: 'must hold credentialRef' });
    });
    return out;
  });
  return z.union([z.record(name, z.string()), list]);
}

const sideEffectLevel = z
  .number()
  .int()
  .min(0)
  .max(4)
  .describe(
    'Declared side-effect level: 0 none, 1 read, 2 reversible write, 3 write or send, 4 destructive or payment. Wins over the verb heuristics.',
  );

/** `tools` of a registration: which tools are served and how they are classified (the McpServer `spec.tools` fields). */
export const toolsPolicySchema = z
  .object({
    allow: z.array(z.string().min(1)).describe('Only these tools are served (all when absent).').optional(),
    deny: z.array(z.string().min(1)).describe('These tools are never served.').optional(),
    overrides: z
      .array(
        z
          .object({
            name: z.string().min(1, 'must be a non-empty tool name').describe('Tool name as the server lists it.'),
            sideEffectLevel: sideEffectLevel.optional(),
            annotations: z.record(z.string(), z.unknown()).describe("MCP tool annotations that replace the server's own.").optional(),
          })
          .strict(),
      )
      .optional(),
    pinning: choice(['serve', 'hide', 'approval'])
      .describe(
        "When a tool's definition changes from the pinned one: serve the new one, hide the tool until an admin accepts it, or require approval per call. Default: `PUNK_TOOL_PINNING` (`hide`).",
      )
      .optional(),
  })
  .strict()
  .register(apiComponents, {
    id: 'ToolsPolicy',
    description: 'Which tools are served and how they are classified (the McpServer `spec.tools` fields).',
  });

/**
 * The body of a registration (`POST /mcp/servers`, `PUT /mcp/servers/{id}`), field by field. `type` says where the
 * server comes from: `stdio` (a `command` the gateway runs as a child process, with `args` and `env`) or `http` (a
 * remote `url`, with `headers` and the `transport`). The gateway adds the checks across fields (which fields go
 * with which `type`, `cred:` references, header values) in `parseRegistration`.
 */
export const registrationBodySchema = z
  .object({
    name: dnsLabel.describe('DNS-1035 label, unique in the tenant; the tool prefix on the aggregated endpoint.'),
    type: choice(['stdio', 'http']),
    command: z.string().min(1, 'must be a non-empty string').describe('stdio: the executable.').optional(),
    args: z.array(z.string()).describe('stdio: arguments.').optional(),
    env: namedValues(envName, envVarSchema, false)
      .describe(
        "stdio: environment of the process (nothing else of the gateway's environment reaches it): a record of values, or a manifest's list of `{ name, value | valueFrom: { credentialRef } }`.",
      )
      .optional(),
    url: z
      .url({ protocol: /^https?$/, error: 'must be an http or https URL' })
      .describe('http: URL of the MCP endpoint (http or https). Checked by the SSRF guard at registration and at every connect.')
      .optional(),
    headers: namedValues(headerName, headerSchema, true)
      .describe(
        "http: headers sent on every request: a record of values, or a manifest's list of `{ name, value | valueFrom: { credentialRef } }`.",
      )
      .optional(),
    transport: choice(['streamable-http', 'sse'])
      .describe(
        'http: `streamable-http` (default; falls back to the 2024-11-05 HTTP+SSE transport when the server answers 400, 404 or 405) or `sse` (the old transport only).',
      )
      .optional(),
    tools: toolsPolicySchema.optional(),
    sessionMode: choice(['shared', 'per-client'])
      .describe('One upstream session shared by all clients (default), or one per client session.')
      .optional(),
    timeout: durationSchema.describe('Deadline of one call, such as `30s` (default: `PUNK_CALL_TIMEOUT_MS`, 60 s).').optional(),
  })
  .strict()
  .register(apiComponents, {
    id: 'Registration',
    description:
      'A server registration: `stdio` (`command`, `args`, `env`; accepted only where the gateway may run processes, i.e. `punk up`) or `http` (`url`, `headers`). Header and env values may be `cred:<id>` (or `cred:<id>/<key>`) references to a credential of the same tenant, resolved at connect time.',
  });

/** The body of `POST /mcp/servers/{id}/tools/{tool}/accept` (optional): the fingerprint the admin reviewed. */
export const acceptToolBodySchema = z
  .object({
    fingerprint: z
      .string()
      .regex(/^[0-9a-f]{64}$/, 'must be a SHA-256 fingerprint (64 lower-case hex digits)')
      .describe('The `pendingFingerprint` the admin reviewed: the accept holds only if it is still the one waiting.')
      .optional(),
  })
  .strict()
  .register(apiComponents, { id: 'AcceptToolInput' });

/** A server as the registry API shows it. */
export const serverViewSchema = z
  .object({
    name: z.string().describe('Registration name.'),
    namespace: z.string().describe('Tenant.'),
    type: z.enum(['stdio', 'http']).optional(),
    managed: z.boolean().describe('Made from a custom resource (or a manifest under `punk up`): read-only through this API.'),
    state: z.string().describe('Connection state on the answering gateway replica (`starting`, `ready`, `idle`, `failed`, `stopped`).'),
    lastError: z.string().describe('Why the server is not ready, when it is not.').optional(),
    circuit: z.enum(['closed', 'open', 'half-open']).describe('Circuit breaker of the pooled connection.').optional(),
    transport: z
      .enum(['stdio', 'streamable-http', 'sse'])
      .describe(
        'What the pooled connection speaks: `sse` when a Streamable HTTP handshake was refused and the 2024-11-05 HTTP+SSE transport answered.',
      )
      .optional(),
    toolCount: integer,
    nameConflicts: z
      .array(z.string())
      .describe('Tools of the server no endpoint exposes because their name collides (the server lists a name twice), each with why.')
      .optional(),
    status: z.enum(['unknown', 'ok', 'error']).describe('Outcome of the last `test`.').optional(),
    latencyMs: z.number().min(0).describe('Connect and list time of the last `test`, in milliseconds.').optional(),
    testedAt: time('Time of the last `test` (RFC 3339).').optional(),
    registration: z
      .looseObject({})
      .describe(
        'The registration as stored, literal `env` and `headers` values shown as `<redacted>` (managed servers: a summary of the manifest, names only).',
      )
      .optional(),
    createdAt: time('Registered servers: RFC 3339.').optional(),
    createdBy: z.string().describe('Registered servers: subject of the admin who registered it.').optional(),
    updatedAt: time('Registered servers: RFC 3339.').optional(),
    updatedBy: z.string().describe('Registered servers: subject of the admin who last replaced it.').optional(),
  })
  .register(apiComponents, { id: 'Server' });

/** The answer of `POST /mcp/servers/{id}/test`. */
export const testResultSchema = z
  .object({
    ok: z.boolean(),
    toolCount: integer,
    tools: z.array(z.looseObject({})).describe('The tools as the server listed them.'),
    latencyMs: z.number().min(0).describe('Connect (credentials resolved) and list time, in milliseconds.'),
    error: z.string().describe('Why the test failed, when `ok` is false.').optional(),
  })
  .register(apiComponents, { id: 'TestResult' });

/** The pinned definition of one tool. */
export const toolPinSchema = z
  .object({
    tool: z.string().describe('Tool name.'),
    fingerprint: z
      .string()
      .describe('SHA-256 (hex) of the pinned definition (name, title, description, input and output schema, annotations).'),
    pinnedAt: time('RFC 3339.').optional(),
    pendingFingerprint: z.string().describe('Fingerprint of a changed definition waiting to be accepted.').optional(),
    changedAt: time('RFC 3339.').optional(),
    status: z.enum(['pinned', 'changed-hidden', 'changed-approval']),
  })
  .register(apiComponents, { id: 'ToolPin' });

/** The answer of `GET /mcp/servers/{id}/tools`. */
export const toolListSchema = z
  .object({
    tools: z.array(z.looseObject({})),
    listedAt: time('When the listing was taken (RFC 3339).').optional(),
    cached: z.boolean().describe('True when answered from the cache (listings younger than 10 minutes).'),
    pins: z.array(toolPinSchema).optional(),
  })
  .register(apiComponents, { id: 'ToolList' });

/** The answer of an accept. */
export const acceptedToolSchema = z
  .object({ tool: z.string().describe('Tool name.'), fingerprint: z.string().describe('The fingerprint now pinned.') })
  .register(apiComponents, { id: 'AcceptedTool' });

// ---------------------------------------------------------------- credentials

/** Most keys of a credential. */
export const MAX_CREDENTIAL_KEYS = 64;
/** A key name: what a Kubernetes Secret accepts as a data key. */
export const credentialKeyPattern = /^[A-Za-z0-9._-]{1,253}$/;
const credentialIdRule = 'must be a DNS label: 1-63 lower-case letters, digits or "-", starting and ending with a letter or digit';
/** A credential id: a DNS label (RFC 1123), as Kubernetes names McpCredential objects. */
export const credentialIdSchema = z.string(credentialIdRule).regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, credentialIdRule);

/**
 * The body of `POST /credentials`, field by field: `{ id, type?, data }`. The gateway adds the checks of each
 * value and of the oauth2 keys in `parseCredentialInput` (messages never echo a value).
 */
export const credentialInputSchema = z
  .object({
    id: credentialIdSchema.describe('Id, unique in the tenant; referenced as `cred:<id>`.'),
    type: z
      .enum(['static', 'oauth2'], 'must be "static" or "oauth2"')
      .describe('Default: `oauth2` when `data` has `refresh_token` or `token_url`, else `static`.')
      .optional(),
    data: z
      .record(
        z.string().regex(credentialKeyPattern, 'key names must be 1-253 letters, digits, ".", "_" or "-"'),
        z.union([z.string(), z.number()], 'must be a non-empty string'),
        'must be an object of string keys and string values',
      )
      .refine((data) => Object.keys(data).length > 0, 'must hold at least one key')
      .refine((data) => Object.keys(data).length <= MAX_CREDENTIAL_KEYS, `holds more than ${String(MAX_CREDENTIAL_KEYS)} keys`)
      .meta({ minProperties: 1, maxProperties: MAX_CREDENTIAL_KEYS })
      .describe(
        'String keys and values, encrypted at rest (AES-256-GCM) and never returned. A reference resolves to the `value` key or the only key. OAuth2: `access_token`, `refresh_token`, `expires_at` (epoch ms; a number is accepted), `token_url`, `client_id`, `client_secret`, `scope`.',
      ),
  })
  .strict()
  .register(apiComponents, { id: 'CredentialInput' });

/** What the credentials API shows of a credential: never a value. */
export const credentialViewSchema = z
  .object({
    id: z.string().describe('Credential id.'),
    tenant: z.string().describe('Tenant.'),
    type: z.enum(['static', 'oauth2']),
    keys: z.array(z.string()).describe('Names of the stored keys.'),
    keyId: z.string().describe('Id of the encryption key the record is encrypted under.'),
    createdAt: time('RFC 3339.'),
    updatedAt: time('RFC 3339.').optional(),
    createdBy: z.string().describe('Subject of the admin who created it.').optional(),
    expiresAt: time('OAuth2: expiry of the current access token (RFC 3339).').optional(),
    lastRefreshAt: time('OAuth2: time of the last successful refresh (RFC 3339).').optional(),
    refreshError: z
      .string()
      .describe('OAuth2: why the last refresh failed, when it did (redacted: never a value); cleared by the next successful refresh.')
      .optional(),
    source: z
      .enum(['api', 'secret'])
      .describe(
        '`api`: created through this API. `secret`: applied by the operator from the Kubernetes Secret of an McpCredential (replaced when the Secret changes).',
      ),
    sourceChecksum: z.string().describe('`secret`: checksum of the Secret content the credential was applied from.').optional(),
  })
  .register(apiComponents, { id: 'Credential', description: 'What is known of a credential: never a value.' });

// ---------------------------------------------------------------- API keys

const scopePattern = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

/** The body of `POST /api-keys`. */
export const apiKeyInputSchema = z
  .object({
    name: z.string().trim().min(1).max(200).describe('Label of the key.'),
    tenant: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a DNS label (lower-case letters, digits, -)')
      .describe("Tenant of the key's principal (default: the endpoint's).")
      .optional(),
    scopes: z
      .array(z.string().regex(scopePattern, 'must be a scope token (RFC 6749 §3.3: printable ASCII, no space, " or \\)'))
      .max(100)
      .describe("Scopes granted (default: the endpoint's required scopes).")
      .optional(),
    groups: z.array(z.string().min(1).max(200)).max(100).describe('Groups of the principal, for policies.').optional(),
  })
  .strict()
  .register(apiComponents, { id: 'ApiKeyInput' });

/** An API key as the API shows it: the stored record without its hash, and `key` in the answer to its creation only. */
export const apiKeyViewSchema = apiKeySchema
  .omit({ sha256: true })
  .extend({ key: z.string().describe('The key (`pk_…`): in the answer to its creation only; stored as its SHA-256.').optional() })
  .register(apiComponents, { id: 'ApiKey' });

// ---------------------------------------------------------------- ledger

/** One run of the ledger (the events of one call, or of one server's lifecycle). */
export const runSummarySchema = z
  .object({
    runId: z.string(),
    tenant: z.string(),
    firstAt: z.string().describe('RFC 3339 time of its first event.'),
    lastAt: z.string().describe('RFC 3339 time of its last event; the `before` of the next page.'),
    eventCount: z.number().int().min(1),
    types: z.array(z.string()).describe('Distinct event types, sorted.'),
    server: z.string().optional(),
    tool: z.string().describe('The tool called, when the run is a tools/call.').optional(),
    subject: z.string().describe('Who ran it: the principal subject of its first event that names one.').optional(),
    outcome: z.string().describe('`ok`, `error`, `denied`, `approval_required`, or the outcome a completion event states.').optional(),
  })
  .register(apiComponents, {
    id: 'RunSummary',
    description: "One run of the ledger (the events of one call, or of one server's lifecycle).",
  });

/** The answer of `GET /runs/{id}`. */
export const runSchema = z
  .object({
    run: runSummarySchema,
    events: z.array(z.looseObject({}).describe('A stored event with its chain position (`tenantSeq`), `prevHash` and `hash`.')),
  })
  .register(apiComponents, { id: 'Run' });

/** The answer of `GET /ledger/verify`. */
export const verificationSchema = z
  .object({
    ok: z.boolean(),
    tenant: z.string(),
    events: integer.describe('Events checked.'),
    head: z.string().describe('Hash of the last event (ok chains); keep a copy elsewhere to detect a deleted tail.').optional(),
    firstBroken: z
      .object({ id: z.string(), tenantSeq: z.number().int(), reason: z.string(), message: z.string() })
      .describe('The first event whose link or hash does not match (broken chains).')
      .optional(),
  })
  .register(apiComponents, { id: 'Verification', description: "The outcome of recomputing the tenant's hash chain." });
