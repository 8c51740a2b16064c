/**
 * Resource subscriptions of 2026-07-28 clients (MCP 2026-07-28 server/resources "Subscriptions": the URIs go in
 * the `resourceSubscriptions` of a `subscriptions/listen` request; the SDK's listen router acknowledges them and
 * delivers `notifications/resources/updated` for them on the listen stream).
 *
 * Punk's part: before the listen request is served, the upstream owning each URI is subscribed to it through
 * the gateway (`resources/subscribe` on `punk.gateway.call`, as for 2025 sessions); and every front replica
 * hears every `punk.resources.updated` of its tenant (no queue group: each replica holds its own listen
 * streams) and hands it to its listen streams whose endpoint includes the server.
 */
import {
  errorMessage,
  parseMessage,
  requestGateway,
  resourceUpdatedSchema,
  subjects,
  type Bus,
  type BusSubscription,
  type Logger,
} from '@punk/lib';
import { routeResource, type Scope } from './aggregate.js';
import type { TenantCatalog } from './catalog.js';

/** What the subscriptions need. */
export interface ListenSubscriptionDeps {
  bus: Bus;
  log: Logger;
  tenant: string;
  catalog: TenantCatalog;
  /** Deadline of one `resources/subscribe` on the bus, in milliseconds. */
  timeoutMs: number;
}

/** The `resourceSubscriptions` of a `subscriptions/listen` request body, or none for any other body. */
export function listenedResources(body: unknown): string[] {
  if (typeof body !== 'object' || body === null || (body as { method?: unknown }).method !== 'subscriptions/listen') return [];
  const uris = (body as { params?: { notifications?: { resourceSubscriptions?: unknown } } }).params?.notifications?.resourceSubscriptions;
  return Array.isArray(uris) ? uris.filter((uri): uri is string => typeof uri === 'string') : [];
}

/**
 * Subscribes the upstreams owning the URIs a `subscriptions/listen` body names (on a per-server endpoint, every
 * URI goes to that server). A URI no server owns, or a subscription the upstream refuses, is logged and
 * skipped: the listen stream then hears no updates for it. Never throws.
 */
export async function subscribeListened(deps: ListenSubscriptionDeps, scope: Scope, body: unknown): Promise<void> {
  const uris = listenedResources(body);
  if (uris.length === 0) return;
  try {
    const view = await deps.catalog.view(scope);
    await Promise.all(
      uris.map(async (uri) => {
        const server = routeResource(view, uri) ?? (scope.kind === 'server' ? view.servers[0]?.name : undefined);
        if (!server) {
          deps.log.debug({ uri }, 'subscriptions/listen names a resource no server of the endpoint owns');
          return;
        }
        await requestGateway(deps.bus, { method: 'resources/subscribe', tenant: deps.tenant, server, uri }, deps.timeoutMs).catch(
          (error: unknown) =>
            deps.log.warn(
              { server, uri, err: errorMessage(error) },
              'could not subscribe an upstream to a resource a listen stream asked for',
            ),
        );
      }),
    );
  } catch (error) {
    deps.log.warn({ err: errorMessage(error) }, 'resource subscriptions of a listen stream not made: the catalog is unavailable');
  }
}

/**
 * Hands every `punk.resources.updated` of the tenant to `deliver` (the endpoint's listen streams).
 * Unsubscribe to stop.
 * @throws PunkError from the bus when the subscription cannot be made.
 */
export async function startListenUpdates(
  deps: Pick<ListenSubscriptionDeps, 'bus' | 'tenant'>,
  deliver: (server: string, uri: string) => void,
): Promise<BusSubscription> {
  return deps.bus.subscribe(subjects.resourceUpdated, (data) => {
    const updated = parseMessage(resourceUpdatedSchema, subjects.resourceUpdated, data);
    if (updated.tenant === deps.tenant) deliver(updated.server, updated.uri);
  });
}
