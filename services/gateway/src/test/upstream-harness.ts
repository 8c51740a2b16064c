/** Test helpers for one {@link Upstream} on its own: a log that is kept, state history, and a map-backed vault. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { PunkError, type McpServer, type ServerState } from '@punk/lib';
import type { Secrets } from '../upstream-secrets.js';
import { Upstream, type UpstreamOptions } from '../upstream.js';

/** An upstream under test with what it logged and the states it went through. */
export interface UpstreamUnderTest {
  upstream: Upstream;
  /** Every log line (JSON), at debug level and above. */
  lines: string[];
  states: ServerState[];
  /** Times the upstream said its listings changed. */
  listChanges: number;
  close(): Promise<void>;
}

/** Builds and starts an upstream for `server`; `close` stops it and removes its working directory. */
export async function startUpstream(server: McpServer, options: Partial<UpstreamOptions> = {}): Promise<UpstreamUnderTest> {
  const lines: string[] = [];
  const sink = new Writable({ write: (chunk, _encoding, done) => (lines.push(String(chunk)), done()) });
  const log = pino({ level: 'debug' }, sink);
  const workDir = await mkdtemp(join(tmpdir(), 'punk-upstream-'));
  const under: UpstreamUnderTest = {
    upstream: undefined as unknown as Upstream,
    lines,
    states: [],
    listChanges: 0,
    close: async () => {
      await under.upstream.stop();
      await rm(workDir, { recursive: true, force: true });
    },
  };
  under.upstream = new Upstream({
    server,
    log,
    workDir,
    startTimeoutMs: 15_000,
    callTimeoutMs: 15_000,
    onState: (_u, state) => void under.states.push(state),
    onListChanged: () => void under.listChanges++,
    onResourceUpdated: () => undefined,
    ...options,
  });
  under.upstream.start();
  await under.upstream.firstStart;
  return under;
}

/** A vault over a map of `cred:` references, counting renewals; `renew` gives the value after a 401 (or throws). */
export interface MapSecrets extends Secrets {
  /** Every renewal asked for: the credential id and whether a rejected value was given (never the value itself). */
  renewals: { credentialId: string; rejected: string }[];
}

/** A real, simple resolver: `values` maps each reference to what it resolves to. */
export function mapSecrets(
  values: Record<string, { value: string; oauth2?: string }>,
  renew?: (credentialId: string, rejected: string) => string,
): MapSecrets {
  const renewals: { credentialId: string; rejected: string }[] = [];
  return {
    renewals,
    resolve: async (reference) => {
      const found = values[reference];
      if (!found) throw new PunkError('CredentialNotFound', `credential ${reference.slice('cred:'.length)} does not exist`);
      return found;
    },
    renewAfterUnauthorized: async (credentialId, rejected) => {
      renewals.push({ credentialId, rejected });
      if (!renew) throw new PunkError('CredentialRefreshFailed', `credential ${credentialId} could not be refreshed: no refresh token`);
      const value = renew(credentialId, rejected);
      // The vault keeps the renewed value: later resolutions get it.
      for (const entry of Object.values(values)) if (entry.oauth2 === credentialId) entry.value = value;
      return value;
    },
  };
}
