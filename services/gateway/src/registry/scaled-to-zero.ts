/**
 * Servers scaled to zero (`spec.replicas: 0`, as the operator publishes an McpServer that `kubectl scale` or a
 * HorizontalPodAutoscaler took to zero): the gateway opens no connection for them, lists them with no tools and
 * answers every call at once with {@link scaledToZeroError}, instead of routing it to a Service without endpoints.
 * A server with `spec.idle` is asleep instead: its calls wait for a wake (wake.ts), and it stays listed with what it
 * listed last on this replica.
 */
import { durationMs, PunkError, type McpServer, type ServerCatalog } from '@punk/lib';

/** Whether `server` is scaled to zero (`spec.replicas` is 0). */
export function isScaledToZero(server: McpServer): boolean {
  return server.spec.replicas === 0;
}

/** The sentence a call to a server scaled to zero is answered with, naming the McpServer and the field. */
export function scaledToZeroMessage(server: McpServer): string {
  const { namespace = 'default', name } = server.metadata;
  if (server.spec.idle)
    return `server ${name} is asleep (McpServer ${namespace}/${name} scaled to zero by spec.idle after ${server.spec.idle.scaleToZeroAfter} unused); the first call wakes it`;
  return `server ${name} is scaled to zero (McpServer ${namespace}/${name} spec.replicas=0); scale it up to call it`;
}

/** PunkError `ServerScaledToZero` for a call to `server`. */
export function scaledToZeroError(server: McpServer): PunkError {
  return new PunkError('ServerScaledToZero', scaledToZeroMessage(server), { server: server.metadata.name });
}

/**
 * The catalog entry of a server scaled to zero: state `stopped`, the reason as `lastError`, nothing listed; an asleep
 * one (`spec.idle`) lists what its connection listed last (`listed`), so its tools stay callable, and its wake budget.
 */
export function scaledToZeroCatalog(server: McpServer, listed?: ServerCatalog): ServerCatalog {
  if (server.spec.idle && listed)
    return { ...listed, state: 'stopped', lastError: scaledToZeroMessage(server), wakeTimeoutMs: durationMs(server.spec.idle.wakeTimeout) };
  return {
    name: server.metadata.name,
    namespace: server.metadata.namespace ?? 'default',
    state: 'stopped',
    lastError: scaledToZeroMessage(server),
    capabilities: {},
    tools: [],
    resources: [],
    resourceTemplates: [],
    prompts: [],
    sideEffectLevels: {},
    withheldTools: [],
    ...(server.spec.idle && { wakeTimeoutMs: durationMs(server.spec.idle.wakeTimeout) }),
  };
}
