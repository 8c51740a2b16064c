/**
 * guardedFetch on real loopback servers. 127.0.0.2 and 127.0.0.3 stand in for public hosts (made
 * reachable with allowedNetworks; the test lookup maps test names to them); 127.0.0.1 is the private
 * destination a redirect or a DNS rebinding tries to reach, where a counting server proves nothing arrived.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { lookup as systemLookup } from 'node:dns/promises';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setDefaultCACertificates } from 'node:tls';
import { promisify } from 'node:util';
import { PunkError } from '@punk/lib';
import { guardedFetch, type DestinationPolicy, type HostLookup } from '../index.js';

interface Listening {
  port: number;
  /** `METHOD path` of each request received. */
  hits: string[];
  close(): Promise<void>;
}

type Handler = (request: IncomingMessage, response: ServerResponse, body: string) => void;

/** An HTTP server on `host` (port 0: any free one) that records each request. */
async function listen(host: string, handler: Handler, port = 0): Promise<Listening> {
  const hits: string[] = [];
  const server = createServer((request, response) => {
    hits.push(`${request.method} ${request.url}`);
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => handler(request, response, body));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    hits,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A lookup answering from `table`, counting its calls per name. */
function tableLookup(table: Record<string, string[]>): HostLookup & { calls: Map<string, number> } {
  const calls = new Map<string, number>();
  const lookup = async (hostname: string) => {
    const count = (calls.get(hostname) ?? 0) + 1;
    calls.set(hostname, count);
    const answers = table[hostname];
    if (!answers) throw new Error(`getaddrinfo ENOTFOUND ${hostname}`);
    // A list of answers is one answer per call (the last one repeats): a name that rebinds.
    const address = answers[Math.min(count, answers.length) - 1]!;
    return [{ address, family: 4 }];
  };
  return Object.assign(lookup, { calls });
}

const redirectTo = (response: ServerResponse, location: string, status = 302) => {
  response.writeHead(status, { location });
  response.end();
};

test('a public URL that redirects to a private one is refused before anything connects to the target', async (t) => {
  const target = await listen('::', (_request, response) => response.end('private'));
  t.after(() => target.close());
  const front = await listen('127.0.0.2', (request, response) => {
    const to = {
      '/to-private': 'http://10.0.0.1/',
      '/to-metadata': 'http://169.254.169.254/latest/meta-data',
      '/to-localhost': `http://localhost:${target.port}/`,
      '/to-loopback': `http://[::ffff:127.0.0.1]:${target.port}/`,
    }[request.url!];
    if (to) redirectTo(response, to);
    else response.end('front');
  });
  t.after(() => front.close());
  const lookup = tableLookup({ 'public.example.test': ['127.0.0.2'] });
  // localhost goes to the system resolver, like any name the table does not know.
  const policy: DestinationPolicy = {
    allowPrivate: false,
    allowedNetworks: ['127.0.0.2/32'],
    lookup: (name) => (name === 'localhost' ? systemLookup(name, { all: true }) : lookup(name)),
  };
  const fetchGuarded = guardedFetch(policy);
  t.after(() => fetchGuarded.close());

  const base = `http://public.example.test:${front.port}`;
  assert.equal(await (await fetchGuarded(`${base}/`)).text(), 'front', 'the public stand-in is reachable');
  const cases: [string, RegExp][] = [
    [
      '/to-private',
      /http:\/\/10\.0\.0\.1\/ refused: 10\.0\.0\.1 is a special-purpose address, class private.* \(a redirect from http:\/\/public\.example\.test:\d+\/to-private led there\)$/,
    ],
    ['/to-metadata', /http:\/\/169\.254\.169\.254\/latest\/meta-data refused: .*class cloud metadata service/],
    ['/to-localhost', /http:\/\/localhost:\d+\/ refused: localhost resolves to .* class loopback/],
    ['/to-loopback', /refused: .*form of 127\.0\.0\.1, which is loopback/],
  ];
  for (const [path, refused] of cases) {
    await assert.rejects(fetchGuarded(`${base}${path}`), { code: 'EgressRefused', message: refused }, path);
    await assert.rejects(fetchGuarded(`${base}${path}`, { method: 'POST', body: '{}' }), { code: 'EgressRefused' }, `POST ${path}`);
  }
  assert.deepEqual(target.hits, [], 'the private target got no request');
  assert.equal(front.hits.length, 1 + cases.length * 2, 'every hop to the front was made');

  // redirect: 'manual' (what the MCP SDK's same-origin policy asks for) hands the redirect back unfollowed.
  const manual = await fetchGuarded(`${base}/to-localhost`, { redirect: 'manual' });
  assert.equal(manual.status, 302);
  assert.equal(manual.headers.get('location'), `http://localhost:${target.port}/`);
  await assert.rejects(
    fetchGuarded(manual.headers.get('location')!),
    { code: 'EgressRefused' },
    'following it through the guard is refused too',
  );
  await assert.rejects(fetchGuarded(`${base}/to-private`, { redirect: 'error' }), TypeError);
  assert.deepEqual(target.hits, []);
});

test('DNS rebinding: the request connects to the address that was checked, resolved once', async (t) => {
  const checked = await listen('127.0.0.2', (request, response) => response.end(`checked, Host ${request.headers.host}`));
  t.after(() => checked.close());
  // The rebinding target listens on the same port of 127.0.0.1: a second resolution would land there.
  const rebound = await listen('127.0.0.1', (_request, response) => response.end('rebound'), checked.port);
  t.after(() => rebound.close());
  const lookup = tableLookup({ 'rebind.example.test': ['127.0.0.2', '127.0.0.1'] });
  const fetchGuarded = guardedFetch({ allowPrivate: false, allowedNetworks: ['127.0.0.2/32'], lookup });
  t.after(() => fetchGuarded.close());

  const url = `http://rebind.example.test:${checked.port}/mcp`;
  const response = await fetchGuarded(url);
  assert.equal(await response.text(), `checked, Host rebind.example.test:${checked.port}`, 'the name stays in the Host header');
  assert.equal(lookup.calls.get('rebind.example.test'), 1, 'one resolution for the request');
  assert.deepEqual(rebound.hits, []);

  // The next request resolves again (now to 127.0.0.1), and that answer is checked and refused.
  await assert.rejects(fetchGuarded(url), {
    code: 'EgressRefused',
    message: /rebind\.example\.test resolves to 127\.0\.0\.1, which is .* class loopback/,
  });
  assert.equal(lookup.calls.get('rebind.example.test'), 2);
  assert.deepEqual(rebound.hits, [], 'nothing ever reached the rebound address');
  assert.deepEqual(checked.hits, ['GET /mcp']);
});

test('redirects: followed within the bound, credentials kept on the origin and dropped off it, methods per the Fetch Standard', async (t) => {
  const echo: Handler = (request, response, body) => {
    response.setHeader('content-type', 'application/json');
    response.end(JSON.stringify({ method: request.method, headers: request.headers, body }));
  };
  const other = await listen('127.0.0.3', echo);
  t.after(() => other.close());
  const front = await listen('127.0.0.2', (request, response, body) => {
    if (request.url === '/same') redirectTo(response, '/echo', 307);
    else if (request.url === '/cross') redirectTo(response, `http://other.example.test:${other.port}/echo`, 307);
    else if (request.url === '/see-other') redirectTo(response, '/echo', 303);
    else if (request.url === '/found') redirectTo(response, '/echo', 302);
    else if (request.url === '/loop') redirectTo(response, '/loop');
    else if (request.url === '/bad-location') redirectTo(response, 'http://[::1');
    else echo(request, response, body);
  });
  t.after(() => front.close());
  const lookup = tableLookup({ 'front.example.test': ['127.0.0.2'], 'other.example.test': ['127.0.0.3'] });
  const fetchGuarded = guardedFetch(
    { allowPrivate: false, allowedNetworks: ['127.0.0.2/32', '127.0.0.3/32'], lookup },
    { credentialHeaders: ['X-Api-Key'] },
  );
  t.after(() => fetchGuarded.close());
  const base = `http://front.example.test:${front.port}`;
  const headers = {
    authorization: 'Bearer tok-123',
    cookie: 'session=abc',
    'x-api-key': 'key-456',
    'x-trace': 'kept',
    'content-type': 'application/json',
  };
  type Echoed = { method: string; headers: Record<string, string>; body: string };

  const same = (await (await fetchGuarded(`${base}/same`, { method: 'POST', headers, body: '{"a":1}' })).json()) as Echoed;
  assert.equal(same.method, 'POST', '307 keeps the method');
  assert.equal(same.body, '{"a":1}', '307 keeps the body');
  assert.equal(same.headers.authorization, 'Bearer tok-123', 'same origin keeps Authorization');
  assert.equal(same.headers['x-api-key'], 'key-456');

  const crossResponse = await fetchGuarded(`${base}/cross`, { method: 'POST', headers, body: '{"a":2}' });
  assert.equal(crossResponse.url, `http://other.example.test:${other.port}/echo`, 'the response names the final URL');
  const cross = (await crossResponse.json()) as Echoed;
  assert.equal(cross.body, '{"a":2}');
  assert.equal(cross.headers.authorization, undefined, 'Authorization is not sent to another origin');
  assert.equal(cross.headers.cookie, undefined, 'nor cookies');
  assert.equal(cross.headers['x-api-key'], undefined, 'nor a header named in credentialHeaders');
  assert.equal(cross.headers['x-trace'], 'kept');

  const seeOther = (await (await fetchGuarded(`${base}/see-other`, { method: 'POST', headers, body: '{"a":3}' })).json()) as Echoed;
  assert.deepEqual(
    [seeOther.method, seeOther.body, seeOther.headers['content-type']],
    ['GET', '', undefined],
    '303 turns a POST into a GET without body',
  );
  const found = (await (await fetchGuarded(`${base}/found`, { method: 'POST', headers, body: '{"a":4}' })).json()) as Echoed;
  assert.equal(found.method, 'GET', '302 after a POST becomes a GET');

  const loopsBefore = front.hits.filter((hit) => hit.endsWith('/loop')).length;
  await assert.rejects(fetchGuarded(`${base}/loop`), { code: 'TooManyRedirects', message: /redirected more than 5 times/ });
  assert.equal(front.hits.filter((hit) => hit.endsWith('/loop')).length - loopsBefore, 6, 'the request and 5 redirects, then an error');
  const fetchTwice = guardedFetch({ allowPrivate: false, allowedNetworks: ['127.0.0.2/32'], lookup }, { maxRedirects: 1 });
  await assert.rejects(fetchTwice(`${base}/loop`), { code: 'TooManyRedirects', message: /more than 1 times/ });
  await fetchTwice.close();
  await assert.rejects(fetchGuarded(`${base}/bad-location`), { code: 'EgressRefused', message: /which is not a URL/ });

  const stream = new ReadableStream({ start: (controller) => (controller.enqueue(new TextEncoder().encode('{}')), controller.close()) });
  await assert.rejects(
    fetchGuarded(`${base}/same`, { method: 'POST', body: stream, duplex: 'half' }),
    (error: unknown) => error instanceof PunkError && /streamed body cannot be sent again/.test(error.message),
  );
});

test('a streamed response (SSE) arrives event by event, through a redirect', async (t) => {
  let sendRest: () => void = () => {};
  const server = await listen('127.0.0.2', (request, response) => {
    if (request.url === '/sse-moved') {
      redirectTo(response, '/sse');
      return;
    }
    if (request.url === '/next') {
      sendRest();
      return response.end();
    }
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
    response.write('event: message\ndata: first\n\n');
    sendRest = () => response.end('event: message\ndata: second\n\n');
  });
  t.after(() => server.close());
  const fetchGuarded = guardedFetch({
    allowPrivate: false,
    allowedNetworks: ['127.0.0.2/32'],
    lookup: tableLookup({ 'events.example.test': ['127.0.0.2'] }),
  });
  t.after(() => fetchGuarded.close());

  const response = await fetchGuarded(`http://events.example.test:${server.port}/sse-moved`, { headers: { accept: 'text/event-stream' } });
  assert.equal(response.headers.get('content-type'), 'text/event-stream');
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  // The second event is only sent once the first was read: a buffered body would never get here.
  let received = '';
  while (!received.includes('first')) received += (await reader.read()).value ?? '';
  assert.doesNotMatch(received, /second/);
  await fetchGuarded(`http://events.example.test:${server.port}/next`);
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) received += chunk.value;
  assert.match(received, /data: first\n\n.*data: second\n\n/s);
});

test('https: the connection goes to the checked address while SNI and the certificate check use the host name', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'punk-egress-tls-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await promisify(execFile)('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=secure.example.test',
    '-addext',
    'subjectAltName=DNS:secure.example.test',
    '-keyout',
    join(dir, 'key.pem'),
    '-out',
    join(dir, 'cert.pem'),
  ]);
  const [key, cert] = await Promise.all([readFile(join(dir, 'key.pem'), 'utf8'), readFile(join(dir, 'cert.pem'), 'utf8')]);
  // This test file runs in its own process: trusting the test certificate here affects nothing else.
  setDefaultCACertificates([cert]);
  const serverNames: string[] = [];
  const server = createHttpsServer({ key, cert }, (request, response) => response.end(`secure, Host ${request.headers.host}`));
  server.on('secureConnection', (socket) => serverNames.push(String(socket.servername)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.2', resolve));
  t.after(() => new Promise((resolve) => (server.closeAllConnections(), server.close(resolve))));
  const port = (server.address() as AddressInfo).port;
  const fetchGuarded = guardedFetch({
    allowPrivate: false,
    allowedNetworks: ['127.0.0.2/32'],
    lookup: tableLookup({ 'secure.example.test': ['127.0.0.2'], 'wrong.example.test': ['127.0.0.2'] }),
  });
  t.after(() => fetchGuarded.close());

  const response = await fetchGuarded(`https://secure.example.test:${port}/mcp`);
  assert.equal(await response.text(), `secure, Host secure.example.test:${port}`);
  assert.deepEqual(serverNames, ['secure.example.test'], 'SNI carries the host name, not the address');
  await assert.rejects(fetchGuarded(`https://wrong.example.test:${port}/mcp`), (error: unknown) => {
    assert.equal(
      (error as { cause?: { code?: string } }).cause?.code,
      'ERR_TLS_CERT_ALTNAME_INVALID',
      'the certificate is checked against the URL host',
    );
    return true;
  });
});
