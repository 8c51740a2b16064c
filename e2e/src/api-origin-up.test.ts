/**
 * Cross-site request forgery against the REST API of `punk up` with authentication off (what `npm start` runs): a
 * page of another origin may not change anything through `/api/v1` (a POST without a body is a CORS "simple"
 * request, which the browser sends without asking), while the endpoint's own origin, `PUNK_ALLOWED_ORIGINS` and
 * clients that send no `Origin` (curl, the prompt hook) may. Found by a fresh-user trial: a page on another port
 * accepted a changed tool definition and approved a call.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { manifestDir, removeDir, startPunk, type RunningPunk } from './harness.js';

const workflow = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: constant }
spec:
  start: done
  nodes:
    - { id: done, kind: output, config: { value: { kind: literal, value: 2 } } }
`;

const ALLOWED = 'https://console.example.com';
let dir: string;
let punk: RunningPunk;

before(async () => {
  dir = await manifestDir('api-origin-up', { 'workflow.yaml': workflow });
  punk = await startPunk({ manifestDir: dir, env: { PUNK_ALLOWED_ORIGINS: ALLOWED } });
});

after(async () => {
  await punk?.stop();
  await removeDir(dir);
});

/** Starts workflow `constant` with `headers`: the status and the JSON answer. */
async function startRun(headers: Record<string, string>): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${punk.baseUrl}/api/v1/workflows/constant/runs`, { method: 'POST', headers });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** How many runs the ledger holds (this deployment has no run but those of workflow `constant`). */
async function runsOfWorkflow(): Promise<number> {
  const res = await fetch(`${punk.baseUrl}/api/v1/runs?limit=100`);
  assert.equal(res.status, 200);
  const { runs } = (await res.json()) as { runs: unknown[] };
  return runs.length;
}

test('a page of another origin may not POST to /api/v1: 403 ForbiddenOrigin, and nothing runs', async () => {
  const before = await runsOfWorkflow();
  for (const origin of ['http://localhost:4198', 'null', 'http://evil.example']) {
    const refused = await startRun({ origin });
    assert.equal(refused.status, 403, `${origin}: ${JSON.stringify(refused.body)}`);
    const error = refused.body['error'] as { code: string; message: string };
    assert.equal(error.code, 'ForbiddenOrigin');
    assert.match(error.message, /may not POST \/api\/v1\/workflows\/constant\/runs: a page of another origin may only read/);
    assert.match(error.message, /PUNK_ALLOWED_ORIGINS/);
  }
  const approve = await fetch(`${punk.baseUrl}/api/v1/approvals/00000000-0000-4000-8000-000000000000/approve`, {
    method: 'POST',
    headers: { origin: 'http://evil.example' },
  });
  assert.equal(approve.status, 403, 'an approval is not decided from another origin');
  assert.equal(await runsOfWorkflow(), before, 'no run was started by the refused requests');
});

test("the endpoint's own origin, PUNK_ALLOWED_ORIGINS and a client without Origin may POST; reads from elsewhere are not shared", async () => {
  for (const headers of [{ origin: punk.baseUrl }, { origin: ALLOWED }, {}] as Record<string, string>[]) {
    const started = await startRun(headers);
    assert.equal(started.status, 201, `${JSON.stringify(headers)}: ${JSON.stringify(started.body)}`);
    assert.equal(started.body['result'], 2);
  }
  const read = await fetch(`${punk.baseUrl}/api/v1/workflows`, { headers: { origin: 'http://evil.example' } });
  assert.equal(read.status, 200, 'a read is answered');
  assert.equal(read.headers.get('access-control-allow-origin'), null, 'but not shared with another origin');
});
