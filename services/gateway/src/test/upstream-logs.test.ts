/**
 * Log messages of a shared 2025-era connection (stdio): they reach the client
 * of the one call in flight, at or above the log level the call asked for
 * (`_meta['io.modelcontextprotocol/logLevel']`), and every level when it
 * asked for none (MCP 2025-11-25 server/utilities/logging).
 */
import { strict as assert } from 'node:assert';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createLogger } from '@punk/lib';
import type { ClientLink } from '../client-channel.js';
import { Upstream } from '../upstream.js';
import { fixture, manifest } from './harness.js';

const log = createLogger('upstream-logs-test', 'silent');
let workDir: string;
let upstream: Upstream;

before(async () => {
  workDir = await mkdtemp(join(tmpdir(), 'punk-upstream-logs-'));
  upstream = new Upstream({
    server: manifest('t', 'logger', { image: 'local/logger', command: [process.execPath, fixture('logger.mjs')] }),
    log,
    workDir,
    startTimeoutMs: 20_000,
    callTimeoutMs: 10_000,
    onState: () => undefined,
    onListChanged: () => undefined,
    onResourceUpdated: () => undefined,
  });
  upstream.start();
  await upstream.firstStart;
  assert.equal(upstream.state, 'ready', upstream.error);
});

after(async () => {
  await upstream.stop();
  await rm(workDir, { recursive: true, force: true });
});

/** A client link that records what it is sent. */
function recordingLink(): { link: ClientLink; levels: string[] } {
  const levels: string[] = [];
  const link: ClientLink = {
    sessionId: 'session-1',
    supports: () => false,
    notify: (method, params) => void (method === 'notifications/message' && levels.push(String(params['level']))),
    request: async () => ({}),
  };
  return { link, levels };
}

describe('log messages of a shared connection', () => {
  it('reach the call in flight at or above its log level', async () => {
    const { link, levels } = recordingLink();
    const outcome = await upstream.callTool(
      'log',
      { levels: ['debug', 'info', 'warning', 'error'] },
      { 'io.modelcontextprotocol/logLevel': 'warning' },
      link,
    );
    assert.equal(outcome.ok, true);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(levels, ['warning', 'error']);
  });

  it('reach it at every level when the call asked for none', async () => {
    const { link, levels } = recordingLink();
    const outcome = await upstream.callTool('log', { levels: ['debug', 'error'] }, undefined, link);
    assert.equal(outcome.ok, true);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(levels, ['debug', 'error']);
  });
});
