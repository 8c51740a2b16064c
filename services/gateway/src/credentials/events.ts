/**
 * Ledger events of the credentials vault. Their `data` holds the credential id, its type and key names, refresh
 * times and error messages: never a value.
 */
import { randomUUID } from 'node:crypto';
import type { LedgerEvent, LedgerEventType, Principal } from '@punk/lib';

/** Run id of a credential's events, which belong to no client run: `credential.<id>` (the tenant is the event's own). */
export function credentialRunId(id: string): string {
  return `credential.${id}`;
}

/** A `credential.*` event of one credential; `principal` is the admin of a create or delete, absent for a refresh. */
export function credentialEvent(
  type: Extract<LedgerEventType, `credential.${string}`>,
  tenant: string,
  id: string,
  data: Record<string, unknown>,
  principal?: Principal,
): LedgerEvent {
  return {
    id: randomUUID(),
    type,
    tenant,
    runId: credentialRunId(id),
    occurredAt: new Date().toISOString(),
    source: 'gateway',
    ...(principal && { principal }),
    data: { id, ...data },
  };
}
