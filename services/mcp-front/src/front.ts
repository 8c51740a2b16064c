/**
 * mcp-front assembled: the tenant catalog, the argument validator, the
 * session store, both protocol eras, and the express router.
 */
import type { Router } from 'express';
import { errorMessage, type Bus, type Logger } from '@punk/lib';
import { serversInScope, type Scope } from './aggregate.js';
import { TenantCatalog } from './catalog.js';
import { McpEndpoints } from './endpoint.js';
import { buildMcpServer } from './handlers.js';
import { createRouter, type ScopeCheck } from './http.js';
import { MemorySessionStore, type SessionStore } from './sessions.js';
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
  /** Where 2025-era sessions live; defaults to an in-memory store. */
  sessions?: SessionStore;
}

/** A running mcp-front. */
export interface Front {
  /** Serves `/mcp`, `/servers/<name>/mcp` and `/servers/<namespace>/<name>/mcp`; mount at the root of an express app. */
  router: Router;
  /** Ends every 2025 session and in-flight 2026 exchange and stops listening to the bus. Idempotent. */
  close(): Promise<void>;
}

/**
 * Creates mcp-front for one tenant. Subscribes to `punk.registry.changed`
 * (so it needs a live bus) but does not need the gateway yet: the catalog is
 * read lazily from `punk.gateway.call` on first use.
 * @throws PunkError from the bus when the subscription cannot be made.
 */
export async function createFront(options: FrontOptions): Promise<Front> {
  const log = options.log.child({ module: 'mcp-front' });
  const catalog = new TenantCatalog(options.bus, log, options.tenant);
  await catalog.start();
  const validator = new ToolInputValidator(log);
  const sessions = options.sessions ?? new MemorySessionStore();
  const serverInfo = options.serverInfo ?? { name: 'punk', version: '0.1.0' };
  const deps = { bus: options.bus, log, tenant: options.tenant, callTimeoutMs: options.callTimeoutMs, catalog, validator, serverInfo };
  const endpoints = new McpEndpoints({ log, sessions, maxBodyBytes: options.maxBodyBytes, buildServer: scope => buildMcpServer(deps, scope) });
  // A registry change does not say which list changed: tell clients about all three.
  const stopListening = catalog.onChange(change => endpoints.notifyListChanged(change.server, { tools: true, resources: true, prompts: true }));

  const checkScope = async (scope: Scope): Promise<ScopeCheck> => {
    if (scope.kind === 'aggregate') return { ok: true };
    let servers;
    try {
      servers = serversInScope(await catalog.listServers(), scope);
    } catch (error) {
      return { ok: false, status: 503, message: `the catalog of tenant ${options.tenant} is unavailable: ${errorMessage(error)}` };
    }
    const label = scope.namespace ? `${scope.namespace}/${scope.server}` : scope.server;
    if (servers.length === 0) return { ok: false, status: 404, message: `no MCP server named ${label} in tenant ${options.tenant}` };
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
        await catalog.close();
        await endpoints.close();
      })()),
  };
}
