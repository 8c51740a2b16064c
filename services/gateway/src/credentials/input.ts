/**
 * What the credentials API accepts: the body of a create, and `cred:` references in env and header values.
 * Every error names the field that is wrong and never echoes a value (it may be a secret).
 */
import { credentialIdSchema, credentialInputSchema, credentialKeyPattern, PunkError, REFERENCE_PREFIX } from '@punk/lib';

/** `static`: string keys used as they are. `oauth2`: an RFC 6749 grant Punk sends as a bearer token and refreshes. */
export type CredentialType = 'static' | 'oauth2';

/** A validated create request. */
export interface CredentialInput {
  id: string;
  type: CredentialType;
  /** The secret keys; for `oauth2`, `expires_at` is normalised to epoch milliseconds as a decimal string. */
  data: Record<string, string>;
}

/** The keys of an `oauth2` credential (the names McpCredential uses; `expires_at` in epoch milliseconds). */
export const OAUTH2_KEYS = ['access_token', 'refresh_token', 'expires_at', 'token_url', 'client_id', 'client_secret', 'scope'] as const;

const MAX_VALUE_BYTES = 64 * 1024;

function invalid(field: string, problem: string): PunkError {
  return new PunkError('InvalidCredential', `${field}: ${problem}`, { field });
}

/** `true` when `id` is a valid credential id (a DNS label of 1-63 characters). */
export function isCredentialId(id: string): boolean {
  return credentialIdSchema.safeParse(id).success;
}

/**
 * Validates the body of a create: `{ id, type?, data }`. `type` defaults to `oauth2` when `data` holds a
 * `refresh_token` or a `token_url`, else `static`. An `oauth2` credential holds only the keys of
 * {@link OAUTH2_KEYS}, and needs `access_token`, or `refresh_token` with `token_url` (RFC 6749 §6);
 * `client_secret` needs `client_id`; `token_url` is an http(s) URL without user info; `expires_at` is epoch
 * milliseconds as a number or a decimal string. No value may contain a NUL.
 *
 * @throws PunkError `InvalidCredential` naming the field (`id`, `type`, `data.<key>`, or an unknown field).
 */
export function parseCredentialInput(body: unknown): CredentialInput {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw invalid('(body)', 'must be a JSON object { id, type?, data }');
  const parsed = credentialInputSchema.safeParse(body);
  if (!parsed.success) {
    const { issues } = parsed.error;
    const issue = issues.find((candidate) => candidate.code === 'unrecognized_keys') ?? issues[0];
    if (issue === undefined) throw invalid('(body)', 'must be a JSON object { id, type?, data }');
    if (issue.code === 'unrecognized_keys') throw invalid(issue.keys[0] ?? '(body)', 'unknown field; a credential has id, type and data');
    if (issue.code === 'invalid_key') throw invalid('data', issue.issues[0]?.message ?? issue.message);
    const [field, key] = issue.path;
    throw invalid(key === undefined ? String(field) : `data.${String(key)}`, issue.message);
  }
  const { id, type, data } = parsed.data;
  const values: Record<string, string> = {};
  for (const [key, value] of Object.entries(data)) {
    if (key === 'expires_at' && typeof value === 'number') {
      values[key] = String(value);
      continue;
    }
    if (typeof value !== 'string' || value === '') throw invalid(`data.${key}`, 'must be a non-empty string');
    if (Buffer.byteLength(value) > MAX_VALUE_BYTES) throw invalid(`data.${key}`, `is longer than ${String(MAX_VALUE_BYTES)} bytes`);
    // No environment variable or HTTP header can hold a NUL; line breaks stay allowed (PEM keys in env values).
    if (value.includes('\0'))
      throw invalid(`data.${key}`, 'must not contain a NUL character (no environment variable or header can hold one)');
    const problem = headerValueProblem(value);
    if (problem !== undefined) throw invalid(`data.${key}`, problem);
    values[key] = value;
  }
  const resolvedType: CredentialType = type ?? (values.refresh_token !== undefined || values.token_url !== undefined ? 'oauth2' : 'static');
  if (resolvedType === 'oauth2') checkOAuth2(values);
  return { id, type: resolvedType, data: values };
}

/**
 * Why a credential value can never be sent as an HTTP header value (RFC 9110 §5.5), which most values are
 * (`Authorization: cred:<id>`), so that it is refused when it is stored rather than at connect time; `undefined`
 * when it can be. A value of several lines (a PEM key) can only be an environment variable and is left to env
 * use. Names the character by code point and position, never the value.
 */
function headerValueProblem(value: string): string | undefined {
  const lines = /[\r\n]/.test(value.replace(/(\r\n|\r|\n)$/, ''));
  if (!lines && /[\r\n]$/.test(value)) {
    return 'ends with a line break, which no HTTP header can carry (pasted with the newline of a file?): remove it';
  }
  let position = 0;
  for (const char of value) {
    position += 1;
    const code = char.codePointAt(0) ?? 0;
    const control = code < 0x20 || code === 0x7f;
    const refused = control ? code !== 0x09 && !(lines && (code === 0x0a || code === 0x0d)) : !lines && code > 0xff;
    if (!refused) continue;
    const name = `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
    const where = `at character ${String(position)}`;
    if (control) return `holds the control character ${name} ${where}, which no HTTP header can carry: remove it`;
    return (
      `holds ${name} ${where}, a character no HTTP header can carry (RFC 9110 §5.5: visible ASCII, spaces, tabs and Latin-1 letters)` +
      (code === 0x2026 ? '; "…" marks a placeholder in examples: put the real value there' : '')
    );
  }
  return undefined;
}

function checkOAuth2(data: Record<string, string>): void {
  const allowed = new Set<string>(OAUTH2_KEYS);
  for (const key of Object.keys(data)) {
    if (!allowed.has(key)) throw invalid(`data.${key}`, `is not a key of an oauth2 credential (${OAUTH2_KEYS.join(', ')})`);
  }
  if (data.refresh_token !== undefined && data.token_url === undefined)
    throw invalid('data.token_url', 'is required with data.refresh_token (the endpoint that refreshes it)');
  if (data.access_token === undefined && data.refresh_token === undefined)
    throw invalid('data.access_token', 'is required unless data.refresh_token and data.token_url are set');
  if (data.client_secret !== undefined && data.client_id === undefined)
    throw invalid('data.client_id', 'is required with data.client_secret (RFC 6749 §2.3.1)');
  if (data.expires_at !== undefined) {
    if (!/^\d{1,16}$/.test(data.expires_at))
      throw invalid('data.expires_at', 'must be the expiry time in epoch milliseconds (a non-negative integer)');
    data.expires_at = String(Number(data.expires_at));
  }
  if (data.token_url !== undefined) {
    let url: URL;
    try {
      url = new URL(data.token_url);
    } catch {
      throw invalid('data.token_url', 'must be an absolute URL');
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw invalid('data.token_url', 'must be an http or https URL');
    if (url.username !== '' || url.password !== '')
      throw invalid('data.token_url', 'must not carry user info; put the client in data.client_id and data.client_secret');
  }
}

/** A parsed `cred:<id>` or `cred:<id>/<key>` reference. */
export interface CredentialReference {
  id: string;
  key?: string;
}

/** Whether an env or header value is a credential reference (starts with `cred:`), resolved at connect time rather than used as it is. */
export function isCredentialReference(value: string): boolean {
  return value.startsWith(REFERENCE_PREFIX);
}

/**
 * Parses a `cred:<id>` or `cred:<id>/<key>` value; `undefined` for a value that does not start with `cred:`
 * (a literal).
 * @throws PunkError `InvalidCredentialReference` for a `cred:` value of another shape.
 */
export function parseReference(value: string): CredentialReference | undefined {
  if (!isCredentialReference(value)) return undefined;
  const rest = value.slice(REFERENCE_PREFIX.length);
  const slash = rest.indexOf('/');
  const id = slash < 0 ? rest : rest.slice(0, slash);
  const key = slash < 0 ? undefined : rest.slice(slash + 1);
  if (!isCredentialId(id) || (key !== undefined && !credentialKeyPattern.test(key))) {
    throw new PunkError(
      'InvalidCredentialReference',
      'a value starting with "cred:" must be cred:<id> or cred:<id>/<key>, the id a DNS label and the key a key name',
    );
  }
  return key === undefined ? { id } : { id, key };
}
