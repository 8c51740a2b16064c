import type { LedgerEventType, Principal } from '@punk/lib';
import type { ChainLink } from './chain.js';
import type { RunSummary } from './runs.js';

/** A stored event as the API returns it: the event, its chain position and hashes. */
export interface StoredEvent {
  id: string;
  type: LedgerEventType;
  tenant: string;
  /** Position in the tenant's chain, from 1. */
  tenantSeq: number;
  runId: string;
  /** RFC 3339, as the source sent it. */
  occurredAt: string;
  /** RFC 3339 (UTC) time the ledger stored it. */
  recordedAt: string;
  source: string;
  principal?: Principal;
  sessionId?: string;
  server?: string;
  data: Record<string, unknown>;
  prevHash: string;
  hash: string;
}

/** Columns of `ledger.events`, selected with `EVENT_COLUMNS`. */
export interface EventRow {
  id: string;
  type: string;
  tenant: string;
  tenant_seq: string;
  run_id: string;
  occurred_at: string;
  recorded_at: Date;
  source: string;
  principal: Principal | null;
  session_id: string | null;
  server: string | null;
  data: Record<string, unknown>;
  prev_hash: string;
  hash: string;
}

/** The `ledger.events` columns every event query selects, in `EventRow` order. */
export const EVENT_COLUMNS =
  'id, type, tenant, tenant_seq, run_id, occurred_at, recorded_at, source, principal, session_id, server, data, prev_hash, hash';

/** The chain fields of a row, exactly as they were hashed (NULL columns become absent fields). */
export function linkOfRow(row: EventRow): ChainLink {
  return {
    id: row.id,
    type: row.type,
    tenant: row.tenant,
    tenantSeq: Number(row.tenant_seq),
    runId: row.run_id,
    occurredAt: row.occurred_at,
    source: row.source,
    principal: row.principal ?? undefined,
    sessionId: row.session_id ?? undefined,
    server: row.server ?? undefined,
    data: row.data,
    prevHash: row.prev_hash,
  };
}

/** The API form of a row. */
export function eventOfRow(row: EventRow): StoredEvent {
  const link = linkOfRow(row);
  return {
    id: link.id,
    type: link.type as LedgerEventType,
    tenant: link.tenant,
    tenantSeq: link.tenantSeq,
    runId: link.runId,
    occurredAt: link.occurredAt,
    recordedAt: row.recorded_at.toISOString(),
    source: link.source,
    ...(link.principal && { principal: link.principal }),
    ...(link.sessionId !== undefined && { sessionId: link.sessionId }),
    ...(link.server !== undefined && { server: link.server }),
    data: link.data,
    prevHash: link.prevHash,
    hash: row.hash,
  };
}

/** Columns of `ledger.runs`. */
export interface RunRow {
  tenant: string;
  run_id: string;
  first_at: Date;
  last_at: Date;
  event_count: number;
  types: string[];
  server: string | null;
  tool: string | null;
  outcome: string | null;
  subject: string | null;
  trigger: string | null;
}

/** The API form of a run row. */
export function runOfRow(row: RunRow): RunSummary {
  return {
    runId: row.run_id,
    tenant: row.tenant,
    firstAt: row.first_at.toISOString(),
    lastAt: row.last_at.toISOString(),
    eventCount: row.event_count,
    types: row.types,
    ...(row.server !== null && { server: row.server }),
    ...(row.tool !== null && { tool: row.tool }),
    ...(row.outcome !== null && { outcome: row.outcome }),
    ...(row.subject !== null && { subject: row.subject }),
    ...(row.trigger !== null && { trigger: row.trigger }),
  };
}
