/**
 * Registry changes reach 2025-era sessions once each, not once per replica:
 * the fronts of a tenant subscribe to `punk.registry.changed` in one queue
 * group, and the member that gets a change stores the
 * `notifications/*∕list_changed` (MCP 2025-11-25 server/tools "List Changed
 * Notification", and the resources and prompts equivalents) on the GET
 * stream of every live session whose endpoint includes the changed server.
 * The replica holding each stream writes it (get-stream.ts); a session whose
 * stream is closed gets it on reconnection with `Last-Event-ID`.
 */
import {
  errorMessage,
  parseMessage,
  queues,
  registryChangedSchema,
  resourceUpdatedSchema,
  subjects,
  type Bus,
  type BusSubscription,
  type Logger,
} from '@punk/lib';
import { scopeFromKey, scopeIncludes } from './aggregate.js';
import type { TenantCatalog } from './catalog.js';
import type { SessionEvents } from './session-events.js';
import type { SessionStore, StoredSession } from './sessions.js';

/** What the fan-out needs. */
export interface FanOutDeps {
  bus: Bus;
  log: Logger;
  tenant: string;
  sessions: SessionStore;
  events: SessionEvents;
  catalog: TenantCatalog;
}

/**
 * Changes that arrive within this window (one registration change is several: `added`, then the server's
 * `starting` and `ready`) reach each session as one set of notifications, in milliseconds.
 */
export const LIST_CHANGED_COALESCE_MS = 100;

/**
 * Starts the fan-out; unsubscribe to stop it. Failures for one session are
 * logged and do not stop the others.
 * @throws PunkError from the bus when the subscription cannot be made.
 */
export async function startListChangedFanOut(deps: FanOutDeps): Promise<BusSubscription> {
  const changed = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  const flush = async () => {
    timer = undefined;
    const servers = [...changed];
    changed.clear();
    const live = (await deps.sessions.list()).filter(
      (s) => s.state.tenant === deps.tenant && s.state.stream && servers.some((server) => scopeIncludes(s.state.scope, server)),
    );
    await Promise.all(
      live.map((session) =>
        notify(deps, session).catch((error: unknown) =>
          deps.log.warn({ sessionId: session.id, err: errorMessage(error) }, 'list_changed not stored for a session'),
        ),
      ),
    );
  };
  const subscription = await deps.bus.subscribe(
    subjects.registryChanged,
    async (data) => {
      const change = parseMessage(registryChangedSchema, subjects.registryChanged, data);
      if (change.tenant !== deps.tenant) return;
      changed.add(change.server);
      timer ??= setTimeout(
        () => void flush().catch((error: unknown) => deps.log.warn({ err: errorMessage(error) }, 'list_changed not stored')),
        LIST_CHANGED_COALESCE_MS,
      );
    },
    { queue: queues.frontSessions(deps.tenant) },
  );
  return {
    unsubscribe: async () => {
      clearTimeout(timer);
      await subscription.unsubscribe();
    },
  };
}

/** Stores the list_changed notifications one session's endpoint advertises (tools always; resources and prompts when offered). */
async function notify(deps: FanOutDeps, session: StoredSession): Promise<void> {
  const { capabilities } = await deps.catalog.view(scopeFromKey(session.state.scope));
  const methods = ['notifications/tools/list_changed'];
  if (capabilities.resources) methods.push('notifications/resources/list_changed');
  if (capabilities.prompts) methods.push('notifications/prompts/list_changed');
  for (const method of methods) await deps.events.append(session.id, session.state.stream!, { jsonrpc: '2.0', method });
}

/**
 * Delivers `notifications/resources/updated` (MCP 2025-11-25 server/resources
 * "Subscriptions") once per session: one front of the tenant (queue group
 * `mcp-front-sessions-<tenant>`) hears each `punk.resources.updated` and
 * stores the notification on the GET stream of every live session whose
 * endpoint includes the server and whose stored subscriptions hold the URI.
 * Unsubscribe to stop; failures for one session are logged.
 * @throws PunkError from the bus when the subscription cannot be made.
 */
export async function startResourceUpdatedFanOut(deps: FanOutDeps): Promise<BusSubscription> {
  return deps.bus.subscribe(
    subjects.resourceUpdated,
    async (data) => {
      const updated = parseMessage(resourceUpdatedSchema, subjects.resourceUpdated, data);
      if (updated.tenant !== deps.tenant) return;
      const subscribed = (await deps.sessions.list()).filter(
        (s) =>
          s.state.tenant === deps.tenant &&
          s.state.stream &&
          s.state.subscriptions.includes(updated.uri) &&
          scopeIncludes(s.state.scope, updated.server),
      );
      await Promise.all(
        subscribed.map((session) =>
          deps.events
            .append(session.id, session.state.stream!, {
              jsonrpc: '2.0',
              method: 'notifications/resources/updated',
              params: { uri: updated.uri },
            })
            .catch((error: unknown) =>
              deps.log.warn({ sessionId: session.id, err: errorMessage(error) }, 'resources/updated not stored for a session'),
            ),
        ),
      );
    },
    { queue: queues.frontSessions(deps.tenant) },
  );
}
