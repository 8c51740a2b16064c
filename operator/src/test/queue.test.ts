// The operator's work queue with real reconcile functions: keys deduplicated, never reconciled twice at once,
// failures retried with growing delays, at most `workers` at once, and a stuck reconcile cut at its deadline
// without holding up the other keys.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ReconcileTimeout, WorkQueue } from '../queue.js';

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function drained(queue: WorkQueue): Promise<void> {
  while (queue.length > 0) await settle(5);
}

describe('WorkQueue', () => {
  it('reconciles a key added many times while queued once', async () => {
    const runs: string[] = [];
    const queue = new WorkQueue(async (key) => void runs.push(key), { workers: 2, timeoutMs: 1000 });
    for (let i = 0; i < 10; i++) queue.add('McpServer/ns/a');
    queue.add('McpServer/ns/b');
    queue.start();
    await drained(queue);
    await queue.stop();
    assert.deepEqual(runs.sort(), ['McpServer/ns/a', 'McpServer/ns/b']);
  });

  it('runs a key added during its reconcile once more afterwards, never twice at once', async () => {
    let concurrent = 0;
    let most = 0;
    let runs = 0;
    const queue: WorkQueue = new WorkQueue(
      async () => {
        concurrent++;
        most = Math.max(most, concurrent);
        runs++;
        if (runs === 1) {
          queue.add('k');
          queue.add('k');
        }
        await settle(20);
        concurrent--;
      },
      { workers: 4, timeoutMs: 1000 },
    );
    queue.add('k');
    queue.start();
    await settle(10);
    await drained(queue);
    await queue.stop();
    assert.equal(runs, 2);
    assert.equal(most, 1);
  });

  it('retries a failing key with doubling delays until it succeeds, reporting each failure', async () => {
    const attempts: number[] = [];
    const delays: number[] = [];
    const queue = new WorkQueue(
      async () => {
        attempts.push(Date.now());
        if (attempts.length < 4) throw new Error('API server unavailable');
      },
      { workers: 1, timeoutMs: 1000, baseDelayMs: 10, maxDelayMs: 25, onError: (_key, _error, retryInMs) => delays.push(retryInMs) },
    );
    queue.add('k');
    queue.start();
    while (attempts.length < 4) await settle(5);
    await queue.stop();
    assert.deepEqual(delays, [10, 20, 25], 'doubling, capped at maxDelayMs');
  });

  it('keeps at most `workers` reconciles running at once', async () => {
    let concurrent = 0;
    let most = 0;
    const queue = new WorkQueue(
      async () => {
        concurrent++;
        most = Math.max(most, concurrent);
        await settle(10);
        concurrent--;
      },
      { workers: 3, timeoutMs: 1000 },
    );
    for (let i = 0; i < 20; i++) queue.add(`k${i}`);
    queue.start();
    await drained(queue);
    await queue.stop();
    assert.equal(most, 3);
  });

  it('cuts a stuck reconcile at its deadline (aborting its signal) and serves the other keys meanwhile', async () => {
    const done: string[] = [];
    const errors: unknown[] = [];
    let aborted: unknown;
    const queue = new WorkQueue(
      async (key, signal) => {
        if (key === 'stuck') {
          signal.addEventListener('abort', () => (aborted = signal.reason));
          return new Promise(() => undefined);
        }
        done.push(key);
      },
      { workers: 1, timeoutMs: 50, baseDelayMs: 60_000, onError: (_key, error) => errors.push(error) },
    );
    queue.add('stuck');
    queue.add('other');
    queue.start();
    while (done.length === 0) await settle(5);
    queue.clear();
    await queue.stop();
    assert.deepEqual(done, ['other']);
    assert.ok(errors[0] instanceof ReconcileTimeout);
    assert.ok(aborted instanceof ReconcileTimeout);
  });
});
