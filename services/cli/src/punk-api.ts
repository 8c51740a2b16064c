/**
 * The one HTTP client of a Punk deployment that `punk mcp` and the admin commands share: the REST API under
 * `/api/v1` (docs/registry-api.md, docs/governance.md "Approvals", the ledger's runs and verify) and the
 * deployment's aggregated `/mcp` endpoint (an SDK v2 `Client` over Streamable HTTP), with one API key as a bearer
 * token. It never touches storage: it can point at `punk up`, `punk cluster` or a Helm install alike.
 */
import {
  Client,
  ProtocolError,
  SdkError,
  SdkErrorCode,
  StreamableHTTPClientTransport,
  type CallToolResult,
  type ClientOptions,
} from '@modelcontextprotocol/client';
import {
  WORKFLOW_SERVER,
  approvalViewSchema,
  namespacedName,
  runsPageSchema,
  runSummarySchema,
  verificationSchema,
  workflowViewSchema,
  type WorkflowRunReply,
} from '@punk/lib';
import type { z } from 'zod';

/** Where a deployment is and the key to use: `PUNK_GATEWAY_URL` (default `http://localhost:4100`), `PUNK_MCP_API_KEY`. */
export interface PunkTarget {
  baseUrl: string;
  apiKey: string | undefined;
}

/** The default deployment: `punk up` on its default port. */
export const DEFAULT_GATEWAY_URL = 'http://localhost:4100';

/** Reads the target from the environment. @throws PunkApiError `InvalidGatewayUrl` when `PUNK_GATEWAY_URL` is no http(s) URL. */
export function targetFromEnv(env: NodeJS.ProcessEnv): PunkTarget {
  const raw = env['PUNK_GATEWAY_URL']?.trim() || DEFAULT_GATEWAY_URL;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new PunkApiError('InvalidGatewayUrl', `PUNK_GATEWAY_URL is not a URL (got "${raw}"); set it like ${DEFAULT_GATEWAY_URL}`, 0);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new PunkApiError('InvalidGatewayUrl', `PUNK_GATEWAY_URL must be http:// or https:// (got "${raw}")`, 0);
  return { baseUrl: raw.replace(/\/+$/, ''), apiKey: env['PUNK_MCP_API_KEY']?.trim() || undefined };
}

/**
 * A failed request. `status` is the HTTP status (0: the deployment could not be reached); `code` the API's error
 * code (`insufficient_scope`, `ApprovalForbidden`, `Unreachable`, …); `scope` the scope a 403 names, when it names one.
 */
export class PunkApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
    readonly scope?: string,
  ) {
    super(message);
    this.name = 'PunkApiError';
  }
  /** The deployment did not answer at all. */
  get unreachable(): boolean {
    return this.code === 'Unreachable';
  }
  /** The deployment took the request and did not answer it within the client's deadline. */
  get timedOut(): boolean {
    return this.code === 'Timeout';
  }
  /** The key was refused (401) or lacks a right (403). */
  get refused(): boolean {
    return this.status === 401 || this.status === 403;
  }
}

/** How long one request may take by default before it fails as timed out, in milliseconds. */
const REQUEST_TIMEOUT_MS = 30_000;

/** Longest a workflow run through `/mcp` may take before its call fails, in milliseconds (the gateway's limit is 5 minutes a run). */
const WORKFLOW_CALL_TIMEOUT_MS = 6 * 60_000;

/** A tool of the deployment's `/mcp`, as its `tools/list` gives it (names namespaced `<server>__<tool>`). */
export interface DeploymentTool {
  name: string;
  title?: string;
  description?: string;
  annotations?: Record<string, unknown>;
}

/**
 * The query of `GET /api/v1/runs`: `limit` (1 to 500), `cursor` (the page: a previous answer's `nextCursor`), and
 * filters combined with AND (exact values; `type` an event type the run holds; `before`, `since`, `until` RFC 3339).
 */
export interface RunsQuery {
  limit?: number;
  cursor?: string;
  before?: string;
  server?: string;
  tool?: string;
  subject?: string;
  type?: string;
  outcome?: string;
  trigger?: string;
  since?: string;
  until?: string;
}

/** How a {@link PunkApi} asks. */
export interface PunkApiOptions {
  /**
   * The deadline of every request, REST and MCP alike, in milliseconds (default 30 s; a workflow run through `/mcp`
   * gets the longer of this and 6 minutes unless this is given). A request past it fails as `Timeout`, naming it.
   */
  requestTimeoutMs?: number;
}

/** Client of one deployment. Every method throws {@link PunkApiError}. */
export class PunkApi {
  private readonly timeoutMs: number;
  private readonly workflowTimeoutMs: number;

  constructor(
    readonly target: PunkTarget,
    options: PunkApiOptions = {},
  ) {
    this.timeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
    this.workflowTimeoutMs = options.requestTimeoutMs ?? WORKFLOW_CALL_TIMEOUT_MS;
  }

  /** The error of a request that got no answer within `timeoutMs`, naming it (`GET /api/v1/runs`, `POST /mcp tools/list`). */
  private timeout(request: string, timeoutMs = this.timeoutMs): PunkApiError {
    return new PunkApiError(
      'Timeout',
      `${request}: no answer within ${seconds(timeoutMs)} from the deployment at ${this.target.baseUrl} (it took the connection and did not answer)`,
      0,
    );
  }

  /** Runs one MCP request of `client` (`method` names it), a timeout of the SDK as {@link timeout}, any other failure as {@link mcpErrorOf}. */
  private async mcpRequest<T>(method: string, work: (timeout: number) => Promise<T>, timeoutMs = this.timeoutMs): Promise<T> {
    try {
      return await work(timeoutMs);
    } catch (error) {
      if (error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout) throw this.timeout(`POST /mcp ${method}`, timeoutMs);
      throw error;
    }
  }

  private headers(): Record<string, string> {
    return this.target.apiKey ? { authorization: `Bearer ${this.target.apiKey}` } : {};
  }

  /** One JSON request to `/api/v1<path>`; answers the parsed body (undefined for 204). */
  async request<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    const url = `${this.target.baseUrl}/api/v1${path}`;
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: { ...this.headers(), ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      if (error instanceof DOMException && error.name === 'TimeoutError') throw this.timeout(`${method} /api/v1${path}`);
      const cause = error instanceof Error ? ((error.cause as Error | undefined)?.message ?? error.message) : String(error);
      throw new PunkApiError(
        'Unreachable',
        `the deployment at ${this.target.baseUrl} cannot be reached (${cause}); is Punk running there?`,
        0,
      );
    }
    if (response.status === 204) return undefined as T;
    let text: string;
    try {
      text = await response.text();
    } catch (error) {
      if (error instanceof DOMException && error.name === 'TimeoutError') throw this.timeout(`${method} /api/v1${path}`);
      throw new PunkApiError('Unreachable', `${method} /api/v1${path}: the answer broke off (${String(error)})`, 0);
    }
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (response.ok) return parsed as T;
    throw errorOf(method, path, response, parsed, text);
  }

  /** The tenant's servers (`GET /mcp/servers`). */
  async servers(): Promise<ServerView[]> {
    return (await this.request<{ servers: ServerView[] }>('GET', '/mcp/servers')).servers;
  }

  /** Connects to a server and lists its tools (`POST /mcp/servers/<name>/test`). */
  async testServer(name: string): Promise<TestResult> {
    return this.request<TestResult>('POST', `/mcp/servers/${encodeURIComponent(name)}/test`);
  }

  /** A page of runs, most recently active first, and the `cursor` of the next page while there is one (`GET /runs`). */
  async runs(query: RunsQuery = {}): Promise<RunsPage> {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) if (value !== undefined) params.set(name, String(value));
    const qs = params.size > 0 ? `?${params.toString()}` : '';
    return this.request<RunsPage>('GET', `/runs${qs}`);
  }

  /** One run with its events in chain order (`GET /runs/<id>`). */
  async run(id: string): Promise<RunDetail> {
    return this.request<RunDetail>('GET', `/runs/${encodeURIComponent(id)}`);
  }

  /** One bounded verification of the tenant's chain (`GET /ledger/verify`). */
  async verify(): Promise<Verification> {
    return this.request<Verification>('GET', '/ledger/verify');
  }

  /** Approval requests the caller may see, newest first (`GET /approvals?state=`). */
  async approvals(state?: string): Promise<Approval[]> {
    const qs = state ? `?state=${encodeURIComponent(state)}` : '';
    return (await this.request<{ approvals: Approval[] }>('GET', `/approvals${qs}`)).approvals;
  }

  /** Approves or denies one request (`POST /approvals/<id>/approve|deny`). */
  async decide(id: string, decision: 'approve' | 'deny', reason?: string): Promise<Approval> {
    const body = reason === undefined ? {} : { reason };
    return (await this.request<{ approval: Approval }>('POST', `/approvals/${encodeURIComponent(id)}/${decision}`, body)).approval;
  }

  /** The API keys the caller may list (`GET /api-keys`). */
  async keys(): Promise<ApiKeyView[]> {
    return (await this.request<{ apiKeys: ApiKeyView[] }>('GET', '/api-keys')).apiKeys;
  }

  /**
   * An SDK v2 `Client` connected to the deployment's aggregated `/mcp` over Streamable HTTP with the key, in the
   * `era` asked for (`legacy`: the 2025 `initialize` handshake; `modern`: pinned to 2026-07-28); `options` are the
   * Client's (capabilities, listChanged handlers, inputRequired); `setUp` registers the client's own handlers on it
   * before it connects. The caller closes it. @throws PunkApiError when it cannot connect.
   */
  async connectMcp(era: 'legacy' | 'modern' = 'legacy', options: ClientOptions = {}, setUp?: (client: Client) => void): Promise<Client> {
    const client = new Client(
      { name: 'punk-cli', version: '0.1.0' },
      { ...options, ...(era === 'modern' && { versionNegotiation: { mode: { pin: '2026-07-28' } } }) },
    );
    setUp?.(client);
    const transport = new StreamableHTTPClientTransport(new URL(`${this.target.baseUrl}/mcp`), {
      requestInit: { headers: this.headers() },
    });
    try {
      await this.mcpRequest('initialize', (timeout) => client.connect(transport, { timeout }));
      return client;
    } catch (error) {
      await client.close().catch(() => undefined);
      throw mcpErrorOf(error, this.target.baseUrl);
    }
  }

  /** The tenant's workflows with their readiness (`GET /workflows`, docs/workflows.md "The API"). */
  async workflows(): Promise<WorkflowView[]> {
    return (await this.request<{ workflows: WorkflowView[] }>('GET', '/workflows')).workflows;
  }

  /**
   * Runs the workflow `name` as a tool of the deployment's `/mcp` (`punk_workflow__<name>`, so the run's trigger is
   * `mcp` and the key's policy applies) and answers the tool's result, once the run ended (at most
   * {@link WORKFLOW_CALL_TIMEOUT_MS}). @throws PunkApiError `WorkflowNotServed` (404) when `/mcp` serves no such
   * tool to this key (no such workflow, not ready, or withheld), or as {@link connectMcp} does. `signal` aborting
   * cancels the call, and so the run: in the 2026-07-28 era, where closing the call's response stream is its
   * cancellation (a 2025 `notifications/cancelled` would be lost as the client closes right after).
   */
  async runWorkflow(name: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<CallToolResult> {
    const tool = namespacedName(WORKFLOW_SERVER, name);
    const client = await this.connectMcp('modern');
    try {
      return await this.mcpRequest(
        'tools/call',
        (timeout) => client.callTool({ name: tool, arguments: args }, { timeout, ...(signal && { signal }) }),
        this.workflowTimeoutMs,
      );
    } catch (error) {
      if (error instanceof ProtocolError && /unknown tool/i.test(error.message))
        throw new PunkApiError(
          'WorkflowNotServed',
          `no ready workflow ${name} is served to this key on ${this.target.baseUrl}/mcp (no tool ${tool}); punk_list_workflows lists the workflows and why one is not ready`,
          404,
        );
      throw mcpErrorOf(error, this.target.baseUrl);
    } finally {
      await client.close().catch(() => undefined);
    }
  }

  /**
   * Cancels run `runId` of workflow `name` (`POST /workflows/<name>/runs/<runId>/cancel`): answers `cancelled`, or
   * `running` when it has not stopped within the deployment's wait. @throws PunkApiError `WorkflowRunNotFound` (404),
   * `WorkflowRunNotRunning` (409, naming the state it ended in).
   */
  async cancelWorkflowRun(name: string, runId: string): Promise<WorkflowRunReply> {
    return this.request<WorkflowRunReply>('POST', `/workflows/${encodeURIComponent(name)}/runs/${encodeURIComponent(runId)}/cancel`);
  }

  /** Every tool of the deployment's aggregated `/mcp` (all pages of `tools/list`), as the key may see them. */
  async deploymentTools(): Promise<DeploymentTool[]> {
    const client = await this.connectMcp();
    try {
      const tools: DeploymentTool[] = [];
      let cursor: string | undefined;
      do {
        const params = cursor === undefined ? {} : { cursor };
        const page = await this.mcpRequest('tools/list', (timeout) => client.listTools(params, { timeout }));
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor);
      return tools;
    } catch (error) {
      throw mcpErrorOf(error, this.target.baseUrl);
    } finally {
      await client.close().catch(() => undefined);
    }
  }
}

/** The error of a non-2xx answer: the API's `{ error: { code, message } }`, or RFC 6750's `{ error, error_description }`. */
function errorOf(method: string, path: string, response: Response, parsed: unknown, text: string): PunkApiError {
  const body = (parsed ?? {}) as { error?: unknown; error_description?: unknown; message?: unknown };
  const nested = typeof body.error === 'object' && body.error !== null ? (body.error as { code?: unknown; message?: unknown }) : {};
  const str = (value: unknown) => (typeof value === 'string' ? value : undefined);
  const code = str(nested.code) ?? str(body.error) ?? `HTTP${String(response.status)}`;
  const detail = str(nested.message) ?? str(body.error_description) ?? str(body.message) ?? (text.slice(0, 300) || response.statusText);
  const challenge = response.headers.get('www-authenticate') ?? '';
  const scope = /scope="([^"]+)"/.exec(challenge)?.[1] ?? /needs the scope (\S+)/.exec(detail)?.[1];
  const what = `${method} /api/v1${path}`;
  if (response.status === 401)
    return new PunkApiError(code, `${what}: the API key was refused (401: ${detail}); set PUNK_MCP_API_KEY to a valid key`, 401, scope);
  if (response.status === 403) {
    // Governance names who may decide an approval, not the scope: an approver the rule names, or an admin.
    const needs = scope
      ? `; the key needs the scope ${scope}`
      : code === 'ApprovalForbidden'
        ? '; deciding needs a key of an approver the rule names, or with the scope punk:admin (PUNK_AUTH_ADMIN_SCOPE)'
        : '';
    return new PunkApiError(code, `${what}: forbidden (403: ${detail})${needs}`, 403, scope);
  }
  return new PunkApiError(code, `${what}: ${String(response.status)} ${code}: ${detail}`, response.status, scope);
}

/** `ms` milliseconds for people: `5 s`, `0.5 s`. */
function seconds(ms: number): string {
  return `${String(ms / 1000)} s`;
}

/** A failure of the SDK client against `/mcp` as a {@link PunkApiError}. */
export function mcpErrorOf(error: unknown, baseUrl: string): PunkApiError {
  if (error instanceof PunkApiError) return error;
  const message = error instanceof Error ? error.message : String(error);
  const status = Number((error as { status?: unknown; code?: unknown }).status ?? /\b(40[13])\b/.exec(message)?.[1] ?? 0);
  if (status === 401) return new PunkApiError('Unauthorized', `${baseUrl}/mcp refused the API key (401); set PUNK_MCP_API_KEY`, 401);
  if (status === 403) return new PunkApiError('insufficient_scope', `${baseUrl}/mcp: forbidden (403: ${message})`, 403);
  if (/fetch failed|ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ETIMEDOUT/i.test(message))
    return new PunkApiError('Unreachable', `the deployment at ${baseUrl} cannot be reached (${message}); is Punk running there?`, 0);
  return new PunkApiError('McpError', `${baseUrl}/mcp: ${message}`, 502);
}

/** A server as `GET /mcp/servers` shows it (docs/registry-api.md; fields this client reads). */
export interface ServerView {
  name: string;
  namespace: string;
  type?: string;
  managed: boolean;
  state: string;
  lastError?: string;
  toolCount: number;
  status?: string;
}

/** The answer of a server test. */
export interface TestResult {
  ok: boolean;
  toolCount: number;
  tools: Array<{ name: string; description?: string }>;
  latencyMs: number;
  error?: string;
}

/** One run of the ledger (`RunSummary` of the OpenAPI document, declared once in @punk/lib). */
export type RunSummary = z.infer<typeof runSummarySchema>;

/** The answer of `GET /runs` (`RunsPage` of the OpenAPI document). */
export type RunsPage = z.infer<typeof runsPageSchema>;

/** One stored ledger event with its chain position. */
export interface RunEvent {
  id: string;
  type: string;
  occurredAt: string;
  source: string;
  server?: string;
  principal?: { subject: string };
  data?: Record<string, unknown>;
  tenantSeq?: number;
  hash?: string;
  prevHash?: string;
}

/** The answer of `GET /runs/<id>`. */
export interface RunDetail {
  run: RunSummary;
  events: RunEvent[];
}

/** The answer of `GET /ledger/verify`. */
export type Verification = z.infer<typeof verificationSchema>;

/** An approval request as the approvals API answers it (docs/governance.md "Approvals"): `approvalViewSchema` of @punk/lib, with whether the caller may decide it. */
export type Approval = z.infer<typeof approvalViewSchema>;

/** An API key as the API lists it (never the key itself). */
export interface ApiKeyView {
  id: string;
  name: string;
  tenant: string;
  scopes?: string[];
  groups?: string[];
  createdAt?: string;
  revokedAt?: string;
  [field: string]: unknown;
}

/** A workflow as `GET /workflows` shows it (`workflowViewSchema` of @punk/lib). */
export type WorkflowView = z.infer<typeof workflowViewSchema>;
