/**
 * Tampering with one stored ledger event makes verify name that event, on
 * Postgres and on the embedded PGlite database (which also survives a restart).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { connectClient } from './clients.js';
import { exampleManifests, removeDir, startPunk, verifyLedger } from './harness.js';

const adminUrl = process.env.PUNK_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

interface Run {
  runId: string;
  types: string[];
}
interface RunDetail {
  events: Array<{ id: string; type: string }>;
}

async function echoOnce(baseUrl: string, message: string): Promise<void> {
  const client = await connectClient(`${baseUrl}/mcp`, '2025-11-25');
  try {
    await client.callTool({ name: 'everything__echo', arguments: { message } });
  } finally {
    await client.close();
  }
}

/** The id of a stored tool.called event; waits for the ledger's writer, which runs just behind the stream ack. */
async function calledEventId(baseUrl: string): Promise<string> {
  let run: Run | undefined;
  for (let attempt = 0; attempt < 50 && !run; attempt++) {
    if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, 100));
    const { runs } = (await (await fetch(`${baseUrl}/api/v1/runs`)).json()) as { runs: Run[] };
    run = runs.find((r) => r.types.includes('tool.called'));
  }
  assert.ok(run, 'a call is on the ledger');
  const detail = (await (await fetch(`${baseUrl}/api/v1/runs/${run.runId}`)).json()) as RunDetail;
  return detail.events.find((e) => e.type === 'tool.called')!.id;
}

const FORGE = `update ledger.events set data = jsonb_set(data, '{arguments}', '{"message":"forged"}'::jsonb) where id = $1`;

describe('ledger tampering', () => {
  test('on Postgres: an edited row is named by verify', async () => {
    const database = `punk_e2e_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`create database ${database}`);
    const url = new URL(adminUrl);
    url.pathname = `/${database}`;
    const dir = await exampleManifests();
    const punk = await startPunk({ manifestDir: dir, env: { PUNK_DATABASE_URL: url.toString() } });
    try {
      await echoOnce(punk.baseUrl, 'one');
      await echoOnce(punk.baseUrl, 'two');
      const before = await verifyLedger(punk.baseUrl);
      assert.equal(before.ok, true, JSON.stringify(before));
      const id = await calledEventId(punk.baseUrl);
      const db = new pg.Client({ connectionString: url.toString() });
      await db.connect();
      const { rowCount } = await db.query(FORGE, [id]);
      await db.end();
      assert.equal(rowCount, 1);
      const after = await verifyLedger(punk.baseUrl);
      assert.equal(after.ok, false);
      assert.equal(after.firstBroken?.id, id);
    } finally {
      assert.equal(await punk.stop(), 0);
      await removeDir(dir);
      await admin.query(`drop database if exists ${database} with (force)`);
      await admin.end();
    }
  });

  test('on PGlite: the ledger survives a restart, and an edited row is named by verify', async () => {
    const dir = await exampleManifests();
    const data = join(dir, 'data');
    try {
      let punk = await startPunk({ manifestDir: dir, args: ['--data', data] });
      let id: string;
      try {
        await echoOnce(punk.baseUrl, 'persist me');
        id = await calledEventId(punk.baseUrl);
      } finally {
        assert.equal(await punk.stop(), 0);
      }
      const db = new PGlite(data);
      const result = await db.query(FORGE, [id]);
      assert.equal(result.affectedRows, 1);
      await db.close();
      punk = await startPunk({ manifestDir: dir, args: ['--data', data] });
      try {
        const after = await verifyLedger(punk.baseUrl);
        assert.equal(after.ok, false);
        assert.equal(after.firstBroken?.id, id);
      } finally {
        assert.equal(await punk.stop(), 0);
      }
    } finally {
      await removeDir(dir);
    }
  });
});
