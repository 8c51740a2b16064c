/**
 * Tenant settings: the keys the settings API knows (today `redaction`), their schemas, and the watch of bucket
 * `PUNK_TENANT_SETTINGS` every process that appends ledger events keeps, so a setting changed through any replica
 * applies on every one. Governance owns the settings (Postgres) and publishes them to the bucket.
 */
import { z } from 'zod';
import type { Bus, BusSubscription } from '../bus/bus.js';
import { buckets, kvKey } from '../contracts.js';
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import { attachRedaction } from './attached.js';

/** The value schema of each setting the API knows. */
export const settingValueSchemas = {
  redaction: z.boolean('must be true or false'),
} as const;

/** A setting's name. */
export type SettingKey = keyof typeof settingValueSchemas;

/** The names of the settings, in the order the API lists them. */
export const SETTING_KEYS = Object.keys(settingValueSchemas) as SettingKey[];

/** Each setting's value when it was never set. */
export const SETTING_DEFAULTS: Record<SettingKey, unknown> = { redaction: false };

/** A tenant's settings as published in bucket `PUNK_TENANT_SETTINGS`: every known key, defaults filled in. */
export const tenantSettingsSchema = z.object({ redaction: z.boolean().default(false) });
export type TenantSettings = z.infer<typeof tenantSettingsSchema>;

/** The settings of every tenant, kept current by a watch of bucket `PUNK_TENANT_SETTINGS`. */
export interface SettingsWatch {
  /** `tenant`'s settings (the defaults for a tenant never set). */
  of(tenant: string): TenantSettings;
  /** Stops this holder's use; the watch stops with the last holder. */
  stop(): Promise<void>;
}

/** The shared watch of each bus and how many hold it. */
const shared = new WeakMap<Bus, { watch: Promise<{ of: SettingsWatch['of']; subscription: BusSubscription }>; holders: number }>();

/**
 * Watches bucket `PUNK_TENANT_SETTINGS` on `bus` and attaches it to `appendLedgerEvent` (redaction), once per bus
 * however many components of the process call it; resolves once the settings the bucket held are known, so no
 * event is appended unmasked while they load. An entry that is not valid is logged and its tenant keeps what it had.
 * @throws PunkError `BusUnavailable` when the bucket cannot be opened or watched.
 */
export async function watchTenantSettings(bus: Bus, log: Logger): Promise<SettingsWatch> {
  let entry = shared.get(bus);
  if (!entry) {
    const settings = new Map<string, TenantSettings>();
    const defaults = tenantSettingsSchema.parse({});
    const watch = (async () => {
      const kv = await bus.keyValue(buckets.tenantSettings);
      const subscription = await kv.watch((change) => {
        if (change.operation === 'delete') {
          settings.delete(change.key);
          return;
        }
        const parsed = tenantSettingsSchema.safeParse(change.value);
        if (!parsed.success) {
          log.error({ key: change.key, err: errorMessage(parsed.error) }, `tenant settings ${change.key} are not valid; kept as they were`);
          return;
        }
        settings.set(change.key, parsed.data);
      });
      const of = (tenant: string) => settings.get(kvKey(tenant)) ?? defaults;
      attachRedaction(bus, (tenant) => of(tenant).redaction);
      return { of, subscription };
    })();
    entry = { watch, holders: 0 };
    shared.set(bus, entry);
    watch.catch(() => shared.delete(bus));
  }
  entry.holders++;
  const held = entry;
  const { of } = await held.watch;
  let stopped = false;
  return {
    of,
    async stop() {
      if (stopped) return;
      stopped = true;
      if (--held.holders > 0) return;
      shared.delete(bus);
      attachRedaction(bus, undefined);
      await (await held.watch).subscription.unsubscribe();
    },
  };
}
