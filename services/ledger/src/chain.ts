import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { LedgerEvent, Principal } from '@punk/lib';

/** `prevHash` of the first event of every tenant's chain: 64 zeros. */
export const GENESIS_HASH = '0'.repeat(64);

/** The fields of an event that its hash covers, in chain position. */
export interface ChainLink {
  id: string;
  type: string;
  tenant: string;
  /** Position in the tenant's chain, from 1. */
  tenantSeq: number;
  runId: string;
  /** RFC 3339 time, spelled as the source sent it. */
  occurredAt: string;
  source: string;
  principal?: Principal | undefined;
  sessionId?: string | undefined;
  server?: string | undefined;
  data: Record<string, unknown>;
  /** Hash of the tenant's previous event, or `GENESIS_HASH`. */
  prevHash: string;
}

/**
 * The hash of one chain link: SHA-256, lower-case hex, over the JSON
 * Canonicalization Scheme (RFC 8785) form of exactly the `ChainLink` fields.
 * Absent optional fields are left out (never `null`), so an event hashes the
 * same when it is appended and when it is read back.
 */
export function hashLink(link: ChainLink): string {
  const content = {
    id: link.id,
    type: link.type,
    tenant: link.tenant,
    tenantSeq: link.tenantSeq,
    runId: link.runId,
    occurredAt: link.occurredAt,
    source: link.source,
    principal: link.principal ?? undefined,
    sessionId: link.sessionId ?? undefined,
    server: link.server ?? undefined,
    data: link.data,
    prevHash: link.prevHash,
  };
  const text = canonicalize(content);
  if (text === undefined) throw new Error(`event ${link.id} cannot be canonicalized`);
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** Places an event at `tenantSeq` after `prevHash` and computes its hash. */
export function chainEvent(event: LedgerEvent, tenantSeq: number, prevHash: string): ChainLink & { hash: string } {
  const link: ChainLink = {
    id: event.id,
    type: event.type,
    tenant: event.tenant,
    tenantSeq,
    runId: event.runId,
    occurredAt: event.occurredAt,
    source: event.source,
    principal: event.principal,
    sessionId: event.sessionId,
    server: event.server,
    data: event.data,
    prevHash,
  };
  return { ...link, hash: hashLink(link) };
}
