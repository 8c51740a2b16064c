/**
 * Servers scaled to zero (`spec.replicas: 0`, as the operator publishes an McpServer that `kubectl scale` or a
 * HorizontalPodAutoscaler took to zero): the gateway opens no connection for them, lists them with no tools and
 * answers every call at once with {@link scaledToZeroError}, instead of routing it to a Service without endpoints.
 */
import { PunkError, type McpServer, type ServerCatalog } from '@punk/lib';

/** Whether `server` is scaled to zero (`spec.replicas` is 0). */
export function isScaledToZero(server: McpServer): boolean {
  return server.spec.replicas === 0;
}

/** The sentence a call to a server scaled to zero is answered with, naming the McpServer and the field. */
export function scaledToZeroMessage(server: McpServer): string {
  const { namespace = 'default', name } = server.metadata;
  return `server ${name} is scaled to zero (McpServer ${namespace}/${name} spec.replicas=0); scale it up to call it`;
}

/** PunkError `ServerScaledToZero` for a call to `server`. */
export function scaledToZeroError(server: McpServer): PunkError {
  return new PunkError('ServerScaledToZero', scaledToZeroMessage(server), { server: server.metadata.name });
}

/** The catalog entry of a server scaled to zero: state `stopped`, the reason as `lastError`, nothing listed. */
export function scaledToZeroCatalog(server: McpServer): ServerCatalog {
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
  };
}
