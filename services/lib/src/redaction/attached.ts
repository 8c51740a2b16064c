/**
 * Which tenants have redaction on, as seen by the settings watch of each bus (settings.ts attaches it): what
 * `appendLedgerEvent` asks before each append. Kept by bus, since every appending component of a process holds the
 * bus it appends on (one bus for all of `punk up`'s in-process services).
 */
import type { Bus } from '../bus/bus.js';

/** Whether redaction is on for a tenant. */
export type RedactionOf = (tenant: string) => boolean;

const attached = new WeakMap<Bus, RedactionOf>();

/** Makes `appendLedgerEvent` on `bus` ask `of`; `undefined` detaches. */
export function attachRedaction(bus: Bus, of: RedactionOf | undefined): void {
  if (of) attached.set(bus, of);
  else attached.delete(bus);
}

/** Whether events of `tenant` appended on `bus` are masked; false when no settings watch is attached to it. */
export function redactionOn(bus: Bus, tenant: string): boolean {
  return attached.get(bus)?.(tenant) ?? false;
}
