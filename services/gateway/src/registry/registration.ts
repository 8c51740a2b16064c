/**
 * A registration of the registry API (`POST /api/v1/mcp/servers`): its JSON
 * body, validated strictly with errors that name the field by its path
 * (`body.url: must be an http or https URL`), and the McpServer object it
 * stands for, so the gateway serves it exactly like a manifest. Pure functions.
 */
import { z } from 'zod';
import {
  API_VERSION,
  HTTP_FIELD_VALUE_RULE,
  isEnvValue,
  isHttpFieldValue,
  mcpServerSchema,
  PunkError,
  RESERVED_HEADER_NAMES,
  RESERVED_HEADER_RULE,
  registrationBodySchema,
  transportOf,
  type McpServer,
  type OpenApiSource,
} from '@punk/lib';
import { isCredentialReference, parseReference } from '../credentials/input.js';

/** Most `headers` of an http registration. */
export const MAX_HEADERS = 100;
/** Most `env` entries of a stdio registration. */
export const MAX_ENV = 1000;

/**
 * The body of a registration: the fields of `registrationBodySchema` (`@punk/lib`, also the OpenAPI document's
 * `Registration`) and the checks across them: `command` for stdio, `url` for http and no field of the other
 * type; no reserved or duplicated header; at most {@link MAX_ENV} env entries and {@link MAX_HEADERS} headers,
 * each value a well-formed `cred:<id>` reference (stored as given and resolved at connect time) or a literal
 * that an environment variable or header can hold.
 */
export const registrationSchema = registrationBodySchema.superRefine((body, ctx) => {
  const misplaced = (fields: readonly (keyof typeof body)[], message: string) => {
    for (const field of fields) if (body[field] !== undefined) ctx.addIssue({ code: 'custom', path: [field], message });
  };
  checkValues(body.env, 'env', MAX_ENV, isEnvValue, 'must not contain a NUL character', ctx);
  checkValues(body.headers, 'headers', MAX_HEADERS, isHttpFieldValue, HTTP_FIELD_VALUE_RULE, ctx);
  const seen = new Set<string>();
  for (const name of Object.keys(body.headers ?? {})) {
    if (RESERVED_HEADER_NAMES.has(name.toLowerCase()))
      ctx.addIssue({ code: 'custom', path: ['headers', name], message: RESERVED_HEADER_RULE });
    if (seen.has(name.toLowerCase()))
      ctx.addIssue({
        code: 'custom',
        path: ['headers', name],
        message: 'duplicates another header name (header names are case-insensitive)',
      });
    seen.add(name.toLowerCase());
  }
  if (body.type === 'stdio') {
    if (body.command === undefined) ctx.addIssue({ code: 'custom', path: ['command'], message: 'required for a stdio registration' });
    misplaced(['url', 'headers', 'transport', 'auth'], 'applies only to an http registration');
    misplaced(['openapi'], 'applies only to an openapi registration');
  } else if (body.type === 'http') {
    if (body.url === undefined) ctx.addIssue({ code: 'custom', path: ['url'], message: 'required for an http registration' });
    misplaced(['command', 'args', 'env'], 'applies only to a stdio registration');
    misplaced(['openapi'], 'applies only to an openapi registration');
  } else {
    if (body.openapi === undefined) ctx.addIssue({ code: 'custom', path: ['openapi'], message: 'required for an openapi registration' });
    misplaced(['command', 'args', 'env'], 'applies only to a stdio registration');
    misplaced(['url', 'transport', 'auth'], 'applies only to an http registration');
    for (const field of ['file', 'configMapKeyRef'] as const) {
      if (body.openapi?.[field] !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['openapi', field],
          message:
            'applies only to manifests (the gateway reads no file or ConfigMap of a registration): send the document as openapi.url or openapi.content',
        });
    }
  }
});
/**
 * Checks the `env` or `headers` values of a registration: at most `max` entries, each `cred:` value a
 * well-formed reference, each literal passing `valid`. Issues name the entry, never its value.
 */
function checkValues(
  values: Record<string, string> | undefined,
  field: 'env' | 'headers',
  max: number,
  valid: (value: string) => boolean,
  problem: string,
  ctx: z.RefinementCtx,
): void {
  const entries = Object.entries(values ?? {});
  if (entries.length > max) ctx.addIssue({ code: 'custom', path: [field], message: `holds more than ${max} entries` });
  for (const [name, value] of entries) {
    try {
      if (parseReference(value) !== undefined) continue;
    } catch (error) {
      ctx.addIssue({ code: 'custom', path: [field, name], message: error instanceof PunkError ? error.message : String(error) });
      continue;
    }
    if (!valid(value)) ctx.addIssue({ code: 'custom', path: [field, name], message: problem });
  }
}

/** A validated registration body. */
export type Registration = z.infer<typeof registrationSchema>;

/** `body.tools.overrides[0].name`: a zod issue path as the error messages spell it. */
function pathOf(path: readonly PropertyKey[]): string {
  return path.reduce<string>((out, part) => (typeof part === 'number' ? `${out}[${part}]` : `${out}.${String(part)}`), 'body');
}

/**
 * Validates a registration body as received over HTTP.
 * @param fixedName the name from the URL path (an update): the body may omit `name`, and must not name another server.
 * @returns the registration, with `name` set.
 * @throws PunkError `InvalidRegistration` whose message names the first bad field by its path, e.g.
 *   `body.command: required for a stdio registration`, `body.foo: unknown field`.
 */
export function parseRegistration(body: unknown, fixedName?: string): Registration {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new PunkError('InvalidRegistration', 'body: must be a JSON object');
  let input = body as Record<string, unknown>;
  if (fixedName !== undefined) {
    if (input.name !== undefined && input.name !== fixedName) {
      throw new PunkError(
        'InvalidRegistration',
        `body.name: must be ${JSON.stringify(fixedName)}, the server named in the path (a server cannot be renamed)`,
        { field: 'body.name' },
      );
    }
    input = { ...input, name: fixedName };
  }
  const parsed = registrationSchema.safeParse(input, { error: (issue) => (issue.input === undefined ? 'required' : undefined) });
  if (parsed.success) return parsed.data;
  const [issue] = parsed.error.issues;
  const { path, message } = issue ? described(issue, input) : { path: [], message: 'invalid' };
  const field = pathOf(path);
  throw new PunkError('InvalidRegistration', `${field}: ${message}`, { field });
}

/**
 * The path and sentence of a zod issue of `input`: an unknown key named, a bad record key's own message, and for
 * `env` or `headers` (a record or a list) the problem of the form that was sent rather than zod's "Invalid input".
 */
function described(issue: z.core.$ZodIssue, input: unknown): { path: PropertyKey[]; message: string } {
  if (issue.code === 'unrecognized_keys') return { path: [...issue.path, ...issue.keys.slice(0, 1)], message: 'unknown field' };
  if (issue.code === 'invalid_key') return { path: issue.path, message: issue.issues[0]?.message ?? issue.message };
  if (issue.code === 'invalid_union') {
    const sent = issue.path.reduce<unknown>((value, key) => (value as Record<PropertyKey, unknown> | undefined)?.[key], input);
    const inner = issue.errors[Array.isArray(sent) ? 1 : 0]?.[0];
    if (inner && issue.errors.length === 2) {
      const nested = described(inner, sent);
      return { path: [...issue.path, ...nested.path], message: nested.message };
    }
  }
  return { path: issue.path, message: issue.message };
}

/**
 * The McpServer a registration stands for, in namespace `tenant`. A stdio registration becomes a server with
 * `image: local/<name>` and `command: [command]` (the form of manifests that run a local command: the gateway
 * starts it as a child process, never as a pod); a `command` list is taken as it is, `args` after it; an http
 * registration becomes a `url` server.
 * @throws PunkError `InvalidRegistration` when the result is not a valid McpServer (e.g. a tenant that is not a DNS label).
 */
export function toMcpServer(tenant: string, registration: Registration): McpServer {
  const entries = (record: Record<string, string> | undefined) => Object.entries(record ?? {}).map(([name, value]) => ({ name, value }));
  const common = {
    ...(registration.tools && { tools: { ...registration.tools, overrides: registration.tools.overrides ?? [] } }),
    ...(registration.sessionMode && { sessionMode: registration.sessionMode }),
    ...(registration.timeout && { timeout: registration.timeout }),
  };
  const spec =
    registration.type === 'openapi'
      ? { openapi: registration.openapi, ...(registration.headers && { headers: entries(registration.headers) }), ...common }
      : registration.type === 'stdio'
        ? {
            image: `local/${registration.name}`,
            command: typeof registration.command === 'string' ? [registration.command] : registration.command,
            ...(registration.args && { args: registration.args }),
            env: entries(registration.env),
            transport: 'stdio',
            ...common,
          }
        : {
            url: registration.url,
            ...(registration.headers && { headers: entries(registration.headers) }),
            ...(registration.auth && { auth: registration.auth }),
            transport: registration.transport ?? 'streamable-http',
            ...common,
          };
  const parsed = mcpServerSchema.safeParse({
    apiVersion: API_VERSION,
    kind: 'McpServer',
    metadata: { name: registration.name, namespace: tenant },
    spec,
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path[0] === 'metadata' && issue.path[1] === 'namespace' ? 'tenant' : `McpServer ${issue.path.join('.')}`;
    throw new PunkError('InvalidRegistration', `${where}: ${issue.message}`);
  }
  return parsed.data;
}

/** A URL without user info, query or fragment (which may carry secrets): `https://host:port/path`. */
function safeUrl(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

/** `[{ name }]`, with `value` only for `cred:` references: names of literal values, never the values. */
function namesOnly(record: Record<string, string> | undefined): Array<{ name: string; value?: string }> {
  return Object.entries(record ?? {}).map(([name, value]) => (isCredentialReference(value) ? { name, value } : { name }));
}

/**
 * A registration as the ledger records it: every field, except that `env` and `headers` become lists of
 * names (with the value only when it is a `cred:` reference) and the URL loses user info, query and fragment.
 */
export function auditedRegistration(registration: Registration): Record<string, unknown> {
  const { env, headers, url, openapi, ...rest } = registration;
  return {
    ...rest,
    ...(openapi !== undefined && { openapi: openApiSummary(openapi) }),
    ...(url !== undefined && { url: safeUrl(url) }),
    ...(env !== undefined && { env: namesOnly(env) }),
    ...(headers !== undefined && { headers: namesOnly(headers) }),
  };
}

/**
 * What the registry API shows of a managed server (one from a manifest or custom resource): the source, the
 * transport and the McpServer fields a registration also has; env and header NAMES only (manifests may
 * hold literal secrets), and the URL without user info, query or fragment.
 */
export function managedSummary(server: McpServer): Record<string, unknown> {
  const spec = server.spec;
  const literalFree = (list: Array<{ name: string; value?: string | undefined }> | undefined) =>
    (list ?? []).map((entry) =>
      entry.value !== undefined && isCredentialReference(entry.value) ? { name: entry.name, value: entry.value } : { name: entry.name },
    );
  return {
    name: server.metadata.name,
    type: typeOf(server),
    ...(spec.image !== undefined && { image: spec.image }),
    ...(spec.package !== undefined && { package: spec.package }),
    ...(spec.url !== undefined && { url: safeUrl(spec.url) }),
    ...(spec.openapi !== undefined && { openapi: openApiSummary(spec.openapi) }),
    ...(spec.command !== undefined && { command: spec.command }),
    ...(spec.args !== undefined && { args: spec.args }),
    transport: transportOf(spec),
    env: literalFree(spec.env),
    ...(spec.headers !== undefined && { headers: literalFree(spec.headers) }),
    ...(spec.tools !== undefined && { tools: spec.tools }),
    sessionMode: spec.sessionMode,
    ...(spec.timeout !== undefined && { timeout: spec.timeout }),
  };
}

/**
 * `openapi` for a REST API the gateway serves itself, `http` for a server it reaches over HTTP (a `url`, or a local
 * streamable-http/sse server), else `stdio`.
 */
export function typeOf(server: McpServer): 'stdio' | 'http' | 'openapi' {
  if (server.spec.openapi !== undefined) return 'openapi';
  return transportOf(server.spec) === 'stdio' ? 'stdio' : 'http';
}

/** `spec.openapi` without the document's text (it may be long) and its URLs without user info, query or fragment. */
function openApiSummary(openapi: OpenApiSource): Record<string, unknown> {
  const { content, url, baseUrl, ...rest } = openapi;
  return {
    ...rest,
    ...(url !== undefined && { url: safeUrl(url) }),
    ...(baseUrl !== undefined && { baseUrl: safeUrl(baseUrl) }),
    ...(content !== undefined && { content: `<${content.length} characters>` }),
  };
}
