/**
 * 2025-era sessions (MCP 2025-11-25 basic/transports "Session Management"):
 * one `Mcp-Session-Id`, one SDK transport and one server per session.
 *
 * This is the seam a later change moves to NATS KV: the store records which
 * endpoint (scope) a session belongs to and holds the live transport of the
 * sessions this replica serves. Only `SessionStore` is used by the rest of
 * mcp-front.
 */
import type { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import type { Server } from '@modelcontextprotocol/server';

/** A live 2025-era session served by this replica. */
export interface LiveSession {
  /** The `Mcp-Session-Id` the transport minted. */
  id: string;
  /** `scopeKey` of the endpoint that initialised it; requests on another endpoint do not find it. */
  scope: string;
  transport: NodeStreamableHTTPServerTransport;
  server: Server;
}

/** Where 2025-era sessions live. */
export interface SessionStore {
  /** The session with this id on this endpoint, if it is alive. */
  get(id: string, scope: string): LiveSession | undefined;
  /** Records a newly initialised session. */
  add(session: LiveSession): void;
  /** Forgets a session (after DELETE or transport close); a no-op for unknown ids. */
  remove(id: string): void;
  /** Every live session, for notifications and shutdown. */
  list(): LiveSession[];
}

/** The in-memory store: sessions end with the process. */
export class MemorySessionStore implements SessionStore {
  private readonly sessions = new Map<string, LiveSession>();

  get(id: string, scope: string): LiveSession | undefined {
    const session = this.sessions.get(id);
    return session && session.scope === scope ? session : undefined;
  }

  add(session: LiveSession): void {
    this.sessions.set(session.id, session);
  }

  remove(id: string): void {
    this.sessions.delete(id);
  }

  list(): LiveSession[] {
    return [...this.sessions.values()];
  }
}
