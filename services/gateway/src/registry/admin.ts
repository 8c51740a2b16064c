/**
 * The gateway's side of the registry and credentials APIs: the handler of
 * `punk.gateway.admin` (queue group `gateway`; contract
 * `gatewayAdminRequestSchema`). `servers.*` operations are served here;
 * `credentials.*` and `servers.acceptTool` go to the credentials vault and
 * the tool pins, which are injected. mcp-front serves the same operations
 * over HTTP under `/api/v1`.
 */
import type { WorkflowAdminRequest } from '../workflows/served.js';
import { randomUUID } from 'node:crypto';
import {
  acceptToolBodySchema,
  appendLedgerEvent,
  classify,
  dnsLabel,
  gatewayAdminRequestSchema,
  parseMessage,
  PunkError,
  subjects,
  type Bus,
  type GatewayAdminRequest,
  type LedgerEvent,
  type LedgerEventType,
  type Logger,
  type McpServer,
  type Principal,
  type RequestHandler,
  type ServerCatalog,
  type SideEffectLevel,
} from '@punk/lib';
import { declaredLevelOf, type McpItem } from '../catalog.js';
import { isCredentialReference, type CredentialVault } from '../credentials/index.js';
import { checkDestination, redactUrl, type DestinationPolicy } from '../egress/index.js';
import type { ToolPinning } from '../pinning/tool-pinning.js';
import { auditedRegistration, managedSummary, parseRegistration, toMcpServer, typeOf, type Registration } from './registration.js';
import type { ServedSet } from './served-set.js';
import type { RegistrationStore, ServerRecord, StoredRegistration, TestOutcome } from './store.js';

/** A cached tool listing older than this is replaced by a live one (`servers.tools`), in milliseconds. */
export const TOOLS_CACHE_MAX_AGE_MS = 10 * 60_000;

/** The credentials vault as the admin API uses it (`credentials.*`). */
export type CredentialsAdmin = Pick<CredentialVault, 'create' | 'replace' | 'apply' | 'list' | 'get' | 'delete'>;

/** The tool-definition pins as the admin API uses them (`servers.tools`, `servers.acceptTool`, `servers.delete`). */
export type PinsAdmin = Pick<ToolPinning, 'accept' | 'pins' | 'forget' | 'pendingReviews'>;

/** What a test connection found: the served tools (allow/deny and overrides applied), or why it failed. */
export interface ProbeResult {
  ok: boolean;
  tools: McpItem[];
  /** Time to connect and list, in milliseconds. */
  latencyMs: number;
  error?: string;
  /** What is wrong but served (the catalog's `warnings`). */
  warnings?: string[];
}

/**
 * The side-effect level of each listed tool, by name, as governance classifies a call of it (lib policy/classify.ts):
 * the level the manifest declares (or an openapi operation's method implies), else the name heuristics.
 */
export function levelsOf(
  server: McpServer,
  tools: McpItem[],
): Record<string, { level: SideEffectLevel; source: 'declared' | 'heuristic' }> {
  const levels: Record<string, { level: SideEffectLevel; source: 'declared' | 'heuristic' }> = {};
  for (const tool of tools) {
    const name = String(tool.name);
    const declaredLevel = declaredLevelOf(server, name, tool);
    const { level } = classify({
      kind: 'tool',
      target: name,
      server: server.metadata.name,
      ...(declaredLevel !== undefined && { declaredLevel }),
    });
    levels[name] = { level, source: declaredLevel === undefined ? 'heuristic' : 'declared' };
  }
  return levels;
}

/** What {@link createAdminHandler} needs. */
export interface AdminDeps {
  bus: Bus;
  log: Logger;
  store: RegistrationStore;
  served: ServedSet;
  /** Whether stdio registrations are accepted (embedded mode). */
  allowStdioRegistrations: boolean;
  /** The catalog entry of a served server's pooled connection on this replica, if it is served here. */
  catalogOf(tenant: string, name: string): ServerCatalog | undefined;
  /** Why tools of the server are left out of `/mcp` or its own endpoint (naming.ts `NameMap.conflicts`); empty when none is. */
  nameConflictsOf(tenant: string, name: string): string[];
  /** Connects to a server on a fresh connection of its own (not the pool's), lists its tools, and closes it. */
  probe(server: McpServer): Promise<ProbeResult>;
  /** Answers the workflows API operations (workflows/served.ts). */
  workflows(request: WorkflowAdminRequest): Promise<unknown>;
  /** Answers the per-user connections operations (connections.ts). */
  connections(request: Extract<GatewayAdminRequest, { op: `connections.${string}` }>): Promise<unknown>;
  /** The SSRF guard's policy: an http registration's URL must pass it to be stored. */
  egress: DestinationPolicy;
  credentials: CredentialsAdmin;
  pins: PinsAdmin;
  /** After a test of the server (its tools listed on a connection of the test's own): re-list the pooled connection here. */
  onTested(tenant: string, name: string): Promise<void>;
  /** After an admin accepted a tool definition: re-list the server here and tell the other replicas and the fronts. */
  onToolAccepted(tenant: string, name: string): Promise<void>;
  /**
   * After a credential was created, replaced or deleted: reconnect the tenant's servers that reference it here, and tell
   * the other replicas, so no connection keeps sending a value resolved before the change.
   */
  onCredentialChanged(tenant: string, id: string): Promise<void>;
}

/** One server as the registry API shows it. */
export interface ServerView {
  name: string;
  namespace: string;
  type: 'stdio' | 'http' | 'openapi';
  /** From a manifest or custom resource: read-only through the API. */
  managed: boolean;
  /** State of this gateway replica's pooled connection (`stopped` when it does not serve the server). */
  state: ServerCatalog['state'];
  lastError?: string;
  /** The catalog's warnings: what is wrong but served. */
  warnings?: string[];
  toolCount: number;
  /** Tools whose changed definition awaits an admin's review (not counted in `toolCount` when hidden). */
  pendingReviews: string[];
  status: ServerRecord['status'];
  latencyMs?: number;
  testedAt?: string;
  /** The circuit breaker of this replica's pooled connection. */
  circuit?: ServerCatalog['circuit'];
  /** The transport this replica's pooled connection speaks (`streamable-http`, or `sse` after the fallback; `stdio`). */
  transport?: ServerCatalog['transport'];
  /** Tools of the server that no endpoint exposes because their name collides (listed twice, say), each with why. */
  nameConflicts?: string[];
  /** The registration body as stored; for a managed server, a summary of its manifest's spec. */
  registration: Record<string, unknown>;
  createdAt?: string;
  createdBy?: string;
  updatedAt?: string;
  updatedBy?: string;
}

type Target =
  { managed: true; server: McpServer; record: ServerRecord } | { managed: false; stored: StoredRegistration; record: ServerRecord };

/**
 * Builds the `punk.gateway.admin` handler. Replies: `servers.list` `{ servers }`; `servers.get`, `servers.create`,
 * `servers.update` `{ server }`; `servers.delete` `{}`; `servers.test` `{ ok, toolCount, pendingReviews, tools, latencyMs, error? }`;
 * `servers.tools` `{ tools, listedAt, cached, pins, levels, warnings? }` ({@link levelsOf}); `servers.acceptTool` `{ tool, fingerprint }`; `credentials.create`,
 * `credentials.replace` and `credentials.get` `{ credential }`, `credentials.apply` `{ credential, outcome }` (`created`, `replaced` or
 * `unchanged`), `credentials.list` `{ credentials }`, `credentials.delete` `{}`. Literal
 * `env` and `headers` values of a registration are never answered (see {@link maskedRegistration}).
 * @throws (to the requester) PunkError `InvalidMessage` (malformed request), `InvalidRegistration` (the message
 *   names the field), `StdioRegistrationsDisabled`, `ServerNotFound` (also for another tenant's server),
 *   `ServerExists`, `ServerManaged` (a managed server is read-only), `ServerUnavailable` (a live listing failed),
 *   `EgressRefused` (the SSRF guard refused `body.url`), the vault's and the pins' errors, `DatabaseUnavailable`, or the bus's errors.
 */
export function createAdminHandler(deps: AdminDeps): RequestHandler {
  const { store, served } = deps;

  /** The ServerNotFound of `id`, thrown at once when `id` cannot be a server name (nothing is queried). */
  const notFound = (tenant: string, id: string) =>
    new PunkError('ServerNotFound', `tenant ${tenant} has no server named ${id}`, { server: id });
  const checkName = (tenant: string, id: string) => {
    if (!dnsLabel.safeParse(id).success) throw notFound(tenant, id);
  };

  const target = async (tenant: string, id: string): Promise<Target> => {
    checkName(tenant, id);
    const server = served.managedServer(tenant, id);
    if (server) return { managed: true, server, record: await served.managedRecord(tenant, id) };
    const stored = await store.get(tenant, id);
    if (!stored) throw notFound(tenant, id);
    return { managed: false, stored, record: stored };
  };

  const view = (tenant: string, found: Target): ServerView => {
    const name = found.managed ? found.server.metadata.name : found.stored.name;
    const catalog = deps.catalogOf(tenant, name);
    const { record } = found;
    // A failed test's error is the latest word only until a listing after it shows the server answering again.
    const testError =
      record.listedAt !== undefined && record.testedAt !== undefined && record.listedAt > record.testedAt ? undefined : record.lastError;
    const lastError = catalog?.lastError ?? (found.managed ? undefined : served.refusal(tenant, name)) ?? testError;
    const nameConflicts = deps.nameConflictsOf(tenant, name);

    return {
      name,
      namespace: tenant,
      type: found.managed ? typeOf(found.server) : found.stored.body.type,
      managed: found.managed,
      state: catalog?.state ?? 'stopped',
      ...(lastError !== undefined && { lastError }),
      ...(catalog?.warnings && { warnings: catalog.warnings }),
      toolCount: catalog?.state === 'ready' ? catalog.tools.length : (record.toolCount ?? catalog?.tools.length ?? 0),
      pendingReviews: deps.pins.pendingReviews(tenant, name),
      status: record.status,
      ...(record.latencyMs !== undefined && { latencyMs: record.latencyMs }),
      ...(record.testedAt !== undefined && { testedAt: record.testedAt }),
      ...(catalog?.circuit !== undefined && { circuit: catalog.circuit }),
      ...(catalog?.transport !== undefined && { transport: catalog.transport }),
      ...(nameConflicts.length > 0 && { nameConflicts }),
      registration: found.managed ? managedSummary(found.server) : maskedRegistration(found.stored.body),
      ...(!found.managed && {
        createdAt: found.stored.createdAt,
        createdBy: found.stored.createdBy,
        updatedAt: found.stored.updatedAt,
        updatedBy: found.stored.updatedBy,
      }),
    };
  };

  /** The McpServer of a target, refusing a stdio registration where those may not run. */
  const serverOf = (tenant: string, found: Target): McpServer => {
    if (found.managed) return found.server;
    checkStdio(found.stored.body);
    return toMcpServer(tenant, found.stored.body);
  };

  const checkStdio = (registration: Registration) => {
    if (registration.type === 'stdio' && !deps.allowStdioRegistrations) {
      throw new PunkError(
        'StdioRegistrationsDisabled',
        'body.type: stdio registrations run a child process on the gateway host and are accepted only in embedded mode (punk up); register an http server (url) instead',
        { field: 'body.type' },
      );
    }
  };

  const refuseManaged = (tenant: string, id: string, what: string) => {
    if (served.managedServer(tenant, id)) {
      throw new PunkError(
        'ServerManaged',
        `server ${id} of tenant ${tenant} comes from a manifest or custom resource and cannot be ${what} through the API; change its McpServer instead`,
        { server: id },
      );
    }
  };

  const audit = (type: LedgerEventType, tenant: string, name: string, principal: Principal, data: Record<string, unknown>) =>
    appendLedgerEvent(deps.bus, registryEvent(type, tenant, name, principal, data));

  const validRegistration = (tenant: string, body: unknown, fixedName?: string): Registration => {
    const registration = parseRegistration(body, fixedName);
    checkStdio(registration);
    toMcpServer(tenant, registration);
    return registration;
  };

  /**
   * Refuses an http registration whose URL, or an openapi registration whose document URL or base URL, does not pass
   * the SSRF guard now (each is checked again at every connect or call).
   */
  const checkEgress = async (registration: Registration): Promise<void> => {
    const urls = [
      ['body.url', registration.url],
      ['body.openapi.url', registration.openapi?.url],
      ['body.openapi.baseUrl', registration.openapi?.baseUrl],
    ] as const;
    for (const [field, url] of urls) {
      if (url === undefined) continue;
      try {
        await checkDestination(url, deps.egress);
      } catch (error) {
        if (error instanceof PunkError) throw new PunkError(error.code, `${field}: ${error.message}`, { field, ...error.details });
        throw error;
      }
    }
  };

  const handle = async (request: GatewayAdminRequest): Promise<unknown> => {
    switch (request.op) {
      case 'servers.list': {
        const { tenant } = request;
        const records = await served.managedRecords(tenant);
        const managed = served
          .managedOf(tenant)
          .map((server) => view(tenant, { managed: true, server, record: records.get(server.metadata.name) ?? { status: 'unknown' } }));
        const names = new Set(managed.map((s) => s.name));
        const registered = (await store.list(tenant))
          .filter((s) => !names.has(s.name))
          .map((stored) => view(tenant, { managed: false, stored, record: stored }));
        return { servers: [...managed, ...registered].sort((a, b) => a.name.localeCompare(b.name)) };
      }
      case 'servers.get':
        return { server: view(request.tenant, await target(request.tenant, request.id)) };
      case 'servers.create': {
        const { tenant, principal } = request;
        const registration = validRegistration(tenant, unmaskedBody(request.body, undefined));
        refuseManaged(tenant, registration.name, 'registered again');
        await checkEgress(registration);
        const stored = await store.insert(tenant, registration, principal.subject);
        await served.reload(tenant, registration.name, true);
        await audit('server.registered', tenant, registration.name, principal, auditedRegistration(registration));
        return { server: view(tenant, { managed: false, stored, record: stored }) };
      }
      case 'servers.update': {
        const { tenant, principal, id } = request;
        checkName(tenant, id);
        refuseManaged(tenant, id, 'changed');
        const previous = await store.get(tenant, id);
        const registration = validRegistration(tenant, unmaskedBody(request.body, previous?.body), id);
        await checkEgress(registration);
        const stored = await store.replace(tenant, registration, principal.subject);
        if (!stored) throw notFound(tenant, id);
        await served.reload(tenant, id, true);
        await audit('server.updated', tenant, id, principal, auditedRegistration(registration));
        return { server: view(tenant, { managed: false, stored, record: stored }) };
      }
      case 'servers.delete': {
        const { tenant, principal, id } = request;
        checkName(tenant, id);
        refuseManaged(tenant, id, 'deleted');
        if (!(await store.delete(tenant, id))) throw notFound(tenant, id);
        await served.reload(tenant, id, true);
        // A server registered again under this name is a new one: its tools are pinned afresh.
        await deps.pins.forget(tenant, id);
        await audit('server.deregistered', tenant, id, principal, {});
        return {};
      }
      case 'servers.test': {
        const { tenant, principal, id } = request;
        const found = await target(tenant, id);
        const result = await deps.probe(serverOf(tenant, found));
        if (result.ok) await deps.onTested(tenant, id);
        const outcome: TestOutcome = {
          ok: result.ok,
          toolCount: result.tools.length,
          tools: result.tools,
          latencyMs: result.latencyMs,
          at: new Date().toISOString(),
          ...(result.error !== undefined && { error: result.error }),
        };
        if (found.managed) await served.recordManagedTest(tenant, id, outcome);
        else await store.recordTest(tenant, id, outcome);
        await audit('server.tested', tenant, id, principal, {
          ok: outcome.ok,
          toolCount: outcome.toolCount,
          latencyMs: outcome.latencyMs,
          ...(outcome.error !== undefined && { error: outcome.error }),
        });
        return {
          ok: outcome.ok,
          toolCount: outcome.toolCount,
          pendingReviews: deps.pins.pendingReviews(tenant, id),
          tools: outcome.tools,
          latencyMs: outcome.latencyMs,
          ...(outcome.error !== undefined && { error: outcome.error }),
        };
      }
      case 'servers.tools': {
        const { tenant, id } = request;
        const found = await target(tenant, id);
        const { tools, listedAt } = found.record;
        const pins = await deps.pins.pins(tenant, id);
        const levels = (listed: McpItem[]) => levelsOf(found.managed ? found.server : toMcpServer(tenant, found.stored.body), listed);
        if (tools && listedAt && Date.now() - Date.parse(listedAt) < TOOLS_CACHE_MAX_AGE_MS) {
          const warnings = deps.catalogOf(tenant, id)?.warnings;
          return { tools, listedAt, cached: true, pins, levels: levels(tools), ...(warnings && { warnings }) };
        }
        const result = await deps.probe(serverOf(tenant, found));
        if (!result.ok)
          throw new PunkError('ServerUnavailable', `the tools of server ${id} could not be listed: ${result.error ?? 'unknown error'}`, {
            server: id,
          });
        await deps.onTested(tenant, id);
        const at = new Date().toISOString();
        await served.recordListing(tenant, id, result.tools, at);
        return {
          tools: result.tools,
          listedAt: at,
          cached: false,
          pins,
          levels: levels(result.tools),
          ...(result.warnings && { warnings: result.warnings }),
        };
      }
      case 'servers.acceptTool': {
        const { tenant, principal, id, tool } = request;
        await target(tenant, id);
        const accepted = await deps.pins.accept(tenant, id, tool, principal, acceptBodyOf(request.body).fingerprint);
        await deps.onToolAccepted(tenant, id);
        return accepted;
      }
      case 'credentials.create': {
        const credential = await deps.credentials.create(request.tenant, request.principal, request.body);
        await deps.onCredentialChanged(request.tenant, credential.id);
        return { credential };
      }
      case 'credentials.replace': {
        const credential = await deps.credentials.replace(request.tenant, request.principal, request.id, request.body);
        await deps.onCredentialChanged(request.tenant, credential.id);
        return { credential };
      }
      case 'credentials.apply': {
        const applied = await deps.credentials.apply(request.tenant, request.principal, request.body, request.sourceChecksum);
        if (applied.outcome !== 'unchanged') await deps.onCredentialChanged(request.tenant, applied.credential.id);
        return applied;
      }
      case 'credentials.list':
        return { credentials: await deps.credentials.list(request.tenant) };
      case 'credentials.get':
        return { credential: await deps.credentials.get(request.tenant, request.id) };
      case 'credentials.delete':
        await deps.credentials.delete(request.tenant, request.principal, request.id);
        await deps.onCredentialChanged(request.tenant, request.id);
        return {};
      case 'connections.list':
      case 'connections.begin':
      case 'connections.complete':
      case 'connections.delete':
        return deps.connections(request);
      case 'workflows.list':
      case 'workflows.get':
      case 'workflows.run':
      case 'workflows.cancel':
        return deps.workflows(request);
    }
  };

  return async (data) => handle(parseMessage(gatewayAdminRequestSchema, subjects.gatewayAdmin, data));
}

/** Run id of a server's registry events: `registry.<tenant>.<name>` (no `/`, so it fits a URL path segment). */
export function registryRunId(tenant: string, name: string): string {
  return `registry.${tenant}.${name}`;
}

/** A registry ledger event (`server.registered`, `server.updated`, `server.deregistered`, `server.tested`) by an admin. */
function registryEvent(
  type: LedgerEventType,
  tenant: string,
  name: string,
  principal: Principal,
  data: Record<string, unknown>,
): LedgerEvent {
  return {
    id: randomUUID(),
    type,
    tenant,
    runId: registryRunId(tenant, name),
    occurredAt: new Date().toISOString(),
    source: 'gateway',
    principal,
    server: name,
    data,
  };
}

/** The body of an accept: empty, or the fingerprint the admin reviewed. @throws PunkError `InvalidRequest` naming the field. */
function acceptBodyOf(body: unknown): { fingerprint?: string | undefined } {
  const parsed = acceptToolBodySchema.safeParse(body ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const field =
    issue.code === 'unrecognized_keys'
      ? `body.${issue.keys[0]}: unknown field`
      : `body${issue.path.map((p) => `.${String(p)}`).join('')}: ${issue.message}`;
  throw new PunkError('InvalidRequest', field, { field });
}

/** What the API shows instead of a literal `env` or `headers` value: only `cred:` references are shown as stored. */
export const MASKED_VALUE = '<redacted>';

/**
 * A stored registration as the API shows it: literal `env` and `headers` values (which may be secrets typed in
 * by an admin) replaced by {@link MASKED_VALUE}; `cred:` references shown as they are; the URL's query values
 * redacted (`?token=<redacted>`, see `redactUrl`).
 */
export function maskedRegistration(body: Registration): Record<string, unknown> {
  const mask = (values: Record<string, string> | undefined) =>
    values &&
    Object.fromEntries(Object.entries(values).map(([name, value]) => [name, isCredentialReference(value) ? value : MASKED_VALUE]));
  return {
    ...body,
    ...(body.url !== undefined && { url: redactUrl(body.url) }),
    ...(body.env && { env: mask(body.env) }),
    ...(body.headers && { headers: mask(body.headers) }),
  };
}

/**
 * The body of a registration (POST) or replacement (PUT, `stored` being the registration it replaces) with every
 * {@link MASKED_VALUE} put back to the stored value of the same `env` or `headers` entry, and the redacted URL to the
 * stored URL, so a registration read
 * from the API can be edited and sent back as a whole.
 * @throws PunkError `InvalidRegistration` naming the entry when it is {@link MASKED_VALUE} but no value is stored for it.
 */
function unmaskedBody(body: unknown, stored: Registration | undefined): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
  const out = { ...(body as Record<string, unknown>) };
  // The URL as the API showed it (query values redacted) stands for the stored URL.
  if (stored?.url !== undefined && out['url'] !== stored.url && out['url'] === redactUrl(stored.url)) out['url'] = stored.url;
  for (const field of ['env', 'headers'] as const) {
    const values = out[field];
    const previous = stored?.[field] ?? {};
    /** The stored value `name` stands for; `label` names the entry in the error. */
    const storedValue = (name: string, label: string): string => {
      // Header names are case-insensitive (RFC 9110 §5.1); variable names are not.
      const storedName =
        field === 'headers'
          ? Object.keys(previous).find((key) => key.toLowerCase() === name.toLowerCase())
          : Object.hasOwn(previous, name)
            ? name
            : undefined;
      if (storedName === undefined) {
        throw new PunkError(
          'InvalidRegistration',
          `body.${field}${label}: is ${MASKED_VALUE}, which stands for a stored value, but none is stored for this entry; send the value itself`,
          { field: `body.${field}${label}` },
        );
      }
      return previous[storedName] ?? '';
    };
    if (Array.isArray(values)) {
      // A manifest's list: `{ name, value: "<redacted>" }` entries stand for the stored value too.
      out[field] = values.map((entry: unknown, i) => {
        if (typeof entry !== 'object' || entry === null) return entry;
        const { name, value } = entry as Record<string, unknown>;
        return value === MASKED_VALUE && typeof name === 'string' ? { ...entry, value: storedValue(name, `[${String(i)}].value`) } : entry;
      });
      continue;
    }
    if (typeof values !== 'object' || values === null) continue;
    out[field] = Object.fromEntries(
      Object.entries(values as Record<string, unknown>).map(([name, value]) =>
        value === MASKED_VALUE ? [name, storedValue(name, `.${name}`)] : [name, value],
      ),
    );
  }
  return out;
}
