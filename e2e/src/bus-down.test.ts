/**
 * NATS restarted under a real mcp-front process (issue 14 item 9): while the bus is down, requests are answered at
 * once with 503 and `Retry-After` naming the bus, not a generic 500 or a wait for the call's deadline; a call in
 * flight when it went down is answered with an error naming the bus; once NATS is back, the same 2025-era session
 * calls again.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startService, type ServiceProcess } from './processes.js';
import { tallyWorld, type TallyWorld } from './distributed.js';

/** Far below the 60 s call deadline a request used to wait, and generous for a loaded machine. */
const BOUND_MS = 10_000;

let world: TallyWorld;
let front: ServiceProcess;
const running: ServiceProcess[] = [];

before(async () => {
  world = await tallyWorld();
  running.push(await startService('governance', world.env), await startService('gateway', world.env));
  front = await startService('mcp-front', { ...world.env, PUNK_CALL_TIMEOUT_MS: '60000' });
  running.push(front);
});

after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
  await world.setup.killServers();
  await world.stop();
});

const endpoint = () => `${front.url}/servers/tally/mcp`;

/** POSTs one JSON-RPC message of session `sessionId` (none for initialize), answered as JSON. */
async function post(body: unknown, sessionId?: string): Promise<Response> {
  return fetch(endpoint(), {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
      ...(sessionId && { 'mcp-session-id': sessionId }),
    },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(90_000),
  });
}

let id = 0;

async function waitForLine(prefix: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await world.setup.lines()).some((l) => l.startsWith(prefix))) {
    assert.ok(Date.now() < deadline, `no tally line ${prefix}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
const callCount = (sessionId: string) =>
  post({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name: 'count', arguments: { n: id } } }, sessionId);

test('while NATS is down the front answers 503 with Retry-After at once; the session calls again once it is back', async () => {
  const init = await post({
    jsonrpc: '2.0',
    id: ++id,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bus-down', version: '1' } },
  });
  assert.equal(init.status, 200);
  const sessionId = init.headers.get('mcp-session-id')!;
  await init.text();
  assert.equal((await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, sessionId)).status, 202);
  const first = await callCount(sessionId);
  assert.equal(first.status, 200);
  assert.match(await first.text(), /counted/);

  const inFlightStarted = Date.now();
  const inFlight = post(
    { jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name: 'read_slowly', arguments: { ms: 30_000 } } },
    sessionId,
  ).then(async (answer) => ({ status: answer.status, text: await answer.text() }));
  await waitForLine('read_slowly start');
  await world.nats.kill();
  try {
    // The front sees its connection drop; from then on every request is refused at once.
    let refused: Response | undefined;
    const deadline = Date.now() + 30_000;
    while (!refused) {
      const started = Date.now();
      const answer = await callCount(sessionId);
      assert.ok(Date.now() - started < BOUND_MS, `a request during the outage waited ${Date.now() - started} ms`);
      if (answer.status === 503) refused = answer;
      else await answer.text();
      assert.ok(Date.now() < deadline, 'the front never answered 503 while NATS was down');
    }
    assert.ok(Number(refused.headers.get('retry-after')) >= 1, 'the 503 says when to retry');
    const body = (await refused.json()) as { error: { message: string } };
    assert.match(body.error.message, /message bus \(NATS\)/);
    const interrupted = await inFlight;
    assert.ok(Date.now() - inFlightStarted < 30_000, 'the call in flight was answered before its upstream would have');
    assert.match(interrupted.text, /lost its connection to the message bus \(NATS\)/, `the call in flight: ${interrupted.text}`);
  } finally {
    await world.nats.start();
  }

  // Back: the same session calls again (its state lives in JetStream, which kept it across the restart).
  const deadline = Date.now() + 60_000;
  for (;;) {
    const answer = await callCount(sessionId);
    const text = await answer.text();
    if (answer.status === 200 && /counted/.test(text)) break;
    assert.ok(Date.now() < deadline, `the session did not call again after NATS came back: ${answer.status} ${text}`);
    await new Promise((r) => setTimeout(r, 250));
  }
});
