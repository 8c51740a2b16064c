#!/usr/bin/env node
// Resident memory of one mcp-front replica holding N idle 2025-era sessions
// (default 1000): a nats-server of its own, the front as its own process
// (`node services/mcp-front/dist/main.js`, with the V8 flags `punk cluster` gives its services), N `initialize` handshakes over
// HTTP (16 at a time), then RSS after the sessions have been idle. Prints
// figures only; `npm run bench` runs it too (idleSessions).
//   npm run build && node bench/front-sessions.mjs [sessions]
import { join } from 'node:path';
import { benchEnv, freePort, root, rssKiB, sleep, spawnOwned, startNats, stopOwned } from './common.mjs';
import { Session } from './mcp-http.mjs';

/**
 * Opens `sessions` idle 2025-era sessions (initialize and notifications/initialized, then the socket closed) on a
 * fresh mcp-front replica; resolves with its RSS before and after (KiB, after 2 s and 5 s of idling), the
 * per-session difference (KiB) and the handshakes' wall time (ms).
 */
export async function idleSessions(sessions, concurrency = 16) {
  const nats = await startNats();
  const port = await freePort();
  const { NODE_FLAGS } = await import(join(root, 'services/cli/dist/node-flags.js'));
  const front = spawnOwned(process.execPath, [...NODE_FLAGS, join(root, 'services/mcp-front/dist/main.js')], {
    env: { ...process.env, ...benchEnv, PUNK_NATS_URL: nats.url, PUNK_PORT: String(port) },
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    for (let i = 0; ; i++) {
      const status = await fetch(`${base}/readyz`).then(
        (r) => r.status,
        () => 0,
      );
      if (status === 200) break;
      if (i === 600) throw new Error(`mcp-front was not ready within 60 s:\n${front.output}`);
      await sleep(100);
    }
    await sleep(2000);
    const beforeKiB = await rssKiB(front.pid);
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(concurrency, sessions) }, async () => {
        while (next < sessions) {
          next++;
          const session = await new Session(`${base}/mcp`, '2025-11-25').open();
          if (!session.sessionId) throw new Error('initialize answered without a session id');
          session.agent.destroy();
        }
      }),
    );
    const elapsedMs = performance.now() - started;
    await sleep(5000);
    const afterKiB = await rssKiB(front.pid);
    return { sessions, beforeKiB, afterKiB, perSessionKiB: (afterKiB - beforeKiB) / sessions, elapsedMs };
  } finally {
    await stopOwned(front);
    await nats.stop();
  }
}

if (import.meta.main) {
  const r = await idleSessions(Number(process.argv[2] ?? 1000));
  console.log(`${r.sessions} idle 2025-era sessions on one mcp-front replica (state in NATS KV):`);
  console.log(
    `  RSS before ${(r.beforeKiB / 1024).toFixed(1)} MiB, after ${(r.afterKiB / 1024).toFixed(1)} MiB (+${((r.afterKiB - r.beforeKiB) / 1024).toFixed(1)} MiB, ${r.perSessionKiB.toFixed(1)} KiB per session)`,
  );
  console.log(`  ${r.sessions} initialize handshakes in ${r.elapsedMs.toFixed(0)} ms, 16 at a time`);
}
