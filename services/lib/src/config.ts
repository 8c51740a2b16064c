import { hostname } from 'node:os';
import { z } from 'zod';
import { PunkError } from './errors.js';

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();
const logLevel = z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);

/**
 * Every setting Punk reads from the environment, with its `PUNK_*` variable,
 * default and validation. The README's configuration reference mirrors this table.
 */
export const configSchema = z.object({
  /** `PUNK_LOG_LEVEL`: pino level. */
  logLevel: logLevel.default('info'),
  /** `PUNK_HOST`: address the HTTP listener binds. */
  host: z.string().min(1).default('127.0.0.1'),
  /** `PUNK_PORT`: port of the HTTP listener (0 picks a free one). */
  port: port.default(4100),
  /** `PUNK_DATA_DIR`: PGlite directory for the embedded database. */
  dataDir: z.string().min(1).default('.punk/data'),
  /** `PUNK_DATABASE_URL`: a Postgres URL; when set, replaces the embedded PGlite database. */
  databaseUrl: z.string().url().optional(),
  /** `PUNK_MANIFESTS`: directory of McpServer manifests served by `punk up`. */
  manifests: z.string().min(1).default('examples'),
  /** `PUNK_TENANT`: tenant (namespace) of manifests that name none. */
  tenant: z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a DNS label (lower-case letters, digits, -)').default('default'),
  /** `PUNK_MAX_BODY_BYTES`: largest accepted HTTP request body, in bytes. */
  maxBodyBytes: positiveInt.default(1024 * 1024),
  /** `PUNK_CALL_TIMEOUT_MS`: default deadline of one upstream call, in milliseconds. */
  callTimeoutMs: positiveInt.default(60_000),
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
  /** `PUNK_INSTANCE_ID`: name of this replica in logs and NATS connection names (default `<hostname>-<pid>`). */
  instanceId: z.string().regex(/^[A-Za-z0-9._-]+$/, 'must be letters, digits, ".", "_" or "-"').default(() => `${hostname()}-${process.pid}`),
});

/** Validated configuration. */
export type PunkConfig = z.infer<typeof configSchema>;

const envNames: Record<keyof PunkConfig, string> = {
  logLevel: 'PUNK_LOG_LEVEL',
  host: 'PUNK_HOST',
  port: 'PUNK_PORT',
  dataDir: 'PUNK_DATA_DIR',
  databaseUrl: 'PUNK_DATABASE_URL',
  manifests: 'PUNK_MANIFESTS',
  tenant: 'PUNK_TENANT',
  maxBodyBytes: 'PUNK_MAX_BODY_BYTES',
  callTimeoutMs: 'PUNK_CALL_TIMEOUT_MS',
  serverStartTimeoutMs: 'PUNK_SERVER_START_TIMEOUT_MS',
  natsUrl: 'PUNK_NATS_URL',
  shutdownTimeoutMs: 'PUNK_SHUTDOWN_TIMEOUT_MS',
  instanceId: 'PUNK_INSTANCE_ID',
  sessionSigningKey: 'PUNK_SESSION_SIGNING_KEY',
};

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
 * @throws PunkError `InvalidConfig` listing every bad variable or flag with its value and the rule it broke.
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
  const problems = parsed.error.issues.map(issue => {
    const key = String(issue.path[0]) as keyof PunkConfig;
    const name = (fromOverride.has(key) ? overrideNames[key] : undefined) ?? envNames[key] ?? key;
    return `${name}=${JSON.stringify(raw[key])}: ${issue.message}`;
  });
  throw new PunkError('InvalidConfig', `invalid configuration: ${problems.join('; ')}`, { problems });
}
