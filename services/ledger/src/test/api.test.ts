import test from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { MemoryBus, appendLedgerEvent } from '@punk/lib';
import { startLedger, type RunSummary } from '../index.js';
import { backends, event, log, toolRun, uniqueTenant, until } from './helpers.js';

/** The ledger on `backend`'s database with its API served on loopback: `get(path)` answers status and JSON body. */
async function serveLedger(backend: (typeof backends)[number]) {
  const { db, close } = await backend.open();
  const bus = new MemoryBus(log);
  const ledger = await startLedger({ bus, db, log });
  const app = express();
  app.use('/api/v1', ledger.router);
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`;
  const get = async (path: string) => {
    const res = await fetch(base + path);
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  const stop = async () => {
    await ledger.stop();
    await new Promise((resolve) => server.close(resolve));
    await bus.close();
    await close();
  };
  return { bus, ledger, get, stop };
}

for (const backend of backends) {
  test(`[${backend.name}] an operator browses runs and verifies the chain over HTTP`, async () => {
    const { bus, ledger, get, stop } = await serveLedger(backend);
    try {
      const tenant = uniqueTenant();
      const first = toolRun(tenant, 'run-first', 'read_file');
      const second = toolRun(tenant, 'run-second', 'write_file');
      for (const e of [...first, ...second]) await appendLedgerEvent(bus, e);
      await until('four events', async () => ((await ledger.store.verify(tenant)).events === 4 ? true : undefined));

      const list = await get(`/runs?tenant=${tenant}`);
      assert.equal(list.status, 200);
      assert.deepEqual(
        list.body.runs.map((r: RunSummary) => [r.runId, r.tool, r.outcome, r.eventCount]),
        [
          ['run-second', 'write_file', 'ok', 2],
          ['run-first', 'read_file', 'ok', 2],
        ],
      );
      const page = await get(`/runs?tenant=${tenant}&limit=1&before=${encodeURIComponent(list.body.runs[0].lastAt)}`);
      assert.deepEqual(
        page.body.runs.map((r: RunSummary) => r.runId),
        ['run-first'],
      );
      assert.deepEqual((await get('/runs')).body, { runs: [] }, 'tenant defaults to default, which has no runs');

      // Filters, exact and combined with AND.
      const ids = async (query: string) => {
        const res = await get(`/runs?tenant=${tenant}&${query}`);
        assert.equal(res.status, 200, `${query}: ${JSON.stringify(res.body)}`);
        return res.body.runs.map((r: RunSummary) => r.runId);
      };
      const [secondRun, firstRun] = list.body.runs as RunSummary[];
      assert.deepEqual(await ids('tool=write_file'), ['run-second']);
      assert.deepEqual(await ids('server=filesystem&subject=alice&outcome=ok&type=tool.called'), ['run-second', 'run-first']);
      assert.deepEqual(await ids('server=other'), []);
      assert.deepEqual(await ids('subject=bob'), []);
      assert.deepEqual(await ids('outcome=error'), []);
      assert.deepEqual(await ids('type=approval.consumed'), []);
      assert.deepEqual(await ids('trigger=hook'), [], 'tool calls state no trigger');
      assert.deepEqual(await ids(`since=${encodeURIComponent(secondRun!.firstAt)}`), ['run-second']);
      assert.deepEqual(await ids(`until=${encodeURIComponent(firstRun!.lastAt)}`), ['run-first']);
      assert.deepEqual(
        await ids(`since=${encodeURIComponent(firstRun!.firstAt)}&until=${encodeURIComponent(secondRun!.firstAt)}&tool=read_file`),
        ['run-first'],
      );
      for (const bad of ['since=yesterday', 'until=2026-13-45T00:00:00Z', 'server=']) {
        const res = await get(`/runs?tenant=${tenant}&${bad}`);
        assert.equal(res.status, 400, bad);
        assert.match(res.body.error.message, new RegExp(bad.split('=')[0]!));
      }

      const detail = await get(`/runs/run-first?tenant=${tenant}`);
      assert.equal(detail.status, 200);
      assert.equal(detail.body.run.runId, 'run-first');
      assert.deepEqual(
        detail.body.events.map((e: { id: string }) => e.id),
        first.map((e) => e.id),
      );
      assert.equal(detail.body.events[1].prevHash, detail.body.events[0].hash);
      assert.equal((await get('/runs/run-first')).status, 200, 'a run id of one tenant needs no tenant');

      const missing = await get('/runs/no-such-run');
      assert.equal(missing.status, 404);
      assert.equal(missing.body.error.code, 'RunNotFound');
      assert.match(missing.body.error.message, /no-such-run/);

      for (const bad of ['abc', '0', '501', '-1', '1.5']) {
        const res = await get(`/runs?limit=${bad}`);
        assert.equal(res.status, 400, `limit=${bad}`);
        assert.equal(res.body.error.code, 'InvalidParameter');
        assert.match(res.body.error.message, /limit/);
      }
      const badBefore = await get('/runs?before=yesterday');
      assert.equal(badBefore.status, 400);
      assert.match(badBefore.body.error.message, /before/);

      // A misspelt parameter is refused, naming it and the accepted ones, instead of answering for the default tenant.
      const misspelt = await get(`/runs?tennant=${tenant}&limit=1`);
      assert.equal(misspelt.status, 400);
      assert.equal(misspelt.body.error.code, 'InvalidParameter');
      assert.equal(
        misspelt.body.error.message,
        'unknown query parameter "tennant" of /api/v1/runs; accepted: tenant, limit, cursor, before, server, tool, subject, type, outcome, trigger, since, until',
      );
      const several = await get(`/runs/run-first?tenant=${tenant}&verbose=1&x=2`);
      assert.equal(several.status, 400);
      assert.match(several.body.error.message, /^unknown query parameters "verbose", "x" of .*; accepted: tenant$/);
      assert.equal((await get(`/ledger/verify?tenant=${tenant}&full=1`)).status, 400);

      const verify = await get(`/ledger/verify?tenant=${tenant}`);
      assert.equal(verify.status, 200);
      const newest = await get(`/runs/run-second?tenant=${tenant}`);
      const head = newest.body.events[1].hash;
      const { ok, events, complete, chainHead } = verify.body;
      assert.deepEqual({ ok, tenant: verify.body.tenant, events, head: verify.body.head }, { ok: true, tenant, events: 4, head });
      assert.deepEqual({ complete, chainHead }, { complete: true, chainHead: { tenantSeq: 4, hash: head } });
      // A bounded request from genesis stops early and says so; a bad bound or start is refused.
      const bounded = await get(`/ledger/verify?tenant=${tenant}&from=genesis&maxEvents=3`);
      assert.deepEqual([bounded.body.ok, bounded.body.events, bounded.body.complete], [true, 3, false]);
      const zero = await get(`/ledger/verify?tenant=${tenant}&maxEvents=0`);
      assert.equal(zero.status, 400);
      assert.equal(zero.body.error.message, 'query parameter maxEvents must be an integer from 1 to 100000, got "0"');
      assert.match((await get(`/ledger/verify?tenant=${tenant}&from=start`)).body.error.message, /from must be checkpoint or genesis/);
    } finally {
      await stop();
    }
  });
}

for (const backend of backends) {
  test(`[${backend.name}] runs whose last events share one time are each paged once by the cursor`, async () => {
    const { bus, ledger, get: getAny, stop } = await serveLedger(backend);
    const get = async (path: string) =>
      (await getAny(path)) as { status: number; body: { runs: RunSummary[]; nextCursor?: string; error?: { message: string } } };
    try {
      const tenant = uniqueTenant();
      // 23 runs: one older, 20 at one same instant, two newer, so pages of 4 cut the 20 several times.
      const at = (time: string) => (e: ReturnType<typeof event>) => ({ ...e, occurredAt: time });
      const runs = [
        at('2026-03-01T10:00:00.000Z')(event(tenant, 'run-older', 'server.registered')),
        ...Array.from({ length: 20 }, (_, i) =>
          at('2026-03-01T10:00:01.000Z')(event(tenant, `run-same-${String(i).padStart(2, '0')}`, 'server.registered')),
        ),
        at('2026-03-01T10:00:02.000Z')(event(tenant, 'run-newer-a', 'server.registered')),
        at('2026-03-01T10:00:02.000Z')(event(tenant, 'run-newer-b', 'server.registered')),
      ];
      for (const e of runs) await appendLedgerEvent(bus, e);
      await until('23 events', async () => ((await ledger.store.verify(tenant)).events === runs.length ? true : undefined));

      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await get(`/runs?tenant=${tenant}&limit=4${cursor === undefined ? '' : `&cursor=${cursor}`}`);
        assert.equal(page.status, 200, JSON.stringify(page.body));
        seen.push(...page.body.runs.map((r) => r.runId));
        cursor = page.body.nextCursor;
        pages++;
      } while (cursor !== undefined);
      const expected = [
        'run-newer-b',
        'run-newer-a',
        ...Array.from({ length: 20 }, (_, i) => `run-same-${String(19 - i).padStart(2, '0')}`),
        'run-older',
      ];
      assert.deepEqual(seen, expected, 'every run once, most recently active first, then by run id');
      assert.equal(pages, 6, 'the last page holds the last run and says there is no next');
      const whole = await get(`/runs?tenant=${tenant}&limit=23`);
      assert.equal(whole.body.nextCursor, undefined, 'a page holding every run has no next');

      // The filters apply on every page, the cursor only says where the page starts.
      const first = await get(`/runs?tenant=${tenant}&limit=2`);
      const filtered = await get(`/runs?tenant=${tenant}&limit=500&cursor=${first.body.nextCursor!}&before=2026-03-01T10:00:01.000Z`);
      assert.deepEqual(
        filtered.body.runs.map((r) => r.runId),
        ['run-older'],
      );

      for (const bad of [
        'not-a-cursor!',
        'eyJ2IjoxfQ',
        Buffer.from('{"v":2,"lastAt":"2026-03-01T10:00:01.000Z","runId":"x"}').toString('base64url'),
        '',
      ]) {
        const res = await get(`/runs?tenant=${tenant}&cursor=${encodeURIComponent(bad)}`);
        assert.equal(res.status, 400, bad);
        assert.equal(
          res.body.error?.message,
          `query parameter cursor is not a nextCursor this API returned (leave it out for the first page), got ${JSON.stringify(bad)}`,
        );
      }
    } finally {
      await stop();
    }
  });
}
