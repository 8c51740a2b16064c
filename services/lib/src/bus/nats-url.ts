import { PunkError } from '../errors.js';

/**
 * `PUNK_NATS_URL` as nats.js takes it: the server list, and the credentials a URL's userinfo carries
 * (`nats://user:password@host:4222`, or `nats://token@host:4222`), which nats.js does not read from the URL itself.
 */

/** Credentials for nats.js's `connect` options: `user`/`pass` or `token`, or none. */
export type NatsCredentials = { user: string; pass: string } | { token: string } | Record<string, never>;

/** A parsed `PUNK_NATS_URL`. */
export interface NatsServers {
  /** Server URLs without userinfo, for nats.js's `servers`. */
  servers: string[];
  /** The credentials of the first URL that carries any (NATS authenticates a connection once, with one identity). */
  credentials: NatsCredentials;
  /** The URL list as messages and logs may show it: userinfo replaced by `<redacted>`. */
  shown: string;
}

/**
 * Splits a comma-separated NATS URL list into servers and credentials (NATS server docs, "Authentication":
 * user/password and token). Percent-encoded characters in the userinfo are decoded. Entries that are not URLs
 * (`127.0.0.1:4222`) pass through unchanged, for nats.js to judge.
 * @throws PunkError `InvalidConfig` when a userinfo is not valid percent-encoding.
 */
export function parseNatsUrl(url: string): NatsServers {
  let credentials: NatsCredentials = {};
  const servers = url
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry) => {
      let parsed: URL;
      try {
        parsed = new URL(entry);
      } catch {
        return entry;
      }
      if (!parsed.username && !parsed.password) return entry;
      if (Object.keys(credentials).length === 0) {
        const user = decodeUserinfo(parsed.username);
        credentials = parsed.password ? { user, pass: decodeUserinfo(parsed.password) } : { token: user };
      }
      parsed.username = '';
      parsed.password = '';
      return parsed.toString().replace(/\/$/, '');
    });
  return { servers, credentials, shown: redactNatsUrl(url) };
}

/**
 * `url` with every userinfo (`user:password@`, `token@`) replaced by `<redacted>@`, for messages and logs. Each
 * comma-separated entry loses everything between `//` and its last `@` (a host never holds one), so a password
 * with an unencoded `@`, `/`, `?` or `#` is hidden too.
 */
export function redactNatsUrl(url: string): string {
  return url
    .split(',')
    .map((entry) => entry.replace(/\/\/.*@/, '//<redacted>@'))
    .join(',');
}

/** A percent-decoded user, password or token. @throws PunkError `InvalidConfig` naming PUNK_NATS_URL when malformed. */
function decodeUserinfo(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new PunkError('InvalidConfig', 'PUNK_NATS_URL: the user, password or token is not valid percent-encoding (write % as %25)', {
      variable: 'PUNK_NATS_URL',
    });
  }
}
