/**
 * Hostile HTTP against mcp-front behind the services' own listener (lib
 * `listenHealth`, with short request deadlines), table-driven over raw TCP:
 * every row gets its documented status, the process does not crash (a
 * well-formed request still works after each row), and its memory stays
 * bounded over repeated runs of the whole table.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createLogger, listenHealth, MemoryBus, type HealthServer } from '@punk/lib';
import express from 'express';
import { createFront, type Front } from '../index.js';

const log = createLogger('mcp-front-hostile-test', 'silent');
const V2025 = '2025-11-25';
const MAX_BODY = 1024 * 1024;
/** The listener's deadline for a whole request, in milliseconds. */
const REQUEST_TIMEOUT_MS = 1500;

/** One hostile request: raw bytes, written in one go or trickled. */
interface Row {
  name: string;
  /** The request, `SESSION` replaced by a live session id. */
  head: string;
  body?: Buffer | string;
  /** Writes the body one byte per interval (ms) instead of at once (slow-loris). */
  trickleMs?: number;
  /** Expected status, or statuses when node or the front may legitimately answer either. */
  status: number | number[];
  /** Expected JSON-RPC error code in the body, when there is one. */
  code?: number;
}

/** Sends raw bytes and resolves with the status and body of the answer (or status 0 when the connection closed without one). */
function raw(port: number, head: string, body: Buffer | string = '', trickleMs?: number): Promise<{ status: number; text: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      clearInterval(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, text: text.slice(text.indexOf('\r\n\r\n') + 4) });
    };
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      // Enough once a complete answer with Content-Length arrived.
      const text = Buffer.concat(chunks).toString('latin1');
      const length = /content-length: (\d+)/i.exec(text);
      const split = text.indexOf('\r\n\r\n');
      if (split >= 0 && (length ? text.length - split - 4 >= Number(length[1]) : /^HTTP\/1\.1 (202|204|304)/.test(text))) socket.destroy();
    });
    socket.on('close', finish);
    socket.on('error', () => undefined);
    const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
    socket.write(head);
    if (trickleMs === undefined) {
      socket.write(bytes);
    } else {
      let i = 0;
      timer = setInterval(() => {
        if (i < bytes.length && !socket.destroyed) socket.write(bytes.subarray(i, ++i));
      }, trickleMs);
    }
  });
}

/** A POST head with the headers a good client sends, plus `extra` lines. */
function postHead(body: Buffer | string, extra: string[] = [], omit: string[] = []): string {
  const length = Buffer.isBuffer(body) ? body.length : Buffer.byteLength(body);
  const lines = [
    'POST /mcp HTTP/1.1',
    'Host: 127.0.0.1',
    'Content-Type: application/json',
    'Accept: application/json, text/event-stream',
    `MCP-Protocol-Version: ${V2025}`,
    `Content-Length: ${length}`,
    'Connection: close',
    ...extra,
  ].filter((line) => !omit.some((name) => line.toLowerCase().startsWith(`${name.toLowerCase()}:`)));
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** A POST head of a 2025-03-26 batch in the session (the one revision with batches). */
const batchHead = (body: string) => postHead(body, ['Mcp-Session-Id: SESSION'], ['mcp-protocol-version']);

const request = (id: unknown, method = 'ping') => JSON.stringify({ jsonrpc: '2.0', id, method });

function rows(): Row[] {
  const session = ['Mcp-Session-Id: SESSION'];
  const ping = request(1);
  const tenMiB = Buffer.alloc(10 * 1024 * 1024, 0x20);
  const deepOpen = '['.repeat(100_000);
  const deepClosed = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
  const deepArguments = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"d":${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}}}}`;
  const repeatedIds = JSON.stringify([JSON.parse(request(2)), JSON.parse(request(2, 'tools/list'))]);
  const batchedInitialize = JSON.stringify([
    {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    },
  ]);
  const initializeNoId = JSON.stringify({
    jsonrpc: '2.0',
    method: 'initialize',
    params: { protocolVersion: V2025, capabilities: {}, clientInfo: { name: 'x', version: '1' } },
  });
  const initializeBadParams = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: V2025, clientInfo: { name: 'x', version: '1' } },
  });
  const invalidUtf8 = Buffer.concat([
    Buffer.from('{"jsonrpc":"2.0","id":1,"method":"'),
    Buffer.from([0xff, 0xfe, 0xc3, 0x28]),
    Buffer.from('"}'),
  ]);
  return [
    { name: 'PUT', head: `PUT /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`, status: 405, code: -32000 },
    { name: 'PATCH', head: `PATCH /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`, status: 405, code: -32000 },
    { name: 'TRACE', head: `TRACE /mcp HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, status: 405, code: -32000 },
    { name: 'no Host (HTTP/1.1 requires one)', head: postHead(ping, [], ['host']), body: ping, status: 400 },
    { name: 'no Content-Type', head: postHead(ping, [], ['content-type']), body: ping, status: 415, code: -32000 },
    { name: 'no Accept', head: postHead(ping, [], ['accept']), body: ping, status: 406, code: -32000 },
    { name: 'no Content-Length and no chunking (an empty body)', head: postHead('', [], ['content-length']), status: 400, code: -32700 },
    { name: 'no session id', head: postHead(ping), body: ping, status: 400, code: -32000 },
    {
      name: 'two MCP-Protocol-Version headers',
      head: postHead(ping, [...session, `MCP-Protocol-Version: 2025-06-18`]),
      body: ping,
      status: 400,
      code: -32022,
    },
    {
      name: 'two Mcp-Session-Id headers',
      head: postHead(ping, [...session, 'Mcp-Session-Id: 00000000-0000-0000-0000-000000000000']),
      body: ping,
      status: 404,
      code: -32001,
    },
    {
      name: 'two Origin headers',
      head: postHead(ping, [...session, 'Origin: http://127.0.0.1', 'Origin: http://evil.example']),
      body: ping,
      status: 403,
      code: -32000,
    },
    { name: 'two different Content-Length headers', head: postHead(ping, ['Content-Length: 3']), body: ping, status: 400 },
    { name: 'enormous header (64 KiB)', head: postHead(ping, [`X-Big: ${'a'.repeat(64 * 1024)}`]), body: ping, status: 431 },
    {
      name: 'many headers (5000)',
      head: postHead(
        ping,
        Array.from({ length: 5000 }, (_, i) => `X-H${i}: v`),
      ),
      body: ping,
      status: 431,
    },
    { name: 'invalid UTF-8 in the body', head: postHead(invalidUtf8, session), body: invalidUtf8, status: 200, code: -32601 },
    {
      name: 'body that is not UTF-8 at all',
      head: postHead(Buffer.from([0xff, 0xfe, 0xfd])),
      body: Buffer.from([0xff, 0xfe, 0xfd]),
      status: 400,
      code: -32700,
    },
    { name: '100k unclosed [', head: postHead(deepOpen, session), body: deepOpen, status: 400, code: -32700 },
    { name: '100k nested arrays', head: postHead(deepClosed, session), body: deepClosed, status: 400, code: -32600 },
    { name: '10 MiB body', head: postHead(tenMiB, session), body: tenMiB, status: 413, code: -32600 },
    {
      name: '10 MiB chunked body',
      head: 'POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n',
      body: Buffer.concat([Buffer.from(`${tenMiB.length.toString(16)}\r\n`), tenMiB, Buffer.from('\r\n0\r\n\r\n')]),
      status: 413,
      code: -32600,
    },
    {
      name: 'slow-loris body (1 byte every 200 ms)',
      head: postHead(`${ping}${' '.repeat(200)}`, session),
      body: `${ping}${' '.repeat(200)}`,
      trickleMs: 200,
      status: 408,
    },
    { name: 'slow-loris head', head: 'POST /mcp HTTP/1.1\r\nHost: x\r\n', body: 'X-Slow: 1\r\n'.repeat(100), trickleMs: 100, status: 408 },
    {
      name: 'unknown JSON-RPC method',
      head: postHead(request(1, 'no/such/method'), session),
      body: request(1, 'no/such/method'),
      status: 200,
      code: -32601,
    },
    { name: 'id: string', head: postHead(request('a'), session), body: request('a'), status: 200 },
    { name: 'id: integer', head: postHead(request(7), session), body: request(7), status: 200 },
    { name: 'id: null', head: postHead(request(null), session), body: request(null), status: 400, code: -32600 },
    { name: 'id: fraction', head: postHead(request(1.5), session), body: request(1.5), status: 400, code: -32600 },
    { name: 'id: boolean', head: postHead(request(true), session), body: request(true), status: 400, code: -32600 },
    { name: 'id: object', head: postHead(request({ a: 1 }), session), body: request({ a: 1 }), status: 400, code: -32600 },
    { name: 'id: array', head: postHead(request([1]), session), body: request([1]), status: 400, code: -32600 },
    { name: 'not a JSON-RPC message', head: postHead('{"hello":"world"}', session), body: '{"hello":"world"}', status: 400, code: -32600 },
    { name: 'JSON scalar', head: postHead('42', session), body: '42', status: 400, code: -32600 },
    { name: 'JSON null', head: postHead('null', session), body: 'null', status: 400, code: -32600 },
    {
      name: 'tool arguments nested 10k objects deep',
      head: postHead(deepArguments, session),
      body: deepArguments,
      status: 400,
      code: -32600,
    },
    { name: 'batch (2025-03-26) with a repeated id', head: batchHead(repeatedIds), body: repeatedIds, status: 400, code: -32600 },
    {
      name: 'batch (2025-03-26) holding initialize',
      head: batchHead(batchedInitialize),
      body: batchedInitialize,
      status: 400,
      code: -32600,
    },
    { name: 'initialize without an id', head: postHead(initializeNoId), body: initializeNoId, status: 400, code: -32600 },
    { name: 'initialize without capabilities', head: postHead(initializeBadParams), body: initializeBadParams, status: 400, code: -32602 },
    {
      name: 'notification: initialized',
      head: postHead('{"jsonrpc":"2.0","method":"notifications/initialized"}', session),
      body: '{"jsonrpc":"2.0","method":"notifications/initialized"}',
      status: 202,
    },
    {
      name: 'notification: cancelled',
      head: postHead('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}', session),
      body: '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}',
      status: 202,
    },
    {
      name: 'notification: unknown',
      head: postHead('{"jsonrpc":"2.0","method":"notifications/nope"}', session),
      body: '{"jsonrpc":"2.0","method":"notifications/nope"}',
      status: 202,
    },
  ];
}

describe('hostile HTTP against mcp-front', () => {
  let bus: MemoryBus;
  let front: Front;
  let http: HealthServer;
  let port: number;
  let session: string;

  before(async () => {
    bus = new MemoryBus(log);
    front = await createFront({
      bus,
      log,
      tenant: `hostile-${randomBytes(4).toString('hex')}`,
      maxBodyBytes: MAX_BODY,
      callTimeoutMs: 5_000,
      initializeRateLimit: 1000,
    });
    http = await listenHealth('127.0.0.1', 0, async () => undefined, 'test', {
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      headersTimeoutMs: 1000,
    });
    const app = express();
    app.use(front.router);
    http.setHandler(app);
    port = Number(new URL(http.url).port);
    const init = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: V2025, capabilities: {}, clientInfo: { name: 'hostile', version: '1' } },
    });
    const answer = await fetch(`${http.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: init,
    });
    session = answer.headers.get('mcp-session-id')!;
    await answer.text();
    assert.ok(session);
  });
  after(async () => {
    await front.close();
    await http.close();
    await bus.close();
  });

  /** Whether the front still serves a good request. */
  async function stillServes(): Promise<void> {
    const ok = await raw(port, postHead(request(99), [`Mcp-Session-Id: ${session}`]), request(99));
    assert.equal(ok.status, 200, `a good request after a hostile one: ${ok.text}`);
  }

  async function runTable(): Promise<void> {
    for (const row of rows()) {
      const answer = await raw(
        port,
        row.head.replaceAll('SESSION', session),
        typeof row.body === 'string' ? row.body.replaceAll('SESSION', session) : row.body,
        row.trickleMs,
      );
      const statuses = Array.isArray(row.status) ? row.status : [row.status];
      assert.ok(
        statuses.includes(answer.status),
        `${row.name}: expected ${statuses.join(' or ')}, got ${answer.status} ${answer.text.slice(0, 300)}`,
      );
      if (row.code !== undefined) {
        const data = /^data: (\{.*)$/m.exec(answer.text)?.[1];
        const json = data ?? answer.text.slice(answer.text.indexOf('{'), answer.text.lastIndexOf('}') + 1);
        const body = JSON.parse(json) as { error?: { code: number } };
        assert.equal(body.error?.code, row.code, `${row.name}: ${answer.text.slice(0, 300)}`);
      }
      await stillServes();
    }
  }

  it('every row gets its documented status and the front keeps serving; memory stays bounded over repeated runs', async (t) => {
    await runTable();
    global.gc?.();
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 3; i++) await runTable();
    global.gc?.();
    const grown = process.memoryUsage().rss - before;
    t.diagnostic(
      `rss ${Math.round(before / 1024 / 1024)} MiB after one run of the table, ${Math.round(grown / 1024 / 1024)} MiB more after three more`,
    );
    assert.ok(grown < 128 * 1024 * 1024, `rss grew by ${Math.round(grown / 1024 / 1024)} MiB over three runs of the table`);
  });
});
