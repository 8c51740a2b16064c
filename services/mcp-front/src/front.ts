/**
 * mcp-front assembled: the tenant catalog, the argument validator, the
 * session store and SSE events on the bus, both protocol eras, and the
 * express router.
 */
import type { IncomingMessage } from 'node:http';
import type { Router } from 'express';
import { anonymousPrincipal, DEFAULT_SESSION_TTL_MS, errorMessage, streams, type Bus, type Logger, type Principal } from '@punk/lib';
import { serversInScope, type Scope } from './aggregate.js';
import { TenantCatalog } from './catalog.js';
import { McpEndpoints } from './endpoint.js';
import { startListChangedFanOut, startResourceUpdatedFanOut } from './fan-out.js';
import { GetStreams } from './get-stream.js';
import { buildMcpServer } from './handlers.js';
import { createRouter, type ScopeCheck } from './http.js';
import { LegacyEndpoint } from './legacy.js';
import { DEFAULT_REQUEST_STATE_TTL_MS, RequestStateCodec, signingKeyOf } from './request-state.js';
import { SessionEvents } from './session-events.js';
import { startSessionMessages } from './session-messages.js';
import { SessionStore } from './sessions.js';
import { ToolInputValidator } from './validate.js';

/** Options of `createFront`. */
export interface FrontOptions {
  bus: Bus;
  log: Logger;
  /** Tenant whose servers this front exposes. */
  tenant: string;
  /** Largest accepted request body, in bytes (413 above it). */
  maxBodyBytes: number;
  /** Deadline of one forwarded tools/call, resources/read or prompts/get on the bus, in milliseconds. */
  callTimeoutMs: number;
  /** `serverInfo` the endpoint reports to clients; defaults to `{ name: 'punk', version: '0.1.0' }`. */
  serverInfo?: { name: string; version: string };
  /** Idle time after which a 2025-era session expires, in milliseconds; activity renews it. Default 30 min. */
  sessionTtlMs?: number;
  /** Reconnection delay told to clients of 2025-era GET streams (SSE `retry:`), in milliseconds. Default 1000. */
  sseRetryMs?: number;
  /** Interval of SSE keep-alive comments on GET streams, in milliseconds. Default 15 s. */
  keepAliveMs?: number;
  /**
   * Who is calling; a 2025 session is bound to the principal that created it.
   * Defaults to the tenant's anonymous principal (API keys and OAuth are not wired yet).
   */
  principalOf?: (req: IncomingMessage) => Principal;
  /**
   * Key (at least 32 bytes, UTF-8) that signs the `requestState` of input_required results for 2026-07-28
   * clients (`PUNK_SESSION_SIGNING_KEY`); every replica of a tenant needs the same one. Absent: a random key
   * of this process, with a warning (a retry reaching another process then fails with -32602).
   */
  sessionSigningKey?: string;
  /** Lifetime of a minted `requestState`, in milliseconds. Default 5 min (the gateway's default pending bound). */
  requestStateTtlMs?: number;
}

/** A running mcp-front. */
export interface Front {
  /** Serves `/mcp`, `/servers/<name>/mcp` and `/servers/<namespace>/<name>/mcp`; mount at the root of an express app. */
  router: Router;
  /**
   * Stops taking new sessions, closes the GET streams this replica holds
   * (with a `retry:` hint: the client reconnects to another replica), ends
   * in-flight 2026 exchanges and stops listening to the bus. 2025 sessions
   * live on in the store. Idempotent.
   */
  close(): Promise<void>;
}

/**
 * Creates mcp-front for one tenant. Ensures stream `PUNK_SSE` and bucket
 * `PUNK_SESSIONS`, subscribes to `punk.registry.changed` and serves
 * `punk.tenant.<tenant>.session-message` (so it needs a live
 * bus) but does not need the gateway yet: the catalog is read lazily from
 * `punk.gateway.call` on first use. Any number of fronts of a tenant may run
 * on one bus; each serves every 2025 session.
 * @throws PunkError from the bus when the stream, bucket or subscriptions cannot be made.
 * @throws RangeError when `sessionSigningKey` is shorter than 32 bytes.
 */
export async function createFront(options: FrontOptions): Promise<Front> {
  const log = options.log.child({ module: 'mcp-front' });
  const { bus, tenant } = options;
  await bus.ensureStream(streams.sse);
  const sessions = await SessionStore.open(bus, options.sessionTtlMs ?? DEFAULT_SESSION_TTL_MS, log);
  const events = new SessionEvents(bus);
  const catalog = new TenantCatalog(bus, log, tenant);
  await catalog.start();
  const fanOut = await startListChangedFanOut({ bus, log, tenant, sessions, events, catalog });
  const updatesFanOut = await startResourceUpdatedFanOut({ bus, log, tenant, sessions, events, catalog });
  const sessionMessages = await startSessionMessages({ bus, tenant, sessions, events });
  const validator = new ToolInputValidator(log);
  const serverInfo = options.serverInfo ?? { name: 'punk', version: '0.1.0' };
  const requestState = new RequestStateCodec(signingKeyOf(options.sessionSigningKey, log), options.requestStateTtlMs ?? DEFAULT_REQUEST_STATE_TTL_MS);
  const deps = { bus, log, tenant, callTimeoutMs: options.callTimeoutMs, catalog, validator, serverInfo, requestState };
  const getStreams = new GetStreams({ bus, log, sessions, events, retryMs: options.sseRetryMs ?? 1000, keepAliveMs: options.keepAliveMs ?? 15_000 });
  const legacy = new LegacyEndpoint({
    bus,
    log,
    tenant,
    sessions,
    streams: getStreams,
    buildServer: (scope, session) => buildMcpServer(deps, scope, session),
    principalOf: options.principalOf ?? (() => anonymousPrincipal(tenant)),
  });
  const endpoints = new McpEndpoints({ log, legacy, maxBodyBytes: options.maxBodyBytes, buildServer: scope => buildMcpServer(deps, scope) });
  // A registry change does not say which list changed: tell clients about all three.
  const stopListening = catalog.onChange(change => endpoints.notifyListChanged(change.server, { tools: true, resources: true, prompts: true }));

  const checkScope = async (scope: Scope): Promise<ScopeCheck> => {
    if (scope.kind === 'aggregate') return { ok: true };
    let servers;
    try {
      servers = serversInScope(await catalog.listServers(), scope);
    } catch (error) {
      return { ok: false, status: 503, message: `the catalog of tenant ${tenant} is unavailable: ${errorMessage(error)}` };
    }
    const label = scope.namespace ? `${scope.namespace}/${scope.server}` : scope.server;
    if (servers.length === 0) return { ok: false, status: 404, message: `no MCP server named ${label} in tenant ${tenant}` };
    if (servers.length > 1) {
      return { ok: false, status: 404, message: `${label} is ambiguous: use /servers/<namespace>/${scope.server}/mcp (namespaces: ${servers.map(s => s.namespace).join(', ')})` };
    }
    return { ok: true };
  };

  const router = createRouter({ log, maxBodyBytes: options.maxBodyBytes, endpoints, checkScope });
  let closing: Promise<void> | undefined;
  return {
    router,
    close: () =>
      (closing ??= (async () => {
        stopListening();
        await fanOut.unsubscribe();
        await updatesFanOut.unsubscribe();
        await sessionMessages.unsubscribe();
        await catalog.close();
        getStreams.closeAll();
        await endpoints.close();
      })()),
  };
}
