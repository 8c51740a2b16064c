/**
 * Prompt ingest on `punk up` with authentication on: `hooks/ingest-prompt.sh`, fed a Claude Code UserPromptSubmit
 * hook input on stdin, makes a completed observed run under the key's subject (provider claude-code, model external,
 * route live, cost 0) whose events are chained, found with the runs filters; with a wrong key, and with Punk down,
 * it prints nothing, exits 0 and returns quickly, a 1 MiB prompt too. The API refuses a bad body naming the field, and
 * no token. A prompt over 100,000 characters is recorded as its beginning, marked truncated (the run's outcome
 * `truncated`); a body over 4 MiB is answered 413 and leaves a `prompt.refused` run naming its size. With redaction
 * on, an email and a card number in a prompt never reach the ledger's stored rows (Postgres).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { scratchDatabase } from './distributed.js';
import { eventually, freePort, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk, createApiKey } from './harness.js';

const HOOK = join(repoRoot, 'hooks/ingest-prompt.sh');
const BOOTSTRAP = randomBytes(24).toString('base64url');

/** Runs the hook with `input` on stdin; resolves with its exit code, output and how long it took (ms). */
async function runHook(input: string, env: Record<string, string>): Promise<{ code: number | null; output: string; ms: number }> {
  const started = Date.now();
  const child = spawn('sh', [HOOK], { env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  child.stdin.end(input);
  const code = await new Promise<number | null>((done) => child.once('exit', (c) => done(c)));
  return { code, output, ms: Date.now() - started };
}

const hookInput = (prompt: string) =>
  JSON.stringify({
    session_id: 'session-7',
    transcript_path: '/home/me/.claude/projects/x/session-7.jsonl',
    cwd: '/home/me/project',
    permission_mode: 'default',
    hook_event_name: 'UserPromptSubmit',
    prompt,
  });

describe('prompt ingest', () => {
  let dir: string;
  let punk: RunningPunk;
  let key: string;
  let keyId: string;
  let db: { url: string; drop(): Promise<void> };
  const admin = { authorization: `Bearer ${BOOTSTRAP}` };

  before(async () => {
    dir = await manifestDir('prompt-ingest', {});
    db = await scratchDatabase();
    punk = await startPunk({
      manifestDir: dir,
      args: [],
      env: {
        PUNK_AUTH_MODE: 'on',
        PUNK_PUBLIC_URL: 'https://punk.example.test',
        PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: BOOTSTRAP,
        PUNK_DATABASE_URL: db.url,
      },
    });
    ({ key, id: keyId } = await createApiKey(punk.baseUrl, BOOTSTRAP, { name: 'a laptop' }));
  });

  after(async () => {
    await punk?.stop();
    await removeDir(dir);
    await db?.drop();
  });

  test('the hook records a completed, chained observed run under the key', { timeout: 120_000 }, async () => {
    const prompt = `fix the "flaky" test\nplease ${randomBytes(4).toString('hex')}`;
    const ran = await runHook(hookInput(prompt), { PUNK_GATEWAY_URL: punk.baseUrl, PUNK_MCP_API_KEY: key });
    assert.deepEqual([ran.code, ran.output], [0, '']);

    const runs = await eventually(async () => {
      const response = await fetch(`${punk.baseUrl}/api/v1/runs?type=prompt.observed&subject=api-key:${keyId}`, { headers: admin });
      const { runs: found } = (await response.json()) as {
        runs: Array<{ runId: string; outcome?: string; subject?: string; types: string[] }>;
      };
      return found.some((r) => r.types.includes('observed.completed')) ? found : undefined;
    }, 30_000);
    assert.ok(runs, 'the observed run is listed');
    assert.equal(runs.length, 1);
    assert.equal(runs[0]!.outcome, 'ok');
    const byTrigger = (await (await fetch(`${punk.baseUrl}/api/v1/runs?trigger=hook`, { headers: admin })).json()) as {
      runs: Array<{ runId: string; trigger?: string }>;
    };
    assert.deepEqual(
      byTrigger.runs.map((r) => [r.runId, r.trigger]),
      [[runs[0]!.runId, 'hook']],
    );
    const { events } = (await (await fetch(`${punk.baseUrl}/api/v1/runs/${runs[0]!.runId}`, { headers: admin })).json()) as {
      events: Array<{
        type: string;
        sessionId?: string;
        occurredAt: string;
        data: Record<string, unknown>;
        hash: string;
        prevHash: string;
      }>;
    };
    assert.deepEqual(
      events.map((e) => e.type),
      ['prompt.observed', 'observed.completed'],
    );
    const [observed, completed] = events;
    assert.equal(observed!.data['prompt'], prompt);
    assert.equal(observed!.data['cwd'], '/home/me/project');
    assert.equal(observed!.sessionId, 'session-7');
    assert.deepEqual([observed!.data['provider'], observed!.data['model'], observed!.data['route']], ['claude-code', 'external', 'live']);
    assert.equal(completed!.data['costUsd'], 0);
    assert.equal(completed!.prevHash, observed!.hash, 'the events are chained');
    assert.ok(Math.abs(Date.parse(observed!.occurredAt) - Date.now()) < 10 * 60_000, 'the time the hook gave');
    const verified = (await (await fetch(`${punk.baseUrl}/api/v1/ledger/verify`, { headers: admin })).json()) as { ok: boolean };
    assert.equal(verified.ok, true);
  });

  test('with a wrong key the hook prints nothing and exits 0; the API refuses bad input', { timeout: 120_000 }, async () => {
    const wrong = await runHook(hookInput('never recorded'), { PUNK_GATEWAY_URL: punk.baseUrl, PUNK_MCP_API_KEY: 'pk_wrong' });
    assert.deepEqual([wrong.code, wrong.output], [0, '']);
    const garbage = await runHook('not json at all', { PUNK_GATEWAY_URL: punk.baseUrl, PUNK_MCP_API_KEY: key });
    assert.deepEqual([garbage.code, garbage.output], [0, '']);

    const post = (body: string, headers: Record<string, string>) =>
      fetch(`${punk.baseUrl}/api/v1/ingest/prompt`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    assert.equal((await post(hookInput('x'), {})).status, 401);
    assert.equal((await post(hookInput('x'), { authorization: 'Bearer pk_wrong' })).status, 401);
    const missing = await post(JSON.stringify({ session_id: 's' }), { authorization: `Bearer ${key}` });
    assert.equal(missing.status, 400);
    assert.match(((await missing.json()) as { error: { message: string } }).error.message, /^prompt: /);
    const badTime = await post(JSON.stringify({ prompt: 'x', time: 'yesterday' }), { authorization: `Bearer ${key}` });
    assert.equal(badTime.status, 400);
    assert.match(((await badTime.json()) as { error: { message: string } }).error.message, /^time: /);
    // A run dated ahead would stay first in every listing, and nothing on the ledger can be removed (fresh-user trial).
    for (const time of ['2099-01-01T00:00:00Z', '1999-01-01T00:00:00Z']) {
      const outOfBounds = await post(JSON.stringify({ prompt: 'x', time }), { authorization: `Bearer ${key}` });
      assert.equal(outOfBounds.status, 400, time);
      assert.match(
        ((await outOfBounds.json()) as { error: { message: string } }).error.message,
        new RegExp(`^time: ${time} is not within the last 24 hours or at most 5 minutes ahead of Punk's clock .*; leave it out`),
      );
    }
    const { runs } = (await (await fetch(`${punk.baseUrl}/api/v1/runs?type=prompt.observed`, { headers: admin })).json()) as {
      runs: unknown[];
    };
    assert.equal(runs.length, 1, 'only the first test recorded a prompt');
  });

  test('with Punk down the hook prints nothing, exits 0 and returns at once', { timeout: 60_000 }, async () => {
    // Nothing listens on a fresh free port; a generous bound for a loaded machine (the hook's own limit is 1 s).
    const down = await runHook(hookInput('lost'), {
      PUNK_GATEWAY_URL: `http://127.0.0.1:${String(await freePort())}`,
      PUNK_MCP_API_KEY: key,
    });
    assert.deepEqual([down.code, down.output], [0, '']);
    assert.ok(down.ms < 3_000, `${String(down.ms)} ms`);
    // A deployment that accepts the connection and never answers: curl's --max-time ends it.
    const silent = createServer(() => undefined).listen(0, '127.0.0.1');
    await new Promise((done) => silent.once('listening', done));
    try {
      const port = (silent.address() as AddressInfo).port;
      for (const prompt of ['lost', 'l'.repeat(1024 * 1024)]) {
        const hung = await runHook(hookInput(prompt), { PUNK_GATEWAY_URL: `http://127.0.0.1:${String(port)}`, PUNK_MCP_API_KEY: key });
        assert.deepEqual([hung.code, hung.output], [0, '']);
        assert.ok(hung.ms < 3_000, `${String(prompt.length)} characters: ${String(hung.ms)} ms`);
      }
    } finally {
      silent.close();
    }
  });

  test('an oversized prompt is recorded truncated, and one too large to read leaves a refused run', { timeout: 120_000 }, async () => {
    type Event = { type: string; data: Record<string, unknown> };
    type Summary = { runId: string; outcome?: string; types: string[] };
    const runsOf = async (query: string) =>
      ((await (await fetch(`${punk.baseUrl}/api/v1/runs?${query}`, { headers: admin })).json()) as { runs: Summary[] }).runs;
    const eventsOf = async (runId: string) =>
      ((await (await fetch(`${punk.baseUrl}/api/v1/runs/${runId}`, { headers: admin })).json()) as { events: Event[] }).events;

    // 1 MiB typed in one prompt: the hook still returns at once, and the run holds the prompt's beginning, marked.
    const marker = randomBytes(4).toString('hex');
    const prompt = `${marker} ${'x'.repeat(1024 * 1024 - marker.length - 1)}`;
    const ran = await runHook(hookInput(prompt), { PUNK_GATEWAY_URL: punk.baseUrl, PUNK_MCP_API_KEY: key });
    assert.deepEqual([ran.code, ran.output], [0, '']);
    assert.ok(ran.ms < 3_000, `${String(ran.ms)} ms`);
    const truncated = await eventually(async () => (await runsOf('outcome=truncated&type=observed.completed'))[0], 30_000);
    assert.ok(truncated, 'a truncated run is listed');
    assert.deepEqual(truncated.types, ['observed.completed', 'prompt.observed']);
    const [observed, completed] = await eventsOf(truncated.runId);
    assert.equal(observed!.type, 'prompt.observed');
    assert.equal(observed!.data['prompt'], prompt.slice(0, 100_000), 'the first 100,000 characters');
    assert.deepEqual([observed!.data['truncated'], observed!.data['promptChars']], [true, 1024 * 1024]);
    assert.equal(completed!.data['outcome'], 'truncated');
    const answer = await fetch(`${punk.baseUrl}/api/v1/ingest/prompt`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: hookInput('y'.repeat(100_001)),
    });
    assert.equal(answer.status, 201);
    assert.equal(((await answer.json()) as { truncated?: boolean }).truncated, true, 'the answer says so too');

    // A body past what the API reads (4 MiB): the hook still exits 0 at once, and a refused run names the size.
    const huge = hookInput('z'.repeat(5 * 1024 * 1024));
    const refusedHook = await runHook(huge, { PUNK_GATEWAY_URL: punk.baseUrl, PUNK_MCP_API_KEY: key });
    assert.deepEqual([refusedHook.code, refusedHook.output], [0, '']);
    assert.ok(refusedHook.ms < 3_000, `${String(refusedHook.ms)} ms`);
    const refused = await eventually(async () => (await runsOf(`type=prompt.refused&subject=api-key:${keyId}`))[0], 30_000);
    assert.ok(refused, 'a refused run is listed');
    assert.equal(refused.outcome, 'refused');
    const [notRecorded] = await eventsOf(refused.runId);
    assert.deepEqual(notRecorded!.data, {
      reason: 'the body is larger than 4 MiB, so its prompt is not recorded',
      bodyBytes: Buffer.byteLength(huge) + '{"time":"2026-01-01T00:00:00Z",'.length - 1,
      maxBodyBytes: 4 * 1024 * 1024,
      provider: 'claude-code',
      model: 'external',
      route: 'live',
      trigger: 'hook',
    });
    const tooLarge = await fetch(`${punk.baseUrl}/api/v1/ingest/prompt`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: huge,
    });
    assert.equal(tooLarge.status, 413);
    assert.deepEqual(await tooLarge.json(), {
      error: { code: 'PayloadTooLarge', message: 'the body is larger than 4 MiB, so its prompt is not recorded' },
    });
    assert.equal((await runsOf('type=prompt.refused')).length, 2, 'each refused post has its run');
  });

  test('with redaction on, the email and the card number of a prompt never reach the ledger', { timeout: 120_000 }, async () => {
    const put = await fetch(`${punk.baseUrl}/api/v1/settings`, {
      method: 'PUT',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ key: 'redaction', value: true }),
    });
    assert.equal(put.status, 200, await put.clone().text());
    const marker = randomBytes(4).toString('hex');
    const prompt = `refund ${marker}: mail ada.lovelace@example.com, card 4111 1111 1111 1111 exp 12/29`;
    const ran = await runHook(hookInput(prompt), { PUNK_GATEWAY_URL: punk.baseUrl, PUNK_MCP_API_KEY: key });
    assert.deepEqual([ran.code, ran.output], [0, '']);

    const rows = new pg.Client({ connectionString: db.url });
    await rows.connect();
    try {
      const stored = await eventually(async () => {
        const { rows: found } = await rows.query<{ prompt: string }>(
          "SELECT data->>'prompt' AS prompt FROM ledger.events WHERE type = 'prompt.observed' AND data->>'prompt' LIKE $1",
          [`refund ${marker}%`],
        );
        return found[0]?.prompt;
      }, 30_000);
      assert.equal(stored, `refund ${marker}: mail [email], card [card] exp 12/29`);
      const { rows: all } = await rows.query<{ text: string }>('SELECT data::text AS text FROM ledger.events');
      const everything = all.map((r) => r.text).join('\n');
      for (const raw of ['ada.lovelace@example.com', '4111 1111 1111 1111', 'lovelace', '1111 1111'])
        assert.ok(!everything.includes(raw), `${raw} is in a stored row`);
    } finally {
      await rows.end();
    }
    // The run the API shows is the masked one, and the chain covers it.
    const { runs } = (await (await fetch(`${punk.baseUrl}/api/v1/runs?type=prompt.observed&limit=500`, { headers: admin })).json()) as {
      runs: Array<{ runId: string }>;
    };
    const prompts = await Promise.all(
      runs.map(async (r) => {
        const { events } = (await (await fetch(`${punk.baseUrl}/api/v1/runs/${r.runId}`, { headers: admin })).json()) as {
          events: Array<{ data: { prompt?: string } }>;
        };
        return events[0]!.data.prompt ?? '';
      }),
    );
    assert.ok(prompts.includes(`refund ${marker}: mail [email], card [card] exp 12/29`), prompts.join('\n'));
    const verified = (await (await fetch(`${punk.baseUrl}/api/v1/ledger/verify`, { headers: admin })).json()) as { ok: boolean };
    assert.equal(verified.ok, true);
  });
});
