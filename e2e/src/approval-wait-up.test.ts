/**
 * An approval wait longer than the call's deadline, on the real `punk up`: a rule waits 5 minutes for a decision,
 * the front's deadline of the call is 10 s (`PUNK_CALL_TIMEOUT_MS`). In both protocol eras the call ends before that
 * deadline with the approval's refusal, naming the approval, the deadline and the fix, not with the front's timeout;
 * the approval stays pending, and once approved the same call runs. The same on `punk cluster`.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connectClient, textOf, type Era } from './clients.js';
import { scratchDatabase } from './distributed.js';
import { manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';
import { startOwnNats } from './nats-server.js';

const CALL_TIMEOUT_MS = 10_000;
let dir: string;
let punk: RunningPunk;

/** The tally fixture and a policy whose rule waits 5 minutes for an approval of `tally__charge`. */
const manifests = (dir: string): Record<string, string> => ({
  'tally.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: tally }
spec:
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(join(repoRoot, 'e2e/fixtures/tally.mjs'))}]
  env: [{ name: TALLY_FILE, value: ${JSON.stringify(join(dir, 'tally.log'))} }]
`,
  'policy.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpPolicy
metadata: { name: charges }
spec:
  rules:
    - name: charges-wait
      servers: [tally]
      tools: [charge]
      decision: approval_required
      approval: { wait: 5m }
`,
});

before(async () => {
  dir = await manifestDir('approval-wait-up', {});
  for (const [name, text] of Object.entries(manifests(dir))) await writeFile(join(dir, name), text);
  punk = await startPunk({ manifestDir: dir, env: { PUNK_CALL_TIMEOUT_MS: String(CALL_TIMEOUT_MS) } });
});

after(async () => {
  await punk?.stop();
  await removeDir(dir);
});

/** Calls `tally__charge` from a client of `era`: refused before the deadline with the cut wait named; runs once approved. */
async function refusedBeforeDeadline(baseUrl: string, era: Era): Promise<void> {
  const client = await connectClient(`${baseUrl}/mcp`, era);
  try {
    const call = () => client.callTool({ name: 'tally__charge', arguments: { ms: 0 } }, { timeout: 60_000 });
    const started = Date.now();
    const refused = await call();
    const took = Date.now() - started;
    assert.equal(refused.isError, true, textOf(refused));
    assert.ok(took < CALL_TIMEOUT_MS, `answered within the deadline (${String(took)} ms)`);
    assert.match(textOf(refused), /requires an approval \(policy rule charges\/charges-wait\): approval [0-9a-f-]{36} is pending/);
    assert.match(
      textOf(refused),
      /It waited [\d.]+ s of its rule's approval\.wait of 300 s: the call's deadline is 10 s \(PUNK_CALL_TIMEOUT_MS, the server sets no spec\.timeout\), and the wait ends before it\. To wait longer, raise that deadline above the wait, or shorten the rule's approval\.wait/,
    );
    const id = /approval ([0-9a-f-]{36}) is pending/.exec(textOf(refused))![1]!;
    const approved = await fetch(`${baseUrl}/api/v1/approvals/${id}/approve`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ reason: 'a test charge' }),
    });
    assert.equal(approved.status, 200, await approved.clone().text());
    const ran = await call();
    assert.notEqual(ran.isError, true, textOf(ran));
  } finally {
    await client.close();
  }
}

for (const era of ['2025-11-25', '2026-07-28'] as Era[]) {
  test(`${era}: a wait past the call's deadline ends before it with the approval's refusal`, { timeout: 120_000 }, () =>
    refusedBeforeDeadline(punk.baseUrl, era),
  );
}

describe('punk cluster (NATS, Postgres, the services as processes)', () => {
  test('the wait ends before the deadline in both eras', { timeout: 300_000 }, async () => {
    const nats = await startOwnNats();
    const db = await scratchDatabase();
    const clusterDir = await manifestDir('approval-wait-cluster', {});
    for (const [name, text] of Object.entries(manifests(clusterDir))) await writeFile(join(clusterDir, name), text);
    const cluster = await startPunk({
      manifestDir: clusterDir,
      command: 'cluster',
      env: { PUNK_NATS_URL: nats.url, PUNK_DATABASE_URL: db.url, PUNK_CALL_TIMEOUT_MS: String(CALL_TIMEOUT_MS) },
      timeoutMs: 180_000,
    });
    try {
      for (const era of ['2025-11-25', '2026-07-28'] as Era[]) await refusedBeforeDeadline(cluster.baseUrl, era);
    } finally {
      await cluster.stop();
      await nats.stop();
      await db.drop();
      await removeDir(clusterDir);
    }
  });
});
