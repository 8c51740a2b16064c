/**
 * Messages of `per-client` upstream sessions for their 2025 client session,
 * outside any call (MCP 2025-11-25 server/utilities/logging
 * `notifications/message`, client/roots `roots/list`): the gateway replica
 * owning the upstream session asks one front of the tenant (queue group
 * `mcp-front-sessions-<tenant>`, request/reply so the gateway keeps their
 * order and knows the outcome) to store each one on the session's GET stream
 * with {@link SessionEvents.append}, the same path as `list_changed`; the
 * replica holding the stream writes it, and a client reconnecting with
 * `Last-Event-ID` gets it too.
 *
 * The log level is the front's to apply: it lives in the session's stored
 * state (`logging/setLevel`), which only fronts read. A message below it is
 * not stored; with no level set, every message is.
 */
import {
  passesLogLevel,
  parseMessage,
  PunkError,
  queues,
  sessionMessageSchema,
  subjects,
  type Bus,
  type BusSubscription,
  type SessionMessageReply,
} from '@punk/lib';
import type { SessionEvents } from './session-events.js';
import type { SessionStore } from './sessions.js';

/** What {@link startSessionMessages} needs. */
export interface SessionMessagesDeps {
  bus: Bus;
  tenant: string;
  sessions: SessionStore;
  events: SessionEvents;
}

/**
 * Serves `punk.tenant.<tenant>.session-message` in the tenant's queue group; unsubscribe to stop.
 * Replies `{ stored }`; errors: `InvalidMessage`, `SessionNotFound` (ended, expired, or another tenant's).
 * @throws PunkError from the bus when the subscription cannot be made.
 */
export async function startSessionMessages(deps: SessionMessagesDeps): Promise<BusSubscription> {
  const subject = subjects.sessionMessage(deps.tenant);
  return deps.bus.serve(
    subject,
    async (data): Promise<SessionMessageReply> => {
      const { sessionId, message } = parseMessage(sessionMessageSchema, subject, data);
      const session = await deps.sessions.get(sessionId);
      if (!session || session.state.tenant !== deps.tenant) {
        throw new PunkError(
          'SessionNotFound',
          `session ${sessionId} of tenant ${deps.tenant} ended or expired; ${message.method} was not stored`,
          { sessionId },
        );
      }
      if (message.method === 'notifications/message') {
        const level = (message['params'] as { level?: unknown } | undefined)?.level;
        if (!passesLogLevel(level, session.state.logLevel))
          return { stored: false, reason: `level ${String(level)} is below the session's log level ${session.state.logLevel}` };
      }
      if (!session.state.stream) return { stored: false, reason: `session ${sessionId} has no GET stream open yet` };
      await deps.events.append(sessionId, session.state.stream, message);
      return { stored: true };
    },
    { queue: queues.frontSessions(deps.tenant) },
  );
}
