/**
 * The registrations of the registry API in Postgres (`gateway.registrations`,
 * migrations/0001_registry.sql): one row per (tenant, name) with the body as
 * the admin sent it, who made and last changed it, the outcome of the last
 * test, and the last tool listing; and the last test of each managed server (`gateway.managed_tests`,
 * migrations/0006_managed_tests.sql), whose definition is not stored here.
 */
import { PunkError, type Queryable } from '@punk/lib';
import type { Registration } from './registration.js';
import type { McpItem } from '../catalog.js';

/** Outcome of the last test of a server: `unknown` before any test (and after an update). */
export type TestStatus = 'unknown' | 'ok' | 'error';

/** What the registry knows about a server beyond its definition: its last test and its last tool listing. */
export interface ServerRecord {
  status: TestStatus;
  toolCount?: number;
  lastError?: string;
  /** Connect and list time of the last test, in milliseconds. */
  latencyMs?: number;
  /** RFC 3339 time of the last test. */
  testedAt?: string;
  /** The last tool listing (of a test or of a pooled connection), as served (allow/deny and overrides applied). */
  tools?: McpItem[];
  /** RFC 3339 time of {@link tools}. */
  listedAt?: string;
}

/** One stored registration. */
export interface StoredRegistration extends ServerRecord {
  tenant: string;
  name: string;
  body: Registration;
  createdAt: string;
  createdBy: string;
  updatedAt: string;
  updatedBy: string;
}

/** The outcome of one test, as stored. */
export interface TestOutcome {
  ok: boolean;
  toolCount: number;
  tools: McpItem[];
  latencyMs: number;
  error?: string;
  /** RFC 3339 time of the test. */
  at: string;
}

interface Row {
  tenant: string;
  name: string;
  body: Registration;
  created_at: Date;
  created_by: string;
  updated_at: Date;
  updated_by: string;
  status: TestStatus;
  tool_count: number | null;
  last_error: string | null;
  latency_ms: number | null;
  tested_at: Date | null;
  tools: McpItem[] | null;
  listed_at: Date | null;
}

const COLUMNS =
  'tenant, name, body, created_at, created_by, updated_at, updated_by, status, tool_count, last_error, latency_ms, tested_at, tools, listed_at';

function fromRow(row: Row): StoredRegistration {
  return {
    tenant: row.tenant,
    name: row.name,
    body: row.body,
    createdAt: row.created_at.toISOString(),
    createdBy: row.created_by,
    updatedAt: row.updated_at.toISOString(),
    updatedBy: row.updated_by,
    status: row.status,
    ...(row.tool_count !== null && { toolCount: row.tool_count }),
    ...(row.last_error !== null && { lastError: row.last_error }),
    ...(row.latency_ms !== null && { latencyMs: row.latency_ms }),
    ...(row.tested_at !== null && { testedAt: row.tested_at.toISOString() }),
    ...(row.tools !== null && { tools: row.tools }),
    ...(row.listed_at !== null && { listedAt: row.listed_at.toISOString() }),
  };
}

/** The stored last test of a managed server, with the fingerprint of the definition it tested. */
export interface ManagedTest {
  name: string;
  /** SHA-256 (hex) of the server's spec when it was tested. */
  definition: string;
  record: ServerRecord;
}

interface ManagedTestRow {
  name: string;
  definition: string;
  status: 'ok' | 'error';
  tool_count: number;
  last_error: string | null;
  latency_ms: number;
  tested_at: Date;
  tools: McpItem[] | null;
  listed_at: Date | null;
}

/** SQLSTATE 23505: unique_violation. */
const UNIQUE_VIOLATION = '23505';

/** Reads and writes `gateway.registrations`. Every method may throw PunkError `DatabaseUnavailable`. */
export class RegistrationStore {
  constructor(private readonly db: Queryable) {}

  /** Every registration of `tenant`, by name; of every tenant when `tenant` is undefined. */
  async list(tenant?: string): Promise<StoredRegistration[]> {
    const result =
      tenant === undefined
        ? await this.db.query<Row>(`SELECT ${COLUMNS} FROM gateway.registrations ORDER BY tenant, name`)
        : await this.db.query<Row>(`SELECT ${COLUMNS} FROM gateway.registrations WHERE tenant = $1 ORDER BY name`, [tenant]);
    return result.rows.map(fromRow);
  }

  /** The registration `name` of `tenant`, or undefined. */
  async get(tenant: string, name: string): Promise<StoredRegistration | undefined> {
    const result = await this.db.query<Row>(`SELECT ${COLUMNS} FROM gateway.registrations WHERE tenant = $1 AND name = $2`, [tenant, name]);
    return result.rows[0] && fromRow(result.rows[0]);
  }

  /**
   * Stores a new registration made by `by` (a principal's subject).
   * @throws PunkError `ServerExists` when the tenant already has a registration of that name.
   */
  async insert(tenant: string, body: Registration, by: string): Promise<StoredRegistration> {
    try {
      const result = await this.db.query<Row>(
        `INSERT INTO gateway.registrations (tenant, name, body, created_by, updated_by) VALUES ($1, $2, $3, $4, $4) RETURNING ${COLUMNS}`,
        [tenant, body.name, JSON.stringify(body), by],
      );
      return fromRow(result.rows[0]!);
    } catch (error) {
      if ((error as { code?: unknown }).code === UNIQUE_VIOLATION)
        throw new PunkError('ServerExists', `tenant ${tenant} already has a server named ${body.name}`, { server: body.name });
      throw error;
    }
  }

  /**
   * Replaces a registration's body; its last test and tool listing are forgotten (they described the old one).
   * @returns the stored registration, or undefined when there is none of that name.
   */
  async replace(tenant: string, body: Registration, by: string): Promise<StoredRegistration | undefined> {
    const result = await this.db.query<Row>(
      `UPDATE gateway.registrations
          SET body = $3, updated_at = now(), updated_by = $4, status = 'unknown', tool_count = NULL, last_error = NULL,
              latency_ms = NULL, tested_at = NULL, tools = NULL, listed_at = NULL
        WHERE tenant = $1 AND name = $2 RETURNING ${COLUMNS}`,
      [tenant, body.name, JSON.stringify(body), by],
    );
    return result.rows[0] && fromRow(result.rows[0]);
  }

  /** Deletes a registration; resolves true when there was one. */
  async delete(tenant: string, name: string): Promise<boolean> {
    const result = await this.db.query(`DELETE FROM gateway.registrations WHERE tenant = $1 AND name = $2`, [tenant, name]);
    return result.rowCount > 0;
  }

  /** Records the outcome of a test (status, tool count, error, latency) and its tool listing; a no-op when the registration is gone. */
  async recordTest(tenant: string, name: string, outcome: TestOutcome): Promise<void> {
    await this.db.query(
      `UPDATE gateway.registrations
          SET status = $3, tool_count = $4, last_error = $5, latency_ms = $6, tested_at = $7, tools = CASE WHEN $3 = 'ok' THEN $8::jsonb ELSE tools END,
              listed_at = CASE WHEN $3 = 'ok' THEN $7 ELSE listed_at END
        WHERE tenant = $1 AND name = $2`,
      [tenant, name, ...testValues(outcome)],
    );
  }

  /**
   * Records a tool listing made at `at` (RFC 3339); a no-op when the registration is gone or holds a
   * newer listing (two listings can finish out of order: the newer one stays).
   */
  async recordListing(tenant: string, name: string, tools: McpItem[], at: string): Promise<void> {
    await this.db.query(
      `UPDATE gateway.registrations SET tools = $3, listed_at = $4
        WHERE tenant = $1 AND name = $2 AND (listed_at IS NULL OR listed_at <= $4)`,
      [tenant, name, JSON.stringify(tools), at],
    );
  }

  /** The stored last tests of `tenant`'s managed servers. */
  async managedTests(tenant: string): Promise<ManagedTest[]> {
    const result = await this.db.query<ManagedTestRow>(
      `SELECT name, definition, status, tool_count, last_error, latency_ms, tested_at, tools, listed_at
         FROM gateway.managed_tests WHERE tenant = $1 ORDER BY name`,
      [tenant],
    );
    return result.rows.map((row) => ({
      name: row.name,
      definition: row.definition,
      record: {
        status: row.status,
        toolCount: row.tool_count,
        latencyMs: row.latency_ms,
        testedAt: row.tested_at.toISOString(),
        ...(row.last_error !== null && { lastError: row.last_error }),
        ...(row.tools !== null && row.listed_at !== null && { tools: row.tools, listedAt: row.listed_at.toISOString() }),
      },
    }));
  }

  /**
   * Stores the outcome of a test of a managed server whose spec has the fingerprint `definition`, replacing the one
   * before. A successful test stores its listing; a failed one keeps the listing of an earlier success of the same
   * definition.
   */
  async recordManagedTest(tenant: string, name: string, definition: string, outcome: TestOutcome): Promise<void> {
    await this.db.query(
      `INSERT INTO gateway.managed_tests AS t (tenant, name, definition, status, tool_count, last_error, latency_ms, tested_at, tools, listed_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $4 = 'ok' THEN $9::jsonb END, CASE WHEN $4 = 'ok' THEN $8::timestamptz END)
       ON CONFLICT (tenant, name) DO UPDATE
          SET definition = $3, status = $4, tool_count = $5, last_error = $6, latency_ms = $7, tested_at = $8,
              tools = CASE WHEN $4 = 'ok' THEN $9::jsonb WHEN t.definition = $3 THEN t.tools END,
              listed_at = CASE WHEN $4 = 'ok' THEN $8::timestamptz WHEN t.definition = $3 THEN t.listed_at END`,
      [tenant, name, definition, ...testValues(outcome)],
    );
  }
}

/** A test outcome's column values, in the order both test tables take them: status, tool_count, last_error, latency_ms, tested_at, tools (JSON). */
function testValues(outcome: TestOutcome): unknown[] {
  return [
    outcome.ok ? 'ok' : 'error',
    outcome.toolCount,
    outcome.error ?? null,
    outcome.latencyMs,
    outcome.at,
    JSON.stringify(outcome.tools),
  ];
}
