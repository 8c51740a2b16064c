/**
 * The ledger events of tool-definition pinning: `tool.definition_changed` and `tool.definition_accepted`
 * (contracts.ts `ledgerEventTypeSchema`), in the run of the server's lifecycle events.
 */
import { createHash, randomUUID } from 'node:crypto';
import { lifecycleRunId, type LedgerEvent, type Principal } from '@punk/lib';
import type { DefinitionDiff } from './diff.js';
import type { PinningPolicy } from './store.js';

/** What a `tool.definition_changed` event says. */
export interface ChangedDefinition {
  tenant: string;
  server: string;
  tool: string;
  /** Fingerprint of the pinned definition. */
  previousFingerprint: string;
  /** Fingerprint of the listed definition. */
  fingerprint: string;
  diff: DefinitionDiff;
  /** The policy applied to the change. */
  policy: PinningPolicy;
  /** Revision of the pin row the change was found against. */
  revision: number;
}

/**
 * A `tool.definition_changed` event (`data`: `tool`, `previousFingerprint`, `fingerprint`, `diff`, `policy`).
 * Its id is derived from the tenant, server, tool, pin revision and new fingerprint, so replicas that see the same
 * change in the same pin state append the same event, which the ledger stream stores once (`Nats-Msg-Id`).
 */
export function definitionChangedEvent(change: ChangedDefinition): LedgerEvent {
  const { tenant, server, tool, previousFingerprint, fingerprint, diff, policy, revision } = change;
  return {
    id: derivedUuid(['tool.definition_changed', tenant, server, tool, String(revision), fingerprint]),
    type: 'tool.definition_changed',
    tenant,
    runId: lifecycleRunId(tenant, server),
    occurredAt: new Date().toISOString(),
    source: 'gateway',
    server,
    data: { tool, previousFingerprint, fingerprint, diff, policy },
  };
}

/** A `tool.definition_accepted` event (`data`: `tool`, `fingerprint`, `previousFingerprint`) by the accepting admin. */
export function definitionAcceptedEvent(
  tenant: string,
  server: string,
  tool: string,
  fingerprint: string,
  previousFingerprint: string,
  principal: Principal,
): LedgerEvent {
  return {
    id: randomUUID(),
    type: 'tool.definition_accepted',
    tenant,
    runId: lifecycleRunId(tenant, server),
    occurredAt: new Date().toISOString(),
    source: 'gateway',
    principal,
    server,
    data: { tool, fingerprint, previousFingerprint },
  };
}

/** A UUID (RFC 9562 version 8, custom) made of the SHA-256 of the NUL-joined parts. */
function derivedUuid(parts: string[]): string {
  const bytes = createHash('sha256').update(parts.join('\0'), 'utf8').digest().subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x80;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
