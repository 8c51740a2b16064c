/**
 * The rows of `gateway.tool_pins` (migrations/0003_tool_pins.sql): reads, the race-free first pin, and updates
 * that are conditional on the row's `revision`, so that replicas acting on the same listing never overwrite each
 * other's work (the loser's update matches no row and reports `false`).
 */
import type { Queryable } from '@punk/lib';
import type { PinnedDefinition } from './fingerprint.js';

/** What happens when a listed tool's definition differs from its pinned one (`spec.tools.pinning`, `PUNK_TOOL_PINNING`). */
export type PinningPolicy = 'serve' | 'hide' | 'approval';

/** One row of `gateway.tool_pins`. */
export interface PinRow {
  tenant: string;
  server: string;
  tool: string;
  fingerprint: string;
  definition: PinnedDefinition;
  pinnedAt: Date;
  pinnedBy: string;
  /** A changed definition recorded (with its ledger event) and not yet accepted, or null. */
  pendingFingerprint: string | null;
  pendingDefinition: PinnedDefinition | null;
  /** The policy in force when the change was recorded. */
  pendingPolicy: Exclude<PinningPolicy, 'serve'> | null;
  changedAt: Date | null;
  revision: number;
}

/** A definition to pin: the tool's name, its fingerprint and pinned fields. */
export interface DefinitionToPin {
  tool: string;
  fingerprint: string;
  definition: PinnedDefinition;
}

const COLUMNS = `tenant, server, tool, fingerprint, definition, pinned_at AS "pinnedAt", pinned_by AS "pinnedBy",
  pending_fingerprint AS "pendingFingerprint", pending_definition AS "pendingDefinition", pending_policy AS "pendingPolicy",
  changed_at AS "changedAt", revision`;

/** Who pinned a definition that replaced the first one under policy `serve`. */
export const SERVE_POLICY_PINNER = 'serve-policy';
/** Who pinned a definition seen in the first listing of its tool. */
export const FIRST_LISTING_PINNER = 'first-listing';

/**
 * Access to `gateway.tool_pins`. Every method runs one statement; each may throw what `Queryable.query` throws
 * (PunkError `DatabaseUnavailable`, or the server's error).
 */
export class PinStore {
  constructor(private readonly db: Queryable) {}

  /** The pins of a server's tools, by tool name. */
  async list(tenant: string, server: string): Promise<PinRow[]> {
    const { rows } = await this.db.query<PinRow>(
      `SELECT ${COLUMNS} FROM gateway.tool_pins WHERE tenant = $1 AND server = $2 ORDER BY tool`,
      [tenant, server],
    );
    return rows;
  }

  /** The pin of one tool, or undefined. */
  async get(tenant: string, server: string, tool: string): Promise<PinRow | undefined> {
    const { rows } = await this.db.query<PinRow>(
      `SELECT ${COLUMNS} FROM gateway.tool_pins WHERE tenant = $1 AND server = $2 AND tool = $3`,
      [tenant, server, tool],
    );
    return rows[0];
  }

  /**
   * Pins first sightings: inserts each definition whose tool has no pin yet, by `first-listing`; a tool another
   * replica pinned meanwhile keeps that pin (INSERT … ON CONFLICT DO NOTHING). Returns the tools this call pinned.
   */
  async pinFirst(tenant: string, server: string, definitions: DefinitionToPin[]): Promise<string[]> {
    const { rows } = await this.db.query<{ tool: string }>(
      `INSERT INTO gateway.tool_pins (tenant, server, tool, fingerprint, definition, pinned_by)
       SELECT $1, $2, t.tool, t.fingerprint, t.definition, $4
         FROM jsonb_to_recordset($3::jsonb) AS t(tool text, fingerprint text, definition jsonb)
       ON CONFLICT (tenant, server, tool) DO NOTHING
       RETURNING tool`,
      [tenant, server, JSON.stringify(definitions), FIRST_LISTING_PINNER],
    );
    return rows.map((row) => row.tool);
  }

  /** Pins `next` in place of `row`'s pin, by `pinnedBy`, and clears any pending change. False when the row changed since it was read. */
  async repin(row: PinRow, next: Omit<DefinitionToPin, 'tool'>, pinnedBy: string): Promise<boolean> {
    return this.update(
      row,
      `fingerprint = $5, definition = $6::jsonb, pinned_at = now(), pinned_by = $7,
       pending_fingerprint = NULL, pending_definition = NULL, pending_policy = NULL, changed_at = NULL`,
      [next.fingerprint, JSON.stringify(next.definition), pinnedBy],
    );
  }

  /** Records a changed definition waiting for acceptance under `policy`. False when the row changed since it was read. */
  async setPending(row: PinRow, pending: Omit<DefinitionToPin, 'tool'>, policy: Exclude<PinningPolicy, 'serve'>): Promise<boolean> {
    return this.update(row, `pending_fingerprint = $5, pending_definition = $6::jsonb, pending_policy = $7, changed_at = now()`, [
      pending.fingerprint,
      JSON.stringify(pending.definition),
      policy,
    ]);
  }

  /** Changes the policy a pending change is held under. False when the row changed since it was read. */
  async setPendingPolicy(row: PinRow, policy: Exclude<PinningPolicy, 'serve'>): Promise<boolean> {
    return this.update(row, `pending_policy = $5`, [policy]);
  }

  /** Drops the pending change (the tool is listed as pinned again). False when the row changed since it was read. */
  async clearPending(row: PinRow): Promise<boolean> {
    return this.update(row, `pending_fingerprint = NULL, pending_definition = NULL, pending_policy = NULL, changed_at = NULL`, []);
  }

  /**
   * Puts back every column of `previous` (an undo of an update made from it, whose row now has revision
   * `previous.revision + 1`). False when the row changed again since.
   */
  async restore(previous: PinRow): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `UPDATE gateway.tool_pins
          SET fingerprint = $5, definition = $6::jsonb, pinned_at = $7, pinned_by = $8, pending_fingerprint = $9,
              pending_definition = $10::jsonb, pending_policy = $11, changed_at = $12, revision = revision + 1
        WHERE tenant = $1 AND server = $2 AND tool = $3 AND revision = $4`,
      [
        previous.tenant,
        previous.server,
        previous.tool,
        previous.revision + 1,
        previous.fingerprint,
        JSON.stringify(previous.definition),
        previous.pinnedAt,
        previous.pinnedBy,
        previous.pendingFingerprint,
        previous.pendingDefinition === null ? null : JSON.stringify(previous.pendingDefinition),
        previous.pendingPolicy,
        previous.changedAt,
      ],
    );
    return rowCount === 1;
  }

  /** Deletes the pins of a server's tools; returns how many there were. */
  async deleteServer(tenant: string, server: string): Promise<number> {
    const { rowCount } = await this.db.query(`DELETE FROM gateway.tool_pins WHERE tenant = $1 AND server = $2`, [tenant, server]);
    return rowCount;
  }

  /** `SET <assignments>, revision = revision + 1` on `row` if its revision is still the one read; `$5…` are `params`. */
  private async update(row: PinRow, assignments: string, params: unknown[]): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `UPDATE gateway.tool_pins SET ${assignments}, revision = revision + 1
        WHERE tenant = $1 AND server = $2 AND tool = $3 AND revision = $4`,
      [row.tenant, row.server, row.tool, row.revision, ...params],
    );
    return rowCount === 1;
  }
}
