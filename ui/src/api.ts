/**
 * The dashboard's client of Punk's HTTP API (`/api/v1`, the same origin that serves the dashboard; the OpenAPI
 * document is `/api/v1/openapi.json`). Every call sends the session's API key as `Authorization: Bearer` (RFC
 * 6750) when there is one; the shapes are the zod schemas of @punk/lib (api-schemas.ts), as types only.
 *
 * Every failure is an {@link ApiError} whose `kind` says what the person can do about it and whose `message` is a
 * sentence for them. A 401 on a signed-in session clears the key and tells the app (see {@link onSignedOut}).
 */
import type { z } from 'zod';
import type {
  acceptedToolSchema,
  apiKeyInputSchema,
  apiKeyViewSchema,
  approvalViewSchema,
  callerViewSchema,
  credentialInputSchema,
  dashboardConfigSchema,
  credentialViewSchema,
  registrationBodySchema,
  runSchema,
  runsPageSchema,
  runsQuerySchema,
  runSummarySchema,
  serverViewSchema,
  settingViewSchema,
  testResultSchema,
  toolListSchema,
  verificationSchema,
} from '@punk/lib';
import { clearKey, getKey, getTokenKind } from './session.js';

/** A server as the registry API shows it. */
export type ServerView = z.infer<typeof serverViewSchema>;
/** A registration body (`POST /mcp/servers`). */
export type Registration = z.input<typeof registrationBodySchema>;
/** The answer of a server's TEST. */
export type TestResult = z.infer<typeof testResultSchema>;
/** A server's tools with their pins. */
export type ToolList = z.infer<typeof toolListSchema>;
/** The pin of one tool. */
export type ToolPin = NonNullable<ToolList['pins']>[number];
/** The answer of an accept. */
export type AcceptedTool = z.infer<typeof acceptedToolSchema>;
/** A credential as the API shows it: never a value. */
export type CredentialView = z.infer<typeof credentialViewSchema>;
/** The body of a credential's creation (`id`, `type`, `data`) or replacement (`type`, `data`). */
export type CredentialInput = z.input<typeof credentialInputSchema>;
/** One tenant setting. */
export type SettingView = z.infer<typeof settingViewSchema>;
/** An API key as the API shows it (`key` only in the answer to its creation). */
export type ApiKeyView = z.infer<typeof apiKeyViewSchema>;
/** The body of an API key's creation. */
export type ApiKeyInput = z.input<typeof apiKeyInputSchema>;
/** One run of the ledger. */
export type RunSummary = z.infer<typeof runSummarySchema>;
/** A page of runs and the cursor of the next one. */
export type RunsPage = z.infer<typeof runsPageSchema>;
/** A run with its events. */
export type Run = z.infer<typeof runSchema>;
/** The filters of the runs list (`GET /runs` query). */
export type RunsQuery = Partial<Record<keyof z.input<typeof runsQuerySchema>, string | number>>;
/** The answer of a ledger verification. */
export type Verification = z.infer<typeof verificationSchema>;
/** A pending or decided approval request. */
export type ApprovalView = z.infer<typeof approvalViewSchema>;
/** Who the session's token says it is (`GET /me`). */
export type Caller = z.infer<typeof callerViewSchema>;
/** What the dashboard needs before a sign-in (`GET /ui/config.json`). */
export type DashboardConfig = z.infer<typeof dashboardConfigSchema>;

/**
 * What went wrong, for the person: `refused` (the key was not accepted), `signedOut` (the session's key stopped
 * working: expired or revoked), `forbidden` (the key lacks the scope), `invalid` (the request was refused: the
 * message names the field), `notFound`, `server` (Punk failed: 5xx), `network` (Punk could not be reached).
 */
export type ApiErrorKind = 'refused' | 'signedOut' | 'forbidden' | 'invalid' | 'notFound' | 'server' | 'network';

/** A failed API call: `kind` for the app, `message` for the person, `code` and `detail` (its message) as the API said them. */
export class ApiError extends Error {
  constructor(
    readonly kind: ApiErrorKind,
    message: string,
    readonly status?: number,
    readonly code?: string,
    readonly detail?: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** Message of a session whose API key stopped working. */
export const SIGNED_OUT_MESSAGE = 'Your API key is no longer accepted (it expired or was revoked): sign in again.';

/** Message of a session whose OAuth access token stopped working, with Punk's reason (`the access token expired`). */
export function oauthSignedOutMessage(reason: string): string {
  return `Your sign-in is no longer accepted (${reason}): sign in again.`;
}

let signedOut: (message: string) => void = () => undefined;

/** Registers what happens when a signed-in session's key gets a 401: the app goes back to its sign-in. */
export function onSignedOut(listener: (message: string) => void): void {
  signedOut = listener;
}

/** The `{ error: { code, message } }` of an error answer, when it has one. */
async function errorBodyOf(response: Response): Promise<{ code?: string; message?: string }> {
  try {
    const body = (await response.json()) as { error?: { code?: unknown; message?: unknown } };
    return {
      ...(typeof body.error?.code === 'string' && { code: body.error.code }),
      ...(typeof body.error?.message === 'string' && { message: body.error.message }),
    };
  } catch {
    return {};
  }
}

/**
 * One API call: `method` on `/api/v1<path>` with a JSON `body`, answering the parsed JSON (undefined for 204).
 * `key` overrides the session's key (the sign-in check uses it before storing the key).
 * @throws ApiError for every failure (see {@link ApiErrorKind}).
 */
export async function apiRequest<T>(method: string, path: string, body?: unknown, key: string | null = getKey()): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (key) headers['Authorization'] = `Bearer ${key}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(`/api/v1${path}`, {
      method,
      headers,
      ...(body !== undefined && { body: JSON.stringify(body) }),
      cache: 'no-store',
    });
  } catch (error) {
    throw new ApiError('network', `Punk could not be reached (${error instanceof Error ? error.message : String(error)}): is it running?`);
  }
  if (response.ok) return (response.status === 204 ? undefined : await response.json()) as T;
  const { code, message } = await errorBodyOf(response);
  const said = message ?? `${response.status} ${response.statusText}`;
  if (response.status === 401) {
    if (key !== getKey() || !key)
      throw new ApiError('refused', 'The key was refused: check that you pasted the whole key (pk_…).', 401, code, said);
    const ended = getTokenKind() === 'oauth' ? oauthSignedOutMessage(said) : SIGNED_OUT_MESSAGE;
    clearKey();
    signedOut(ended);
    throw new ApiError('signedOut', ended, 401, code);
  }
  if (response.status === 403) throw new ApiError('forbidden', `Not allowed with this key: ${said}`, 403, code);
  if (response.status === 404) throw new ApiError('notFound', said, 404, code);
  if (response.status >= 500) throw new ApiError('server', `Punk failed to answer (${response.status}): ${said}`, response.status, code);
  throw new ApiError('invalid', said, response.status, code);
}

/** The query string of `params` (undefined and empty values left out), with its `?`, or ''. */
export function queryOf(params: Record<string, string | number | undefined>): string {
  const entries = Object.entries(params).filter((e): e is [string, string | number] => e[1] !== undefined && e[1] !== '');
  return entries.length === 0 ? '' : `?${new URLSearchParams(entries.map(([k, v]) => [k, String(v)])).toString()}`;
}

/**
 * `GET /ui/config.json`: whether Punk needs a token, and the OAuth sign-in when it has one (public: read before
 * any sign-in).
 * @throws ApiError `network` or `server` when Punk cannot answer.
 */
export async function getDashboardConfig(): Promise<DashboardConfig> {
  let response: Response;
  try {
    response = await fetch('/ui/config.json', { headers: { Accept: 'application/json' }, cache: 'no-store' });
  } catch (error) {
    throw new ApiError('network', `Punk could not be reached (${error instanceof Error ? error.message : String(error)}): is it running?`);
  }
  if (!response.ok)
    throw new ApiError('server', `Punk failed to answer (${response.status}) for the dashboard's configuration.`, response.status);
  return (await response.json()) as DashboardConfig;
}

/**
 * `GET /me`: who `token` (default the session's) says the caller is, and whether it is an admin.
 * @throws ApiError `refused` for a token Punk does not accept (before it is kept), `signedOut` for the session's
 *   own, `forbidden` for one of another tenant; `network` or `server` when Punk cannot answer.
 */
export const getCaller = (token: string | null = getKey()) => apiRequest<Caller>('GET', '/me', undefined, token);

const encode = encodeURIComponent;

// ---------------------------------------------------------------- servers

/** `GET /mcp/servers`. */
export const listServers = () => apiRequest<{ servers: ServerView[] }>('GET', '/mcp/servers').then((a) => a.servers);
/** `GET /mcp/servers/{id}`. */
export const getServer = (name: string) => apiRequest<{ server: ServerView }>('GET', `/mcp/servers/${encode(name)}`).then((a) => a.server);
/** `POST /mcp/servers`: registers a server. */
export const registerServer = (body: Registration) =>
  apiRequest<{ server: ServerView }>('POST', '/mcp/servers', body).then((a) => a.server);
/** `DELETE /mcp/servers/{id}`. */
export const deleteServer = (name: string) => apiRequest<undefined>('DELETE', `/mcp/servers/${encode(name)}`);
/** `POST /mcp/servers/{id}/test`: connects and lists the tools. */
export const testServer = (name: string) => apiRequest<TestResult>('POST', `/mcp/servers/${encode(name)}/test`);
/** `GET /mcp/servers/{id}/tools`: the tools with their pins. */
export const serverTools = (name: string) => apiRequest<ToolList>('GET', `/mcp/servers/${encode(name)}/tools`);
/** `POST /mcp/servers/{id}/tools/{tool}/accept`: pins the changed definition the admin reviewed (`fingerprint`). */
export const acceptTool = (name: string, tool: string, fingerprint?: string) =>
  apiRequest<AcceptedTool>('POST', `/mcp/servers/${encode(name)}/tools/${encode(tool)}/accept`, fingerprint ? { fingerprint } : {});

// ---------------------------------------------------------------- credentials

/** `GET /credentials`. */
export const listCredentials = () => apiRequest<{ credentials: CredentialView[] }>('GET', '/credentials').then((a) => a.credentials);
/** `POST /credentials`. */
export const createCredential = (body: CredentialInput) => apiRequest<{ credential: CredentialView }>('POST', '/credentials', body);
/** `PUT /credentials/{id}`: replaces the keys and values in place. */
export const replaceCredential = (id: string, body: Omit<CredentialInput, 'id'>) =>
  apiRequest<{ credential: CredentialView }>('PUT', `/credentials/${encode(id)}`, body);
/** `DELETE /credentials/{id}`. */
export const deleteCredential = (id: string) => apiRequest<undefined>('DELETE', `/credentials/${encode(id)}`);

// ---------------------------------------------------------------- settings and API keys

/** `GET /settings`. */
export const getSettings = () => apiRequest<{ settings: SettingView[] }>('GET', '/settings').then((a) => a.settings);
/** `PUT /settings`: sets one setting. */
export const putSetting = (key: 'redaction', value: unknown) =>
  apiRequest<{ setting: SettingView }>('PUT', '/settings', { key, value }).then((a) => a.setting);
/** `GET /api-keys`. */
export const listApiKeys = () => apiRequest<{ apiKeys: ApiKeyView[] }>('GET', '/api-keys').then((a) => a.apiKeys);
/** `POST /api-keys`: the answer's `key` is shown this once. */
export const createApiKey = (body: ApiKeyInput) => apiRequest<ApiKeyView>('POST', '/api-keys', body);
/** `DELETE /api-keys/{id}`: revokes a key. */
export const revokeApiKey = (id: string) => apiRequest<undefined>('DELETE', `/api-keys/${encode(id)}`);

// ---------------------------------------------------------------- runs, ledger, approvals

/** `GET /runs`: a page, newest first; `nextCursor` is the `cursor` of the next one. */
export const listRuns = (query: RunsQuery = {}) => apiRequest<RunsPage>('GET', `/runs${queryOf(query)}`);
/** `GET /runs/{id}`: a run with its events in order. */
export const getRun = (id: string) => apiRequest<Run>('GET', `/runs/${encode(id)}`);
/** `GET /ledger/verify`: checks the tenant's hash chain. */
export const verifyLedger = () => apiRequest<Verification>('GET', '/ledger/verify');
/** `GET /approvals`. */
export const listApprovals = (query: Record<string, string | number | undefined> = {}) =>
  apiRequest<{ approvals: ApprovalView[] }>('GET', `/approvals${queryOf(query)}`).then((a) => a.approvals);
/** `POST /approvals/{id}/approve` or `/deny`, with an optional reason. */
export const decideApproval = (id: string, verdict: 'approve' | 'deny', reason?: string) =>
  apiRequest<unknown>('POST', `/approvals/${encode(id)}/${verdict}`, reason ? { reason } : {});
