/**
 * Every bus subject, stream, consumer and queue group of Punk, with the
 * contract of each message. Nobody else spells a subject string; every
 * message is validated on receipt against the schema named here.
 * docs/bus.md documents the same table for people.
 */
import { z } from 'zod';
import type { Bus, BusHeaders, KvBucketConfig, StreamConfig } from './bus/bus.js';
import { PunkError } from './errors.js';
import { redactionOn } from './redaction/attached.js';
import { maskData } from './redaction/mask.js';

/** Subjects of the bus. */
export const subjects = {
  /** Request/reply, queue group `gateway`: catalog listings, tools/call, resources/read, prompts/get. */
  gatewayCall: 'punk.gateway.call',
  /**
   * Request/reply, queue group `governance`: one decision that needs governance's shared state (a McpPolicy rate
   * limit covers the use), asked by the gateway, which decides every other use in process.
   */
  governanceCheck: 'punk.governance.check',
  /**
   * Request/reply, queue group `governance`: approvals (`approvalRequestSchema`): a call's claim of an approval (the
   * gateway, for an `approval_required` decision), and the approvals API (list, get, approve, deny) from mcp-front.
   */
  governanceApproval: 'punk.governance.approval',
  /**
   * Broadcast from governance when approval request `id` is decided (approved or denied) (`approvalDecidedSchema`):
   * the gateway replica whose call waits for it claims it again at once.
   */
  approvalDecided: (id: string) => `punk.governance.approval.${subjectToken(id)}.decided`,
  /**
   * Request/reply, queue group `governance`: the settings API (`governanceAdminRequestSchema`; the reply is the
   * operation's JSON body, errors are PunkErrors). mcp-front serves it over HTTP as `/api/v1/settings`.
   */
  governanceAdmin: 'punk.governance.admin',
  /** Durable append to the ledger stream: trace events. */
  ledgerEvents: 'punk.ledger.events',
  /**
   * Request/reply, queue group `gateway`: the registry and credentials APIs (`gatewayAdminRequestSchema`; the reply
   * is the operation's JSON body, errors are PunkErrors). mcp-front serves them over HTTP under `/api/v1`.
   */
  gatewayAdmin: 'punk.gateway.admin',
  /** Broadcast: a server's registration or state changed; catalogs refresh. */
  registryChanged: 'punk.registry.changed',
  /**
   * Broadcast: a tenant's credential was created or deleted (`credentialsChangedSchema`); every gateway replica
   * reconnects that tenant's servers whose headers or env reference it, so they resolve it again.
   */
  credentialsChanged: 'punk.credentials.changed',
  /** Broadcast: an upstream sent `notifications/resources/updated` for a URI the gateway subscribed to (`resourceUpdatedSchema`). */
  resourceUpdated: 'punk.resources.updated',
  /** Broadcast to the replica holding a 2025 session's GET stream: a stored SSE event is ready (`sessionOutSchema`). */
  sessionOut: (sessionId: string) => `punk.session.${sessionId}.out`,
  /** Broadcast about a 2025 session's GET stream: the session ended or another GET replaced the stream (`sessionControlSchema`). */
  sessionControl: (sessionId: string) => `punk.session.${sessionId}.control`,
  /** Durable append to stream `PUNK_SSE`: one SSE event of one stream of a 2025 session (`sseEventSchema`). */
  sseEvent: (sessionId: string, streamId: string) => `punk.sse.${sessionId}.${streamId}`,
  /**
   * Publish from the gateway replica relaying one call to the front replica `front` serving it (the channel's
   * `front`), while the call runs: that the replica took the call, then the upstream's progress notifications and
   * server-to-client requests for the client (`callOutSchema`). Each front subscribes once to
   * {@link subjects.frontCallsOut} and dispatches by call id ({@link callIdOfCallOut}).
   */
  callOut: (front: string, callId: string) => `punk.front.${subjectToken(front)}.call.${callId}.out`,
  /** What front replica `front` subscribes to: {@link subjects.callOut} of every call it serves. */
  frontCallsOut: (front: string) => `punk.front.${subjectToken(front)}.call.*.out`,
  /**
   * Broadcast from the front replica serving one call to the gateway replica relaying it: the client gave the
   * call up (a 2026-07-28 response stream closed, or `notifications/cancelled`); the upstream request is
   * cancelled (`callCancelSchema`). Each gateway replica subscribes once to {@link subjects.callsCancel}. With a
   * workflow run's id, from the replica answering `workflows.cancel`: the replica running the run cancels it.
   */
  callCancel: (callId: string) => `punk.call.${callId}.cancel`,
  /** What every gateway replica subscribes to: {@link subjects.callCancel} of every call. */
  callsCancel: 'punk.call.*.cancel',
  /**
   * Broadcast, every {@link GATEWAY_HEARTBEAT_MS}, from each gateway replica (`gatewayHeartbeatSchema`): the fronts
   * tell from its silence that a replica holding their calls is gone.
   */
  gatewayHeartbeat: 'punk.gateway.heartbeat',
  /**
   * Request/reply to the gateway replica holding one pending server-to-client request (it alone serves this subject):
   * the client's JSON-RPC answer, from whichever front replica received it (`clientAnswerSchema`; reply `{}`, or
   * for a 2026-07-28 retry the call's next outcome: its result or the next `input_required`).
   */
  clientAnswer: (requestId: string) => `punk.client-request.${requestId}.answer`,
  /**
   * Request/reply served only by the gateway replica `instanceId` (no queue group): a `punk.gateway.call` request
   * for a `per-client` upstream session that replica owns, forwarded by the replica that received it, or a
   * 2026-07-28 retry of an `input_required` one of its server processes answered ({@link UPSTREAM_INPUT_INSTANCE}),
   * sent by a front (`gatewayRequestSchema`; same reply and errors as `punk.gateway.call`, plus `UpstreamSessionMoved`).
   */
  gatewayInstanceCall: (instanceId: string) => `punk.gateway.instance.${subjectToken(instanceId)}.call`,
  /**
   * Request/reply, queue group `mcp-front-sessions-<tenant>`: a message from a `per-client` upstream session
   * for its 2025 client session, outside any call (`notifications/message`, `roots/list`); the front that takes
   * it stores it on the session's GET stream (`sessionMessageSchema`, reply `sessionMessageReplySchema`).
   */
  sessionMessage: (tenant: string) => `punk.tenant.${subjectToken(tenant)}.session-message`,
} as const;

/** The call id a subject of {@link subjects.callOut} or {@link subjects.callCancel} names (undefined for another subject). */
export function callIdOfSubject(subject: string): string | undefined {
  const tokens = subject.split('.');
  return tokens[1] === 'front' ? tokens[4] : tokens[2];
}

/** How often a gateway replica publishes on `punk.gateway.heartbeat`, in milliseconds. */
export const GATEWAY_HEARTBEAT_MS = 250;

/** A value made safe as one subject token: `.`, `*`, `>` and whitespace become `_`. */
function subjectToken(value: string): string {
  return value.replace(/[.*>\s]/g, '_');
}

/** Queue groups: one member of a group answers each request. */
export const queues = {
  gateway: 'gateway',
  governance: 'governance',
  /** Fronts of one tenant: one of them fans each registry change out to the tenant's 2025 sessions. */
  frontSessions: (tenant: string) => `mcp-front-sessions-${tenant}`,
} as const;

/** Streams, created idempotently at start-up. */
export const streams = {
  ledger: { name: 'PUNK_LEDGER', subjects: [subjects.ledgerEvents], duplicateWindowMs: 10 * 60_000 } satisfies StreamConfig,
  /** SSE events of 2025-era sessions, kept one hour for `Last-Event-ID` replay from any front replica. */
  sse: { name: 'PUNK_SSE', subjects: ['punk.sse.>'], duplicateWindowMs: 2 * 60_000, maxAgeMs: 60 * 60_000 } satisfies StreamConfig,
} as const;

/** Key-value buckets, created idempotently at start-up. */
export const buckets = {
  /** 2025-era session state by `Mcp-Session-Id` (`sessionStateSchema`); entries expire `ttlMs` after their last write. */
  sessions: (ttlMs: number) => ({ name: 'PUNK_SESSIONS', ttlMs }) satisfies KvBucketConfig,
  /**
   * Owner of each `per-client` upstream session (`upstreamSessionOwnerSchema`), by {@link upstreamSessionKey};
   * entries expire `ttlMs` after their last write (the owner renews them while the session is used).
   */
  upstreamSessions: (ttlMs: number) => ({ name: 'PUNK_UPSTREAM_SESSIONS', ttlMs }) satisfies KvBucketConfig,
  /** API keys by id (`apiKeySchema`): the SHA-256 of each key, never the key; entries never expire (revocation deletes them). */
  apiKeys: { name: 'PUNK_API_KEYS', ttlMs: 0 } satisfies KvBucketConfig,
  /**
   * mcp-front's `initialize` counters (`{ count }`), one per client address and minute, shared by every
   * front replica; entries expire two minutes after their last write.
   */
  initializeCounters: { name: 'PUNK_INITIALIZE_COUNTERS', ttlMs: 120_000 } satisfies KvBucketConfig,
  /**
   * mcp-front's index of the 2025-era sessions of each principal (`{ sessions: [<session id>, …] }`), by a hash of the
   * principal (or of an anonymous caller's address), shared by every front replica and written only with
   * create/compare-and-set; ids of ended sessions are dropped when the principal reaches its bound. Entries expire
   * `ttlMs` (a day) after their last write.
   */
  principalSessions: { name: 'PUNK_PRINCIPAL_SESSIONS', ttlMs: 24 * 60 * 60_000 } satisfies KvBucketConfig,
  /**
   * The servers the operator manages (McpServer custom resources), and `punk cluster` those of its manifests
   * directory, by `kvKey(tenant, name)`: each value a {@link managedServerSchema}, the McpServer as the gateway
   * serves it (a pod's server as the `url` of its Service). Every gateway replica watches the bucket and serves its
   * entries beside the manifests'; entries never expire (the operator deletes them with the custom resource,
   * `punk cluster` with the document).
   */
  mcpServers: { name: 'PUNK_MCP_SERVERS', ttlMs: 0 } satisfies KvBucketConfig,
  /**
   * The tenants' McpPolicy custom resources, by `kvKey(tenant, name)`: each value a whole McpPolicy object
   * (`mcpPolicySchema`). Every governance replica watches the bucket; entries never expire.
   */
  mcpPolicies: { name: 'PUNK_MCP_POLICIES', ttlMs: 0 } satisfies KvBucketConfig,
  /**
   * The tenants' McpWorkflow custom resources, by `kvKey(tenant, name)`: each value a whole McpWorkflow object
   * (`mcpWorkflowSchema`, its graph checked), published by the operator and by `punk up` (workflow/publish.ts). Every
   * gateway replica watches the bucket and serves the workflows (tools on `/mcp`, the workflows API, runs); entries
   * never expire.
   */
  mcpWorkflows: { name: 'PUNK_MCP_WORKFLOWS', ttlMs: 0 } satisfies KvBucketConfig,
  /**
   * Governance's rate-limit counters (`rateLimitCounterSchema`), one per tenant, McpPolicy, limit and principal, by
   * `kvKey(tenant, policy, limit, subject)`, shared by every governance replica and written only with
   * create/compare-and-set. A counter whose window has passed counts from 0 again; entries expire 31 days after
   * their last write, so a window of up to 31 days is counted exactly.
   */
  rateLimitCounters: { name: 'PUNK_RATE_LIMITS', ttlMs: 31 * 24 * 60 * 60_000 } satisfies KvBucketConfig,
  /**
   * Each tenant's settings (`tenantSettingsSchema`) by `kvKey(tenant)`, written by governance (which keeps them in
   * Postgres and publishes them at start and on each change) and watched by every process that appends ledger
   * events (settings.ts), so the redaction setting applies on every replica; entries never expire.
   */
  tenantSettings: { name: 'PUNK_TENANT_SETTINGS', ttlMs: 0 } satisfies KvBucketConfig,
} as const;

/** One counter of bucket `PUNK_RATE_LIMITS`: uses counted in the fixed window that started at `windowStart` (epoch milliseconds). */
export const rateLimitCounterSchema = z.object({ windowStart: z.number().int().min(0), count: z.number().int().min(0) });
export type RateLimitCounter = z.infer<typeof rateLimitCounterSchema>;

/**
 * One entry of bucket `PUNK_MCP_SERVERS`: the McpServer object the gateway serves (validated again with
 * `mcpServerSchema` by the gateway, which names the bad field in its log and skips the entry), the
 * `metadata.generation` of the custom resource it was made from, and whether its `spec.url` is the endpoint of a
 * process the writer launched itself on this machine (`punk cluster`'s HTTP servers, as their pods would run): the
 * SSRF guard lets that server, and no other, reach exactly that origin.
 */
export const managedServerSchema = z.object({
  server: z.looseObject({
    apiVersion: z.string(),
    kind: z.literal('McpServer'),
    metadata: z.looseObject({ name: z.string(), namespace: z.string() }),
  }),
  generation: z.number().int().min(0),
  launched: z.boolean().optional(),
});
export type ManagedServer = z.infer<typeof managedServerSchema>;

/** Default idle time after which a `per-client` upstream session is closed and its owner entry expires, in milliseconds. */
export const DEFAULT_UPSTREAM_SESSION_TTL_MS = 30 * 60_000;

/**
 * Key of one `per-client` upstream session in bucket `PUNK_UPSTREAM_SESSIONS`: `<tenant>.<server>.<sessionId>`,
 * each part escaped so the key stays a valid NATS KV key and distinct tuples never share one
 * (characters other than letters, digits and `-` become `_xx`, their UTF-8 bytes in hex).
 */
export function upstreamSessionKey(tenant: string, server: string, sessionId: string): string {
  return kvKey(tenant, server, sessionId);
}

/**
 * A NATS KV key made of `parts` joined by `.`, each part escaped (characters other than letters, digits and `-`
 * become `_xx`, their UTF-8 bytes in hex) so the key stays valid and distinct tuples never share one.
 */
export function kvKey(...parts: string[]): string {
  const escape = (part: string) =>
    [...Buffer.from(part, 'utf8')]
      .map((b) => (/[A-Za-z0-9-]/.test(String.fromCharCode(b)) && b < 128 ? String.fromCharCode(b) : `_${b.toString(16).padStart(2, '0')}`))
      .join('');
  return parts.map(escape).join('.');
}

/** Default time to live of an idle 2025-era session, in milliseconds (renewed on activity). */
export const DEFAULT_SESSION_TTL_MS = 30 * 60_000;

/** Durable consumers. */
export const consumers = {
  /** The ledger's writer of trace events into Postgres. */
  ledgerWriter: 'ledger-writer',
} as const;

/** Deadlines of the request subjects, in milliseconds. */
export const deadlines = {
  governanceCheckMs: 5_000,
  /** A claim or an API operation of approvals (`punk.governance.approval`). */
  governanceApprovalMs: 5_000,
  catalogMs: 10_000,
  /** Delivery of a client's answer to the gateway replica holding the pending request. */
  clientAnswerMs: 5_000,
  /** Storing a `per-client` upstream's message on its client session's GET stream (`punk.tenant.<tenant>.session-message`). */
  sessionMessageMs: 5_000,
  /** A registry or credentials API operation (`punk.gateway.admin`); `servers.test` connects and lists within it. */
  gatewayAdminMs: 45_000,
} as const;

// ---------------------------------------------------------------- shared parts

/**
 * Who is calling: subject (user or client id), tenant, groups, and the OAuth scopes (RFC 6749 §3.3) its
 * credential grants (absent for the anonymous principal).
 */
export const principalSchema = z.object({
  subject: z.string().min(1),
  tenant: z.string().min(1),
  groups: z.array(z.string()).default([]),
  scopes: z.array(z.string()).optional(),
  /**
   * The caller a platform agent acts for: on the calls of a workflow run (subject {@link WORKFLOW_ENGINE_SUBJECT}), the
   * principal who triggered the run. A policy rule's principals and groups match the agent or this caller.
   */
  actingFor: z.object({ subject: z.string().min(1), groups: z.array(z.string()).default([]) }).optional(),
});
export type Principal = z.infer<typeof principalSchema>;

/** Subject of the agent that makes the calls of workflow runs (acting for the run's caller: `Principal.actingFor`). */
export const WORKFLOW_ENGINE_SUBJECT = 'workflow-engine';

/** The principal of an unauthenticated local caller (embedded mode without auth). */
export function anonymousPrincipal(tenant: string): Principal {
  return { subject: 'anonymous', tenant, groups: [] };
}

/** A JSON object whose other keys are kept untouched (MCP results and definitions). */
const looseObject = z.looseObject({});
const mcpTool = z.looseObject({ name: z.string(), inputSchema: z.looseObject({}).optional() });
const mcpResource = z.looseObject({ uri: z.string(), name: z.string() });
const mcpResourceTemplate = z.looseObject({ uriTemplate: z.string(), name: z.string() });
const mcpPrompt = z.looseObject({ name: z.string() });

/** Side-effect level of a tool: 0 none, 1 read, 2 reversible write, 3 write or send, 4 destructive or payment. */
export const sideEffectLevelSchema = z.number().int().min(0).max(4);
export type SideEffectLevel = z.infer<typeof sideEffectLevelSchema>;

// ---------------------------------------------------------------- gateway

/**
 * How the gateway reaches the client of a call while it runs (MCP 2025-11-25 basic/utilities/progress,
 * client/elicitation, client/sampling): the front serving the call listens on `punk.call.<callId>.out`.
 */
export const callChannelSchema = z.object({
  /** Names the call's subject; minted by the front per call. */
  callId: z.uuid(),
  /** The front replica serving the call (its subject {@link subjects.callOut}); minted by the front at start. */
  front: z.string().min(1),
  /**
   * Capabilities the client declared (in `initialize`, or in a 2026-07-28 request's `_meta`):
   * server-to-client requests are forwarded only when declared.
   */
  clientCapabilities: looseObject.default({}),
  /**
   * How the client receives server-to-client requests. `2025` (the default): on the call's stream, as
   * JSON-RPC requests. `2026`: as an `input_required` result (MCP 2026-07-28 basic/patterns/mrtr): the
   * gateway replies to this `punk.gateway.call` request at once with `inputRequests` keyed by pending
   * request ids, holds the upstream call, and replies to the answer on `punk.client-request.<id>.answer`
   * with the call's next outcome.
   */
  era: z.enum(['2025', '2026']).optional(),
  /**
   * Era `2026`: how long the client has to retry an `input_required` result, in milliseconds (the lifetime of the
   * `requestState` the front mints for it). The gateway holds a round at most this long (and at most its own
   * pending bound): past it no retry can be accepted, so the upstream's request is answered with an error.
   */
  inputTtlMs: z.number().int().positive().optional(),
});
export type CallChannel = z.infer<typeof callChannelSchema>;

/**
 * The deadline of one call mcp-front forwards (mcp-front deadline.ts): the deadline in milliseconds, where it comes
 * from as error messages name it (`the server's spec.timeout`, `PUNK_TOOL_TIMEOUTS for <tool>`, `PUNK_CALL_TIMEOUT_MS,
 * …`), and how long the front waits on the bus for the reply, in milliseconds from sending the request.
 */
export const callDeadlineSchema = z.object({
  ms: z.number().int().positive(),
  source: z.string().min(1),
  waitMs: z.number().int().positive(),
});
export type CallDeadline = z.infer<typeof callDeadlineSchema>;

const callBase = {
  tenant: z.string().min(1),
  server: z.string().min(1),
  principal: principalSchema,
  /** The run this call belongs to: every ledger event of the call carries it. */
  runId: z.string().min(1),
  sessionId: z.string().optional(),
  /** Request `_meta` from the client (progress token, traceparent), forwarded untouched. */
  _meta: looseObject.optional(),
  /** Present when the client can receive messages during the call (a 2025-era session) or take input_required results (era `2026`). */
  channel: callChannelSchema.optional(),
  /** The front's deadline of the call: an approval wait of the gateway ends before it (approvals.ts). */
  deadline: callDeadlineSchema.optional(),
  /**
   * A 2026-07-28 client's retry of an `input_required` result the upstream itself answered (MCP 2026-07-28
   * basic/patterns/mrtr): the client's `inputResponses`, and the upstream's own `requestState`, echoed byte for
   * byte. The gateway sends both to the upstream with the call.
   */
  inputResponses: z.record(z.string(), z.unknown()).optional(),
  requestState: z.string().optional(),
  /**
   * A server with `spec.auth.tokenExchange`: the access token mcp-front got for this call's caller (RFC 8693), sent as the
   * upstream request's `Authorization: Bearer`, and the caller's `subject` it was issued for (the ledger names it, never
   * the token). Never logged, never on the ledger; the caller's own token never leaves mcp-front.
   */
  exchangedToken: z.object({ accessToken: z.string().min(1), subject: z.string().min(1) }).optional(),
};

/**
 * Set (`true`) on an `input_required` reply of `punk.gateway.call` that is the upstream's own: a 2026-07-28
 * upstream's, passed through to a 2026-07-28 client (MCP 2026-07-28 basic/patterns/mrtr). Its `inputRequests` keys
 * and `requestState` are the upstream's; the client's retry comes back as a new call carrying `inputResponses` and
 * that `requestState`. Absent: each `inputRequests` key is a request the gateway holds for a 2025-era upstream.
 */
export const UPSTREAM_INPUT_REQUIRED = 'upstreamInputRequired';

/**
 * Set beside {@link UPSTREAM_INPUT_REQUIRED} when a server process of one gateway replica (a stdio server) answered the
 * `input_required`: the replica's `instanceId`. The upstream's `requestState` may be that process's own (signed with a
 * key of its own), so the client's retry goes to that replica (`subjects.gatewayInstanceCall`), not to any.
 */
export const UPSTREAM_INPUT_INSTANCE = 'upstreamInputInstance';

/** Request on `punk.gateway.call`. */
export const gatewayRequestSchema = z.discriminatedUnion('method', [
  z.object({ method: z.literal('catalog/list'), tenant: z.string().min(1), server: z.string().min(1).optional() }),
  z.object({
    method: z.literal('tools/call'),
    ...callBase,
    name: z.string().min(1),
    arguments: z.record(z.string(), z.unknown()).optional(),
  }),
  z.object({ method: z.literal('resources/read'), ...callBase, uri: z.string().min(1) }),
  z.object({
    method: z.literal('prompts/get'),
    ...callBase,
    name: z.string().min(1),
    arguments: z.record(z.string(), z.string()).optional(),
  }),
  /** Subscribes the gateway replica's upstream connection to a URI (MCP 2025-11-25 server/resources "Subscriptions"); reply `{}`. */
  z.object({ method: z.literal('resources/subscribe'), tenant: z.string().min(1), server: z.string().min(1), uri: z.string().min(1) }),
  /**
   * `completion/complete` (MCP 2025-11-25 server/utilities/completion) for the server owning the prompt or
   * resource template `ref` names (with the upstream's own prompt name); reply: the upstream's result.
   */
  z.object({
    method: z.literal('completion/complete'),
    ...callBase,
    ref: z.looseObject({ type: z.string().min(1) }),
    argument: z.looseObject({ name: z.string(), value: z.string() }),
    context: looseObject.optional(),
  }),
  /**
   * `logging/setLevel` of a 2025-era client session (MCP 2025-11-25 server/utilities/logging) for one server:
   * applied to the session's own upstream connection of a `per-client` server; a no-op on shared connections
   * (whose log messages reach no client). Reply `{}`.
   */
  z.object({ method: z.literal('logging/setLevel'), ...callBase, sessionId: z.string().min(1), level: z.string().min(1) }),
]);
export type GatewayRequest = z.infer<typeof gatewayRequestSchema>;

/**
 * Lifecycle state of one upstream server as the gateway sees it. `idle`: the pooled connection was closed after
 * `PUNK_UPSTREAM_IDLE_TIMEOUT_MS` without calls; the last listings are still served and the next call reconnects.
 */
export const serverStateSchema = z.enum(['starting', 'ready', 'idle', 'failed', 'stopped']);
export type ServerState = z.infer<typeof serverStateSchema>;

/** A tool a server lists that is not served (see `ServerCatalog.withheldTools`). */
export const withheldToolSchema = z.object({
  name: z.string(),
  reason: z.enum(['denied', 'awaiting-review']),
  /** Why, for the caller: the rule that denies it, or the route an admin accepts the definition with. */
  message: z.string(),
});
export type WithheldTool = z.infer<typeof withheldToolSchema>;

/** What the gateway knows of one server: its state and cached listings. */
export const serverCatalogSchema = z.object({
  name: z.string(),
  namespace: z.string(),
  state: serverStateSchema,
  lastError: z.string().optional(),
  /** What is wrong but served, from the last connection, each naming where (`paths./pets/{id}.get: no operationId; named get_pets_id`). */
  warnings: z.array(z.string()).optional(),
  /** The transport of the last connection: `sse` when a url server only spoke the 2024-11-05 HTTP+SSE transport. */
  transport: z.enum(['stdio', 'streamable-http', 'sse', 'openapi']).optional(),
  /** The gateway replica's circuit breaker for the server: `open` fails calls fast until a probe reconnects (`half-open`). */
  circuit: z.enum(['closed', 'open', 'half-open']).optional(),
  protocolVersion: z.string().optional(),
  serverInfo: looseObject.optional(),
  instructions: z.string().optional(),
  capabilities: looseObject.default({}),
  tools: z.array(mcpTool).default([]),
  resources: z.array(mcpResource).default([]),
  resourceTemplates: z.array(mcpResourceTemplate).default([]),
  prompts: z.array(mcpPrompt).default([]),
  /** Side-effect level of each listed tool, by tool name. */
  sideEffectLevels: z.record(z.string(), sideEffectLevelSchema).default({}),
  /**
   * Tools the server lists that are not served, and why: `denied` by the manifest's `spec.tools.allow`/`deny`, or
   * `awaiting-review` (a changed definition hidden until an admin accepts it). A call to one answers `message` as a tool error.
   */
  withheldTools: z.array(withheldToolSchema).default([]),
  /** The server's `spec.auth.tokenExchange`: mcp-front exchanges each caller's OAuth token for one of this audience (docs/identity.md). */
  tokenExchange: z.object({ audience: z.string().min(1), scopes: z.array(z.string()) }).optional(),
  /** The server's `spec.auth.perUser` provider and scopes: each call carries its principal's own connection (docs/identity.md). */
  perUser: z.object({ provider: z.string().min(1), scopes: z.array(z.string()) }).optional(),
  /** The server's call deadline from its `spec.timeout`, in milliseconds; absent when the manifest sets none (`PUNK_CALL_TIMEOUT_MS` applies). */
  timeoutMs: z.number().int().positive().optional(),
  /**
   * The server's start budget (`spec.startTimeout`, else `PUNK_SERVER_START_TIMEOUT_MS`), in milliseconds: a call to the
   * server while it is `starting` waits that long at most for the start.
   */
  startTimeoutMs: z.number().int().positive().optional(),
});
export type ServerCatalog = z.infer<typeof serverCatalogSchema>;

/** Reply to `catalog/list`. */
export const catalogReplySchema = z.object({ servers: z.array(serverCatalogSchema) });
export type CatalogReply = z.infer<typeof catalogReplySchema>;

/** Reply to `tools/call`, `resources/read`, `prompts/get`: the upstream MCP result, untouched. */
export const mcpResultSchema = looseObject;

/** Value under an {@link upstreamSessionKey} in bucket `PUNK_UPSTREAM_SESSIONS`: which gateway replica owns the session. */
export const upstreamSessionOwnerSchema = z.object({
  /** `instanceId` of the owning gateway replica; it serves `punk.gateway.instance.<instanceId>.call`. */
  instance: z.string().min(1),
  tenant: z.string().min(1),
  server: z.string().min(1),
  sessionId: z.string().min(1),
  /** RFC 3339 time this replica took ownership. */
  since: z.iso.datetime({ offset: true }),
});
export type UpstreamSessionOwner = z.infer<typeof upstreamSessionOwnerSchema>;

// ---------------------------------------------------------------- governance

/** Request on `punk.governance.check`. */
export const governanceCheckSchema = z.object({
  tenant: z.string().min(1),
  principal: principalSchema,
  server: z.string().min(1),
  /** What is being used: a tool call, a resource read or a prompt get. */
  kind: z.enum(['tool', 'resource', 'prompt']),
  /** Tool name, resource URI or prompt name. */
  target: z.string().min(1),
  /** Level declared in the McpServer manifest, when there is one: it wins over heuristics. */
  declaredLevel: sideEffectLevelSchema.optional(),
  runId: z.string().min(1),
  sessionId: z.string().optional(),
});
export type GovernanceCheck = z.infer<typeof governanceCheckSchema>;

/** Outcome of a governance check. */
export const decisionSchema = z.enum(['allow', 'deny', 'approval_required']);
export type Decision = z.infer<typeof decisionSchema>;

/** Reply on `punk.governance.check`. */
export const governanceDecisionSchema = z.object({
  decisionId: z.string(),
  decision: decisionSchema,
  sideEffectLevel: sideEffectLevelSchema,
  /** Where the level came from. */
  levelSource: z.enum(['declared', 'heuristic', 'kind']),
  /** `read:<server>/<target>`, `write:…` or `destroy:…`. */
  action: z.string(),
  /** Name of the policy rule that decided. */
  rule: z.string(),
  /** A sentence for people. */
  reason: z.string(),
  /** Generation of the tenant's compiled policies that decided (`TenantPolicy.generation`; 0: the defaults alone). */
  generation: z.number().int().min(0),
  /** For `approval_required`: how the rule's approvals are decided (`ApprovalSettings` of policy/rules.ts). */
  approval: z
    .object({
      approvers: z.object({ subjects: z.array(z.string()), groups: z.array(z.string()) }),
      allowSelf: z.boolean(),
      timeoutMs: z.number().int().min(1),
      waitMs: z.number().int().min(0),
    })
    .optional(),
});
export type GovernanceDecision = z.infer<typeof governanceDecisionSchema>;

// ---------------------------------------------------------------- approvals

/** States of an approval request: `pending` until decided or expired; an `approved` one becomes `consumed` by its one call. */
export const approvalStateSchema = z.enum(['pending', 'approved', 'denied', 'expired', 'consumed']);
export type ApprovalState = z.infer<typeof approvalStateSchema>;

/**
 * One approval request, as governance stores it (schema `governance`, table `approvals`) and the API shows it: the
 * exact call it authorises (principal, server, tool, the SHA-256 of the RFC 8785 canonical arguments), the rule and
 * policy generation that asked, its times and its state, who decided and why.
 */
export const approvalSchema = z.object({
  id: z.uuid().describe('Approval id.'),
  tenant: z.string().min(1),
  principal: z.object({ subject: z.string().min(1), groups: z.array(z.string()) }).describe('Who made the call.'),
  server: z.string().min(1),
  tool: z.string().min(1),
  argumentsDigest: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .describe('SHA-256 (hex) of the RFC 8785 canonical JSON of the arguments.'),
  rule: z.string().describe('The policy rule that required the approval.'),
  generation: z.number().int().min(0).describe("Generation of the tenant's policies that decided."),
  approvers: z
    .object({ subjects: z.array(z.string()), groups: z.array(z.string()) })
    .describe("Who may decide (both empty: holders of the admin scope), from the rule's `approval`."),
  allowSelf: z.boolean().describe('Whether the caller may approve its own call.'),
  runId: z.string().describe('The run of the call that asked.'),
  state: approvalStateSchema,
  createdAt: z.iso.datetime({ offset: true }).describe('RFC 3339.'),
  expiresAt: z.iso.datetime({ offset: true }).describe('RFC 3339: an undecided or unconsumed request expires then.'),
  decidedBy: z.string().optional().describe('Subject of who approved or denied it.'),
  decidedAt: z.iso.datetime({ offset: true }).optional(),
  reason: z.string().optional().describe("The decider's reason."),
  consumedAt: z.iso.datetime({ offset: true }).optional(),
  consumedRunId: z.string().optional().describe('The run of the call that used the approval.'),
});
export type Approval = z.infer<typeof approvalSchema>;

/**
 * Who asks governance to see or decide approvals: the authenticated principal, whether it holds the admin scope of
 * the tenant, and whether authentication is off (then the API acts as an admin and may decide any request).
 */
export const approvalCallerSchema = z.object({ principal: principalSchema, admin: z.boolean(), authOff: z.boolean() });
export type ApprovalCaller = z.infer<typeof approvalCallerSchema>;

/** Filters of `GET /api/v1/approvals`. */
export const approvalFilterSchema = z.object({
  state: approvalStateSchema.optional(),
  server: z.string().min(1).optional(),
  tool: z.string().min(1).optional(),
  subject: z.string().min(1).optional(),
});

/**
 * One request on `punk.governance.approval`.
 * - `claim` (the gateway, for an `approval_required` decision of a tools/call): with `id`, that request (a re-check
 *   while the call waits); else the oldest `approved` request of the same principal, server, tool and arguments
 *   digest, then a `pending` one, else a new `pending` request (`approval.requested`). An approved one is consumed
 *   (`approval.consumed`, in `runId`).
 * - `release` (the gateway, when the call that consumed approval `id` in run `runId` ended before its request reached
 *   the upstream: a dead server, a full or timed-out queue, an open circuit): the approval is `approved` again, for the
 *   next call (`approval.released`, in `runId`); answers `{ approval }`.
 * - `list`, `get`, `decide`: the approvals API; `decide` is refused (`ApprovalForbidden`) for a caller who may not.
 */
export const approvalRequestSchema = z.discriminatedUnion('op', [
  z.object({
    op: z.literal('claim'),
    tenant: z.string().min(1),
    principal: principalSchema,
    server: z.string().min(1),
    tool: z.string().min(1),
    argumentsDigest: z.string().regex(/^[0-9a-f]{64}$/),
    /** The call's arguments, recorded on the `approval.requested` event so approvers see what they decide (masked when redaction is on). */
    arguments: z.record(z.string(), z.unknown()).optional(),
    rule: z.string().min(1),
    generation: z.number().int().min(0),
    approval: governanceDecisionSchema.shape.approval.unwrap(),
    runId: z.string().min(1),
    sessionId: z.string().optional(),
    id: z.uuid().optional(),
  }),
  z.object({ op: z.literal('release'), tenant: z.string().min(1), id: z.uuid(), runId: z.string().min(1) }),
  z.object({ op: z.literal('list'), tenant: z.string().min(1), caller: approvalCallerSchema, filter: approvalFilterSchema }),
  z.object({ op: z.literal('get'), tenant: z.string().min(1), caller: approvalCallerSchema, id: z.string().min(1) }),
  z.object({
    op: z.literal('decide'),
    tenant: z.string().min(1),
    caller: approvalCallerSchema,
    id: z.string().min(1),
    verdict: z.enum(['approve', 'deny']),
    reason: z.string().max(1024).optional(),
  }),
]);
export type ApprovalRequest = z.infer<typeof approvalRequestSchema>;

/**
 * Reply to a `claim`: `consumed` (the call may run, once), else the request's current state (`pending`, `denied`,
 * `expired`); `callerMayDecide` tells whether the caller itself may decide it (in-conversation approval).
 */
export const approvalClaimReplySchema = z.object({ approval: approvalSchema, callerMayDecide: z.boolean() });
export type ApprovalClaimReply = z.infer<typeof approvalClaimReplySchema>;

/** Broadcast on `punk.governance.approval.<id>.decided`. */
export const approvalDecidedSchema = z.object({ id: z.uuid(), state: approvalStateSchema });

// ---------------------------------------------------------------- API keys

/**
 * Value stored under an API key's `id` in bucket `PUNK_API_KEYS`. The key itself (`pk_<id>_<secret>`) is shown
 * once when created; only its SHA-256 (hex) is kept.
 */
export const apiKeySchema = z.object({
  /** 16 lower-case hex characters; also the key's prefix after `pk_`. */
  id: z
    .string()
    .regex(/^[0-9a-f]{16}$/)
    .describe('Key id.'),
  /** A label for people (who or what uses the key). */
  name: z.string().min(1).max(200).describe('Label.'),
  /** Tenant the key may call; another tenant's endpoint answers 403. */
  tenant: z.string().min(1).describe('Tenant.'),
  /** Scopes the key grants (`punk:admin` for the admin API, and the endpoint's required scopes). */
  scopes: z.array(z.string().min(1)),
  /** Groups of the key's principal, matched by policies. */
  groups: z.array(z.string().min(1)).default([]),
  /** SHA-256 of the whole key, lower-case hex. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** RFC 3339 creation time. */
  createdAt: z.iso.datetime({ offset: true }).describe('RFC 3339.'),
  /** Subject of the admin who created it. */
  createdBy: z.string().min(1).describe('Subject of the admin who created it.'),
});
export type ApiKey = z.infer<typeof apiKeySchema>;

// ---------------------------------------------------------------- ledger

/** Types of trace events. */
export const ledgerEventTypeSchema = z.enum([
  'tool.called',
  'tool.completed',
  'resource.read',
  'resource.completed',
  'prompt.got',
  'prompt.completed',
  'governance.decision',
  'server.state_changed',
  /** A `per-client` upstream session whose owning gateway replica stopped answering was opened again on another replica. */
  'upstream.session_reestablished',
  /** Registry API: a registration was created, replaced, deleted, or tested (`data`: the registration without secret values). */
  'server.registered',
  'server.updated',
  'server.deregistered',
  'server.tested',
  /** A listed tool's definition differs from the pinned one (`data`: `tool`, `previousFingerprint`, `fingerprint`, `diff`, `policy`). */
  'tool.definition_changed',
  /** An admin accepted a changed tool definition (`data`: `tool`, `fingerprint`). */
  'tool.definition_accepted',
  /** Credentials API and OAuth2 refresh (`data`: the credential id and key names, never values). */
  'credential.created',
  /**
   * A credential's keys were replaced: by `credentials.apply` from its Secret, or through the API
   * (`credentials.replace`) (`data`: id, type, key names, `source`).
   */
  'credential.replaced',
  'credential.deleted',
  'credential.refreshed',
  'credential.refresh_failed',
  /**
   * Per-user connections (`spec.auth.perUser`): a principal connected their account to a server, disconnected, or its
   * refresh token was refused so that it must connect again (`data`: `server`, `provider`, `scopes`, `error`; never a token).
   */
  'connection.created',
  'connection.deleted',
  'connection.needs_reconnect',
  /**
   * Approvals, each in the run of the call it belongs to (`data`: `approvalId`, `server`, `tool`, `argumentsDigest`,
   * `rule`, the call's `arguments` on a request, and `decidedBy`/`reason` for decisions): a request recorded, approved,
   * denied, expired, used by its call, and given back by a call that failed before reaching its upstream (usable again).
   */
  'approval.requested',
  'approval.granted',
  'approval.denied',
  'approval.expired',
  'approval.consumed',
  'approval.released',
  /** Settings API: a tenant setting changed (`data`: `key`, `value`, `previous`). */
  'settings.changed',
  /**
   * Prompt ingest (`POST /api/v1/ingest/prompt`): a prompt typed in a client Punk observes (`data`: `prompt`, `cwd`,
   * `promptId`, `provider` `claude-code`, `model` `external`, `route` `live`, `trigger` `hook`; for a prompt longer
   * than `MAX_INGESTED_PROMPT_CHARS`, `prompt` is its beginning, with `truncated` true and `promptChars` its whole
   * length), or a post whose body was too large to read (`prompt.refused`, `data`: `reason`, `bodyBytes`, `maxBodyBytes`,
   * `provider`, `model`, `route`, `trigger`), then its run completed (`data`: `outcome` `ok`, `truncated` or
   * `refused`, `provider`, `model`, `route`, `costUsd` 0).
   */
  'prompt.observed',
  'prompt.refused',
  'observed.completed',
  /**
   * A workflow run (docs/workflows.md "Runs"), in order: `workflow.started` (`data`: `workflow`, `tool`, `trigger`
   * `mcp` or `api`, `arguments`), per node `node.started` (`node`, `kind`) and `node.completed` (`node`, `kind`,
   * `durationMs`, `next`, and for a tool_call `server`, `tool`, `sideEffectLevel`, `isError`), then
   * `workflow.completed` (`durationMs`, `outcome` `ok`, `result`), `workflow.failed` (`durationMs`, `outcome`
   * `failed` or `interrupted`, `node`, `error`) or `workflow.cancelled` (`durationMs`, `outcome` `cancelled`, `node`
   * in flight or next, `reason` naming who cancelled it and how). Every event's principal is the agent `workflow-engine` acting
   * for the caller; a tool_call node's own decision, `tool.called` and `tool.completed` are in the same run.
   */
  'workflow.started',
  'node.started',
  'node.completed',
  'workflow.completed',
  'workflow.failed',
  'workflow.cancelled',
]);
export type LedgerEventType = z.infer<typeof ledgerEventTypeSchema>;

/** A trace event appended to `punk.ledger.events`; `id` deduplicates delivery. */
export const ledgerEventSchema = z.object({
  id: z.uuid(),
  type: ledgerEventTypeSchema,
  tenant: z.string().min(1),
  runId: z.string().min(1),
  /** RFC 3339 time the event happened at its source. */
  occurredAt: z.iso.datetime({ offset: true }),
  /** Component that emitted it (`gateway`, `governance`, …). */
  source: z.string().min(1),
  principal: principalSchema.optional(),
  sessionId: z.string().optional(),
  server: z.string().optional(),
  data: z.record(z.string(), z.unknown()).default({}),
});
export type LedgerEvent = z.infer<typeof ledgerEventSchema>;

// ---------------------------------------------------------------- settings

/**
 * One request on `punk.governance.admin`: the settings API for one tenant. `principal` is the authenticated admin
 * (a change is audited under it); `body` is the HTTP body as received (`settingChangeSchema`, checked by governance).
 */
export const governanceAdminRequestSchema = z.discriminatedUnion('op', [
  z.object({ op: z.literal('settings.get'), tenant: z.string().min(1) }),
  z.object({ op: z.literal('settings.put'), tenant: z.string().min(1), principal: principalSchema, body: z.unknown() }),
]);
export type GovernanceAdminRequest = z.infer<typeof governanceAdminRequestSchema>;

// ---------------------------------------------------------------- registry

/**
 * One request on `punk.gateway.admin`: an operation of the registry API (`servers.*`) or of the credentials API
 * (`credentials.*`) for one tenant. `principal` is the authenticated admin (mutations are audited under it);
 * `body` is the HTTP request body as received: the gateway validates it and names the bad field.
 * `id` is a registration's name (a DNS label) or a credential's id.
 */
export const gatewayAdminRequestSchema = z.discriminatedUnion('op', [
  z.object({ op: z.literal('servers.list'), tenant: z.string().min(1) }),
  z.object({ op: z.literal('servers.get'), tenant: z.string().min(1), id: z.string().min(1) }),
  z.object({ op: z.literal('servers.create'), tenant: z.string().min(1), principal: principalSchema, body: z.unknown() }),
  z.object({
    op: z.literal('servers.update'),
    tenant: z.string().min(1),
    principal: principalSchema,
    id: z.string().min(1),
    body: z.unknown(),
  }),
  z.object({ op: z.literal('servers.delete'), tenant: z.string().min(1), principal: principalSchema, id: z.string().min(1) }),
  z.object({ op: z.literal('servers.test'), tenant: z.string().min(1), principal: principalSchema, id: z.string().min(1) }),
  z.object({ op: z.literal('servers.tools'), tenant: z.string().min(1), id: z.string().min(1) }),
  /** `body`: `{ fingerprint? }`, the reviewed definition's fingerprint (the accept holds only if it is still the pending one). */
  z.object({
    op: z.literal('servers.acceptTool'),
    tenant: z.string().min(1),
    principal: principalSchema,
    id: z.string().min(1),
    tool: z.string().min(1),
    body: z.unknown().optional(),
  }),
  z.object({ op: z.literal('credentials.create'), tenant: z.string().min(1), principal: principalSchema, body: z.unknown() }),
  z.object({ op: z.literal('credentials.list'), tenant: z.string().min(1) }),
  z.object({ op: z.literal('credentials.get'), tenant: z.string().min(1), id: z.string().min(1) }),
  z.object({ op: z.literal('credentials.delete'), tenant: z.string().min(1), principal: principalSchema, id: z.string().min(1) }),
  /** The tenant's workflows (`GET /api/v1/workflows`): reply `{ workflows }` (`workflowViewSchema`). */
  z.object({ op: z.literal('workflows.list'), tenant: z.string().min(1) }),
  /** Workflow `name` with its spec (`GET /api/v1/workflows/<name>`): reply `{ workflow }`. */
  z.object({ op: z.literal('workflows.get'), tenant: z.string().min(1), name: z.string().min(1) }),
  /**
   * Runs workflow `name` for `principal` (`POST /api/v1/workflows/<name>/runs`, trigger `api`); `body` is
   * `workflowRunBodySchema` as received. Reply `workflowRunReplySchema` once the run ended or `waitSeconds` passed.
   */
  z.object({
    op: z.literal('workflows.run'),
    tenant: z.string().min(1),
    principal: principalSchema,
    name: z.string().min(1),
    body: z.unknown(),
  }),
  /**
   * Cancels run `runId` of workflow `name` for `principal` (`POST /api/v1/workflows/<name>/runs/<runId>/cancel`),
   * on whichever gateway replica runs it. Reply `workflowRunReplySchema` (`cancelled`, or `running` when it has not
   * stopped within the wait); errors `WorkflowRunNotFound`, `WorkflowRunNotRunning` (naming its state).
   */
  z.object({
    op: z.literal('workflows.cancel'),
    tenant: z.string().min(1),
    principal: principalSchema,
    name: z.string().min(1),
    runId: z.string().min(1),
  }),
  /**
   * The per-user connections of `principal` (`GET /api/v1/connections`): reply `{ items }` (`connectionItemSchema`),
   * one per server of the tenant with `spec.auth.perUser`.
   */
  z.object({ op: z.literal('connections.list'), tenant: z.string().min(1), principal: principalSchema }),
  /**
   * Starts `principal`'s connect flow to `server` (`POST /api/v1/connections/<namespace>/<name>`): reply
   * `connectionBeginReplySchema`. The state is single-use, expires in 10 minutes and is bound to the principal and to
   * `browserBinding`'s hash (the front sets `browserBinding` as a cookie).
   */
  z.object({
    op: z.literal('connections.begin'),
    tenant: z.string().min(1),
    principal: principalSchema,
    server: z.string().min(1),
    redirectUri: z.string().min(1),
  }),
  /**
   * The provider's redirect back (`GET /connect/callback`): the state is spent whatever happens; with the browser's
   * cookie and a `code`, the code is redeemed and the tokens stored. Reply `{ tenant, server }`; errors name why.
   */
  z.object({
    op: z.literal('connections.complete'),
    state: z.string(),
    browserBinding: z.string().optional(),
    code: z.string().optional(),
    error: z.string().optional(),
    errorDescription: z.string().optional(),
  }),
  /** Deletes `principal`'s connection to `server` (`DELETE /api/v1/connections/<namespace>/<name>`): reply `{}`; `ConnectionNotFound`. */
  z.object({ op: z.literal('connections.delete'), tenant: z.string().min(1), principal: principalSchema, server: z.string().min(1) }),
  /** Replace credential `id` in place (`PUT /api/v1/credentials/<id>`): `body` is `{ id?, type?, data }` as a create's. */
  z.object({
    op: z.literal('credentials.replace'),
    tenant: z.string().min(1),
    principal: principalSchema,
    id: z.string().min(1),
    body: z.unknown(),
  }),
  /**
   * Create or replace credential `body.id` from a Secret (the operator, for an McpCredential). `sourceChecksum`
   * names the Secret content it was made from: when the stored credential was applied from the same checksum the
   * apply changes nothing (so a resync never overwrites a token the gateway rotated since).
   */
  z.object({
    op: z.literal('credentials.apply'),
    tenant: z.string().min(1),
    principal: principalSchema,
    body: z.unknown(),
    sourceChecksum: z.string().min(1),
  }),
]);
export type GatewayAdminRequest = z.infer<typeof gatewayAdminRequestSchema>;

/** One per-user connection of the caller (`GET /api/v1/connections`); times RFC 3339. */
export const connectionItemSchema = z.object({
  namespace: z.string(),
  name: z.string(),
  provider: z.string(),
  scopes: z.array(z.string()),
  connected: z.boolean(),
  connectedAt: z.string().optional(),
  /** Its refresh token was refused (revoked, expired): connect again. */
  needsReconnect: z.boolean().optional(),
});
export type ConnectionItem = z.infer<typeof connectionItemSchema>;

/** Reply to `connections.begin`: where to send the browser, and the secret its cookie binds the state to. */
export const connectionBeginReplySchema = z.object({ authorizationUrl: z.string(), browserBinding: z.string() });
export type ConnectionBeginReply = z.infer<typeof connectionBeginReplySchema>;

/** Bus header of a `punk.registry.changed` message: the `instanceId` of the gateway replica that published it (replicas skip their own). */
export const ORIGIN_HEADER = 'Punk-Origin';

/** Broadcast on `punk.registry.changed`. */
export const registryChangedSchema = z.object({
  tenant: z.string().min(1),
  server: z.string().min(1),
  /**
   * `tool_accepted`: an admin accepted a changed tool definition; every replica re-lists the server (pinning).
   * `tool_withheld`: a review (a listing, or a test of the server) changed which of its tools wait for an admin's
   * review; every replica reads them again, so each hides them (or refuses their calls) at once.
   */
  change: z.enum(['added', 'updated', 'removed', 'state', 'list_changed', 'tool_accepted', 'tool_withheld']),
  state: serverStateSchema.optional(),
});
export type RegistryChanged = z.infer<typeof registryChangedSchema>;

/**
 * Broadcast on `punk.credentials.changed` (with the {@link ORIGIN_HEADER} of the replica that made the change,
 * which has already acted on it): credential `id` of `tenant` was created or deleted. Names only, never a value.
 */
export const credentialsChangedSchema = z.object({ tenant: z.string().min(1), id: z.string().min(1) });
export type CredentialsChanged = z.infer<typeof credentialsChangedSchema>;

/** Broadcast on `punk.resources.updated`: the resource `uri` of a tenant's server changed. */
export const resourceUpdatedSchema = z.object({ tenant: z.string().min(1), server: z.string().min(1), uri: z.string().min(1) });
export type ResourceUpdated = z.infer<typeof resourceUpdatedSchema>;

// ---------------------------------------------------------------- 2025-era sessions

/** Log levels of `logging/setLevel` (MCP 2025-11-25 server/utilities/logging, RFC 5424 severities). */
export const logLevelSchema = z.enum(['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency']);
export type LogLevel = z.infer<typeof logLevelSchema>;

/** Whether a message of severity `level` passes the threshold `threshold` (RFC 5424 order; no threshold: all pass). */
export function passesLogLevel(level: unknown, threshold: LogLevel | undefined): boolean {
  if (threshold === undefined) return true;
  const parsed = logLevelSchema.safeParse(level);
  // An unknown level is passed on: the client decides what to make of it.
  if (!parsed.success) return true;
  return logLevelSchema.options.indexOf(parsed.data) >= logLevelSchema.options.indexOf(threshold);
}

/** Value stored under a session id in bucket `PUNK_SESSIONS`: everything any front replica needs to serve the session. */
export const sessionStateSchema = z.object({
  tenant: z.string().min(1),
  /** Endpoint the session was initialised on (`*`, `name` or `namespace/name`); other endpoints answer 404. */
  scope: z.string().min(1),
  /** Who initialised it; a request with another principal answers 404. */
  principal: principalSchema,
  /** Protocol version negotiated by `initialize`. */
  protocolVersion: z.string().min(1),
  clientInfo: looseObject,
  /** Client capabilities declared in `initialize`. */
  capabilities: looseObject,
  /** Threshold set by `logging/setLevel`; absent until the client sets one. */
  logLevel: logLevelSchema.optional(),
  /** URIs passed to `resources/subscribe`. */
  subscriptions: z.array(z.string()).default([]),
  /** Id of the session's current GET stream: server-initiated events are stored on it. Absent before the first GET. */
  stream: z.string().min(1).optional(),
  /** RFC 3339 creation time. */
  createdAt: z.iso.datetime({ offset: true }),
  /** RFC 3339 time of the last write (which renewed the entry's time to live). */
  renewedAt: z.iso.datetime({ offset: true }),
});
export type SessionState = z.infer<typeof sessionStateSchema>;

/** A message stored on `punk.sse.<sessionId>.<streamId>`: one JSON-RPC message to write as an SSE event. */
export const sseEventSchema = z.object({ message: looseObject });
export type SseEvent = z.infer<typeof sseEventSchema>;

/** Broadcast on `punk.session.<id>.out` once an event is stored: where to read it. */
export const sessionOutSchema = z.object({ streamId: z.string().min(1), seq: z.number().int().positive() });
export type SessionOut = z.infer<typeof sessionOutSchema>;

/** Message on `punk.call.<callId>.cancel`. */
export const callCancelSchema = z.object({ reason: z.string().optional() });
export type CallCancel = z.infer<typeof callCancelSchema>;

/** Broadcast on `punk.gateway.heartbeat`: gateway replica `instance` is alive; `stopping` once, when it stops on purpose. */
export const gatewayHeartbeatSchema = z.object({ instance: z.string().min(1), stopping: z.boolean().optional() });
export type GatewayHeartbeat = z.infer<typeof gatewayHeartbeatSchema>;

/**
 * Broadcast on `punk.session.<id>.control`: the session ended (DELETE), a GET `connection` now holds its stream,
 * or the client sent `notifications/roots/list_changed` (the gateway replicas holding the session's `per-client`
 * upstream sessions pass it on to their upstreams).
 */
export const sessionControlSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('ended') }),
  z.object({ type: z.literal('stream-opened'), connection: z.string().min(1) }),
  z.object({ type: z.literal('roots-changed') }),
]);
export type SessionControl = z.infer<typeof sessionControlSchema>;

/**
 * Broadcast on `punk.call.<callId>.out`: one JSON-RPC message for the client of a running call, either a
 * notification (`notifications/progress` with the client's own `progressToken`) or a request whose `id` is
 * the pending request id to answer on `punk.client-request.<id>.answer`.
 */
export const callOutSchema = z.union([
  z.object({ message: z.looseObject({ jsonrpc: z.literal('2.0'), method: z.string().min(1) }) }),
  /**
   * The gateway replica `accepted` (its `instanceId`) took the call, published before anything of the call reaches
   * the upstream: a call the front saw no acceptance of never reached it.
   */
  z.object({ accepted: z.string().min(1) }),
]);
export type CallOut = z.infer<typeof callOutSchema>;

/**
 * Request on `punk.client-request.<id>.answer`: the client's JSON-RPC response (`result` or `error`) and who
 * sent it: the 2025-era session it came on (`sessionId`), or, for a 2026-07-28 retry, the `caller` named in
 * the verified `requestState` (the holder refuses a mismatch with `CallerMismatch`).
 */
export const clientAnswerSchema = z.object({
  sessionId: z.string().min(1).optional(),
  caller: z.object({ tenant: z.string().min(1), subject: z.string().min(1) }).optional(),
  response: z.looseObject({ jsonrpc: z.literal('2.0'), id: z.union([z.string(), z.number()]) }),
});
export type ClientAnswer = z.infer<typeof clientAnswerSchema>;

/**
 * Request on `punk.tenant.<tenant>.session-message`: one JSON-RPC message of a `per-client` upstream session for
 * the 2025 client session `sessionId`, sent outside any call: a `notifications/message` (stored only when its
 * level reaches the session's stored `logLevel`) or a `roots/list` request whose `id` is the pending request id
 * to answer on `punk.client-request.<id>.answer`.
 */
export const sessionMessageSchema = z.object({
  sessionId: z.string().min(1),
  message: z.looseObject({ jsonrpc: z.literal('2.0'), method: z.string().min(1) }),
});
export type SessionMessage = z.infer<typeof sessionMessageSchema>;

/**
 * Reply on `punk.tenant.<tenant>.session-message`: whether the message was stored on the session's GET stream;
 * when not, `reason` says why (below the session's log level, no GET stream opened yet).
 */
export const sessionMessageReplySchema = z.object({ stored: z.boolean(), reason: z.string().optional() });
export type SessionMessageReply = z.infer<typeof sessionMessageReplySchema>;

// ---------------------------------------------------------------- helpers

/**
 * Validates a received message against its contract.
 * @throws PunkError `InvalidMessage` naming the subject and the first bad field.
 */
export function parseMessage<S extends z.ZodType>(schema: S, subject: string, data: unknown): z.infer<S> {
  const parsed = schema.safeParse(data);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const where = issue && issue.path.length > 0 ? issue.path.join('.') : '(message)';
  throw new PunkError('InvalidMessage', `malformed message on ${subject}: ${where}: ${issue?.message ?? 'invalid'}`, {
    subject,
    issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
  });
}

/**
 * A received message as its contract's type: validated with {@link parseMessage} when it came off the network, taken
 * as it is when it is `local` (built by this process's own typed code: `BusMessageInfo.local`, `StreamMessage.local`).
 * @throws PunkError `InvalidMessage` for a malformed message off the network.
 */
export function receivedMessage<S extends z.ZodType>(schema: S, subject: string, data: unknown, local: boolean | undefined): z.infer<S> {
  return local === true ? (data as z.infer<S>) : parseMessage(schema, subject, data);
}

/**
 * Sends a typed request on `punk.gateway.call` (to any replica), or with `instanceId` to that gateway replica alone
 * (`subjects.gatewayInstanceCall`); the reply is the upstream result or the catalog.
 */
export async function requestGateway(
  bus: Bus,
  request: GatewayRequest,
  timeoutMs: number,
  headers?: BusHeaders,
  instanceId?: string,
): Promise<unknown> {
  const subject = instanceId === undefined ? subjects.gatewayCall : subjects.gatewayInstanceCall(instanceId);
  return bus.request(subject, request, { timeoutMs, ...(headers && { headers }) });
}

/**
 * A request to governance on `subject`. A bus failure becomes an error naming governance, the subject and the
 * deadline, so that no caller down the line (the gateway's reply, mcp-front's answer) blames another part.
 * @throws PunkError `GovernanceTimeout` (no reply within `timeoutMs`: governance is overloaded or hung) or
 *   `GovernanceUnavailable` (no governance replica serves the subject); any other error as it is.
 */
async function requestGovernance(bus: Bus, subject: string, data: unknown, timeoutMs: number): Promise<unknown> {
  try {
    return await bus.request(subject, data, { timeoutMs });
  } catch (error) {
    if (!(error instanceof PunkError)) throw error;
    const details = { subject, timeoutMs };
    if (error.code === 'BusTimeout') {
      throw new PunkError('GovernanceTimeout', `governance did not answer within ${String(timeoutMs)} ms on subject ${subject}`, details, {
        cause: error,
      });
    }
    if (error.code === 'BusNoResponders') {
      throw new PunkError(
        'GovernanceUnavailable',
        `governance did not answer on subject ${subject}: no governance replica is running (start the governance service)`,
        details,
        { cause: error },
      );
    }
    throw error;
  }
}

/**
 * Asks governance for a decision.
 * @throws PunkError `GovernanceTimeout` or `GovernanceUnavailable` naming the subject (see {@link requestGovernance}),
 *   `InvalidMessage` for a malformed reply, or governance's own error.
 */
export async function requestDecision(bus: Bus, check: GovernanceCheck): Promise<GovernanceDecision> {
  const reply = await requestGovernance(bus, subjects.governanceCheck, check, deadlines.governanceCheckMs);
  return parseMessage(governanceDecisionSchema, subjects.governanceCheck, reply);
}

/**
 * Sends one request on `punk.governance.approval` and returns the reply.
 * @throws PunkError `GovernanceTimeout` or `GovernanceUnavailable` naming the subject, or governance's own error
 *   (`ApprovalNotFound`, `ApprovalForbidden`, `ApprovalNotPending`, `ApprovalsUnavailable`).
 */
export async function requestApproval(bus: Bus, request: ApprovalRequest): Promise<unknown> {
  return requestGovernance(bus, subjects.governanceApproval, request, deadlines.governanceApprovalMs);
}

/**
 * Appends a trace event to the ledger stream; resolves once the stream stored it. This is the one place events are
 * appended: when the event's tenant has the redaction setting on (as the settings watch attached to `bus` knows it,
 * settings.ts), its `data` is masked here (redaction/mask.ts), so only the masked form is chained and stored.
 */
export async function appendLedgerEvent(bus: Bus, event: LedgerEvent): Promise<void> {
  // Built to its type by Punk's own code: the ledger validates what reaches it off the network (validation once).
  const stored = redactionOn(bus, event.tenant) ? { ...event, data: maskData(event.data) } : event;
  await bus.append(subjects.ledgerEvents, stored, { msgId: event.id });
}

/**
 * Delivers a client's answer to the gateway replica holding the pending request `requestId`.
 * @throws PunkError `BusNoResponders` when no replica holds it any more (answered, expired, replica gone),
 *   `BusTimeout`, or the holder's error (e.g. `SessionMismatch`).
 */
export async function sendClientAnswer(bus: Bus, requestId: string, answer: ClientAnswer): Promise<void> {
  await bus.request(subjects.clientAnswer(requestId), clientAnswerSchema.parse(answer), { timeoutMs: deadlines.clientAnswerMs });
}

/**
 * Delivers a 2026-07-28 client's input response (a retry's `inputResponses` entry) to the gateway replica
 * holding the pending request `requestId`, and resolves with the call's next outcome: its final result or
 * the next `input_required` result (MCP 2026-07-28 basic/patterns/mrtr).
 * @param timeoutMs deadline of the whole remaining call, in milliseconds.
 * @throws PunkError `BusNoResponders` when no replica holds the request any more (answered, expired,
 *   replica gone), `BusTimeout`, `CallerMismatch`, or the relay's own errors (`UpstreamError`, …).
 */
export async function sendInputResponse(bus: Bus, requestId: string, answer: ClientAnswer, timeoutMs: number): Promise<unknown> {
  return bus.request(subjects.clientAnswer(requestId), clientAnswerSchema.parse(answer), { timeoutMs });
}

/**
 * Asks a front of the tenant to store a `per-client` upstream's message on its client session's GET stream.
 * @throws PunkError `SessionNotFound` (the session ended or expired), `BusNoResponders` (no front of the
 *   tenant runs), `BusTimeout`, or another bus error.
 */
export async function sendSessionMessage(bus: Bus, tenant: string, message: SessionMessage): Promise<SessionMessageReply> {
  const subject = subjects.sessionMessage(tenant);
  const reply = await bus.request(subject, sessionMessageSchema.parse(message), { timeoutMs: deadlines.sessionMessageMs });
  return parseMessage(sessionMessageReplySchema, subject, reply);
}
