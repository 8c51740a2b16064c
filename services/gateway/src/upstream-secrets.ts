/**
 * Credential references in a server's connection settings: `cred:<id>` in `spec.headers` values and `spec.env`
 * literals, and `valueFrom.credentialRef`, resolved at connect time through the gateway's credentials vault
 * ({@link Secrets}). Resolved values live only in the connection's memory: they are never logged and never put
 * in an error message (errors name the header or variable instead).
 */
import { isEnvValue, isHttpFieldValue, PunkError, referenceText, type McpServer } from '@punk/lib';
import { isCredentialReference } from './credentials/input.js';

/**
 * The credentials vault as the connection code sees it.
 * - `resolve('cred:<id>')` or `resolve('cred:<id>/<key>')`: the value that replaces the reference (for an OAuth2
 *   credential in a header, the whole header value, e.g. `Bearer <access_token>`) and, when it came from an OAuth2
 *   credential, that credential's id in `oauth2`. Throws a PunkError (never carrying a secret value) when the
 *   reference does not resolve for this server's tenant.
 * - `renewAfterUnauthorized(credentialId, rejected)`: the upstream answered HTTP 401 to `rejected` (a value
 *   `resolve` gave): refresh the OAuth2 credential (once, however many callers ask for the same rejected value)
 *   and give the new value. Throws PunkError `CredentialRefreshFailed` when the grant is revoked or the refresh fails.
 */
export interface Secrets {
  resolve(value: string): Promise<{ value: string; oauth2?: string }>;
  renewAfterUnauthorized(credentialId: string, rejected: string): Promise<string>;
}

/**
 * One header of a url server with its value resolved; `oauth2` is the credential id it came from, if OAuth2;
 * `fromVault` when the value came from the credentials vault (a `cred:` reference), not a literal.
 */
export interface ResolvedHeader {
  name: string;
  value: string;
  oauth2?: string;
  fromVault?: true;
}

type ValueFrom = NonNullable<McpServer['spec']['env'][number]['valueFrom']>;

/** `<namespace>/<name>` of a server. */
function keyOf(server: McpServer): string {
  return `${server.metadata.namespace ?? 'default'}/${server.metadata.name}`;
}

/**
 * Resolves one header or env entry: a literal without the `cred:` prefix as is, a `cred:` literal or a
 * `credentialRef` (as `cred:<name>` or `cred:<name>/<key>`) through `secrets`. `what` names the entry in errors
 * (`header Authorization`, `env API_TOKEN`).
 * @throws PunkError `CredentialUnavailable` when a reference needs a vault and there is none, `SecretUnsupported`
 *   for a Kubernetes `secretKeyRef` (only the cluster resolves those), or what `secrets.resolve` throws, with the
 *   server and entry named in front of its message.
 */
export async function resolveValue(
  server: McpServer,
  what: string,
  entry: { value?: string | undefined; valueFrom?: ValueFrom | undefined },
  secrets: Secrets | undefined,
): Promise<{ value: string; oauth2?: string }> {
  const name = keyOf(server);
  let reference: string;
  if (entry.value !== undefined) {
    if (!isCredentialReference(entry.value)) return { value: entry.value };
    reference = entry.value;
  } else if (entry.valueFrom?.credentialRef) {
    reference = referenceText(entry.valueFrom.credentialRef);
  } else {
    const secret = entry.valueFrom?.secretKeyRef;
    throw new PunkError(
      'SecretUnsupported',
      `server ${name}: ${what} comes from Secret ${secret?.name ?? '(none)'}, which only the cluster resolves; locally, use an McpCredential (credentialRef or cred:<id>)`,
      { server: name, entry: what },
    );
  }
  if (!secrets) {
    throw new PunkError(
      'CredentialUnavailable',
      `server ${name}: ${what} references a credential, but this gateway has no credentials vault (set PUNK_ENCRYPTION_KEY)`,
      {
        server: name,
        entry: what,
      },
    );
  }
  try {
    return await secrets.resolve(reference);
  } catch (error) {
    if (error instanceof PunkError)
      throw new PunkError(error.code, `server ${name}: ${what}: ${error.message}`, { ...error.details, server: name, entry: what });
    throw error;
  }
}

/** `cred:<id>[/<key>]`: the credential an entry references (not secret), for error messages. */
function referenceOf(entry: { value?: string | undefined; valueFrom?: ValueFrom | undefined }): string {
  const ref = entry.valueFrom?.credentialRef;
  return ref ? referenceText(ref) : (entry.value ?? '');
}

/**
 * Resolves every `spec.headers` entry of a url server (in order; none when it has none).
 * @throws as {@link resolveValue}; PunkError `InvalidCredentialValue` naming the header and the credential (never
 *   the value) when a credential's value is not a valid HTTP field value (RFC 9110 §5.5: e.g. it holds a line break).
 */
export async function resolveHeaders(server: McpServer, secrets: Secrets | undefined): Promise<ResolvedHeader[]> {
  const resolved: ResolvedHeader[] = [];
  for (const header of server.spec.headers ?? []) {
    const { value, oauth2 } = await resolveValue(server, `header ${header.name}`, header, secrets);
    if (!isHttpFieldValue(value))
      throw invalidValue(
        server,
        `header ${header.name}`,
        referenceOf(header),
        'is not a valid HTTP header value (RFC 9110 §5.5: visible ASCII, spaces, tabs and Latin-1 letters): it holds a line break, another control character or a character outside Latin-1',
      );
    const fromVault = header.value === undefined || isCredentialReference(header.value);
    resolved.push({ name: header.name, value, ...(oauth2 !== undefined && { oauth2 }), ...(fromVault && { fromVault: true as const }) });
  }
  return resolved;
}

/**
 * Resolves one `spec.env` entry that references a credential, as {@link resolveValue}.
 * @throws as {@link resolveValue}; PunkError `InvalidCredentialValue` naming the variable and the credential (never
 *   the value) when the value holds a NUL, which no environment variable can.
 */
export async function resolveEnv(
  server: McpServer,
  entry: { name: string; value?: string | undefined; valueFrom?: ValueFrom | undefined },
  secrets: Secrets | undefined,
): Promise<string> {
  const { value } = await resolveValue(server, `env ${entry.name}`, entry, secrets);
  if (!isEnvValue(value))
    throw invalidValue(server, `env ${entry.name}`, referenceOf(entry), 'holds a NUL character, which no environment variable can');
  return value;
}

function invalidValue(server: McpServer, what: string, reference: string, problem: string): PunkError {
  const name = keyOf(server);
  return new PunkError(
    'InvalidCredentialValue',
    `server ${name}: ${what}: the value of credential ${reference} ${problem}; replace the credential`,
    {
      server: name,
      entry: what,
    },
  );
}

/**
 * The headers after the upstream refused them with HTTP 401: every header from an OAuth2 credential renewed
 * once through `secrets.renewAfterUnauthorized`; undefined when no header came from an OAuth2 credential
 * (nothing can be renewed).
 * @throws what the vault throws (`CredentialRefreshFailed`).
 */
export async function renewHeaders(headers: ResolvedHeader[], secrets: Secrets | undefined): Promise<ResolvedHeader[] | undefined> {
  if (!secrets || !headers.some((h) => h.oauth2 !== undefined)) return undefined;
  return Promise.all(
    headers.map(async (h) => (h.oauth2 === undefined ? h : { ...h, value: await secrets.renewAfterUnauthorized(h.oauth2, h.value) })),
  );
}

/** The headers as a `Headers` init record. */
export function headerRecord(headers: ResolvedHeader[]): Record<string, string> {
  return Object.fromEntries(headers.map((h) => [h.name, h.value]));
}
