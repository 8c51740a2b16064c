/**
 * Tenant settings, owned by governance: rows of `governance.settings` in Postgres (the truth, surviving restarts),
 * published to bucket `PUNK_TENANT_SETTINGS` at start and on each change, where every process that appends ledger
 * events watches them (lib redaction/settings.ts). Served on `punk.governance.admin` (`settings.get`, `settings.put`),
 * which mcp-front exposes as `GET` and `PUT /api/v1/settings`. Each change is audited: a `settings.changed` ledger
 * event (key, value, previous value) appended before the change is acknowledged.
 */
import { randomUUID } from 'node:crypto';
import {
  appendLedgerEvent,
  buckets,
  governanceAdminRequestSchema,
  kvKey,
  parseMessage,
  PunkError,
  SETTING_DEFAULTS,
  SETTING_KEYS,
  settingValueSchemas,
  subjects,
  tenantSettingsSchema,
  type Bus,
  type Database,
  type KvStore,
  type Logger,
  type Principal,
  type SettingKey,
} from '@punk/lib';

/** One setting as the API shows it; `updatedAt` and `updatedBy` only once it was set. */
export interface SettingView {
  key: SettingKey;
  value: unknown;
  updatedAt?: string;
  updatedBy?: string;
}

interface SettingRow {
  tenant: string;
  key: string;
  value: unknown;
  updated_at: Date;
  updated_by: string;
}

const isKnown = (key: string): key is SettingKey => (SETTING_KEYS as string[]).includes(key);

/** Tenant settings in Postgres, published to the bucket. */
export class SettingsStore {
  private constructor(
    private readonly db: Database,
    private readonly bus: Bus,
    private readonly kv: KvStore,
  ) {}

  /**
   * Opens the bucket and publishes every tenant's stored settings to it (the database is the truth).
   * @throws PunkError `DatabaseUnavailable`, `BusUnavailable`.
   */
  static async open(db: Database, bus: Bus): Promise<SettingsStore> {
    const store = new SettingsStore(db, bus, await bus.keyValue(buckets.tenantSettings));
    const { rows } = await db.query<{ tenant: string }>('SELECT DISTINCT tenant FROM governance.settings');
    for (const { tenant } of rows) await store.publish(tenant);
    return store;
  }

  /** Every known setting of `tenant`, in {@link SETTING_KEYS} order. */
  async list(tenant: string): Promise<SettingView[]> {
    const { rows } = await this.db.query<SettingRow>('SELECT * FROM governance.settings WHERE tenant = $1', [tenant]);
    return SETTING_KEYS.map((key) => {
      const row = rows.find((r) => r.key === key);
      return row
        ? { key, value: row.value, updatedAt: row.updated_at.toISOString(), updatedBy: row.updated_by }
        : { key, value: SETTING_DEFAULTS[key] };
    });
  }

  /**
   * Sets one setting of `tenant` from an API body `{ key, value }`, audits it, and publishes the tenant's settings.
   * @throws PunkError `InvalidSetting` naming the field (an unknown key lists the known ones), `DatabaseUnavailable`,
   *   the bus's errors (the change is stored; the next start publishes it).
   */
  async put(tenant: string, principal: Principal, body: unknown): Promise<SettingView> {
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw new PunkError('InvalidSetting', 'body: must be a JSON object { "key": …, "value": … }');
    const { key, value } = body as { key?: unknown; value?: unknown };
    if (typeof key !== 'string' || !isKnown(key))
      throw new PunkError('InvalidSetting', `key: unknown setting ${JSON.stringify(key)}; the settings are ${SETTING_KEYS.join(', ')}`, {
        field: 'key',
        known: SETTING_KEYS,
      });
    const checked = settingValueSchemas[key].safeParse(value);
    if (!checked.success)
      throw new PunkError('InvalidSetting', `value: ${checked.error.issues[0]!.message} for setting ${key}`, { field: 'value' });
    const before = (await this.list(tenant)).find((s) => s.key === key)!;
    const { rows } = await this.db.query<SettingRow>(
      `INSERT INTO governance.settings (tenant, key, value, updated_by) VALUES ($1, $2, $3, $4)
       ON CONFLICT (tenant, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now(), updated_by = EXCLUDED.updated_by
       RETURNING *`,
      [tenant, key, JSON.stringify(checked.data), principal.subject],
    );
    const row = rows[0]!;
    await appendLedgerEvent(this.bus, {
      id: randomUUID(),
      type: 'settings.changed',
      tenant,
      runId: `settings.${tenant}`,
      occurredAt: new Date().toISOString(),
      source: 'governance',
      principal,
      data: { key, value: checked.data, previous: before.value },
    });
    await this.publish(tenant);
    return { key, value: row.value, updatedAt: row.updated_at.toISOString(), updatedBy: row.updated_by };
  }

  /** Writes `tenant`'s settings, as stored, to the bucket. */
  private async publish(tenant: string): Promise<void> {
    const settings = Object.fromEntries((await this.list(tenant)).map((s) => [s.key, s.value]));
    await this.kv.put(kvKey(tenant), tenantSettingsSchema.parse(settings));
  }
}

/**
 * The `punk.governance.admin` handler. Replies: `settings.get` `{ settings: SettingView[] }`, `settings.put`
 * `{ setting: SettingView }`.
 * @throws (to the requester) PunkError `InvalidMessage` (malformed request), `InvalidSetting`, `DatabaseUnavailable`.
 */
export function settingsAdminHandler(store: SettingsStore, log: Logger): (data: unknown) => Promise<unknown> {
  return async (data) => {
    const request = parseMessage(governanceAdminRequestSchema, subjects.governanceAdmin, data);
    if (request.op === 'settings.get') return { settings: await store.list(request.tenant) };
    const setting = await store.put(request.tenant, request.principal, request.body);
    log.info(
      { tenant: request.tenant, key: setting.key, by: request.principal.subject },
      `setting ${setting.key} of tenant ${request.tenant} changed`,
    );
    return { setting };
  };
}
