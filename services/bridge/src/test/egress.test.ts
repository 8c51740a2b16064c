// The egress allow-list (a pure matcher and the operator's args) and `punk-bridge egress-proxy` as a pod runs it:
// the built binary in front of real local HTTP and TLS servers, and a stdio server behind the bridge whose own
// fetch goes through the proxy (NODE_USE_ENV_PROXY=1 with HTTP_PROXY/HTTPS_PROXY).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { egressAllowRules, egressProxyArgs, egressProxyEnv, matchEgress, parseEgressRule } from '../index.js';
import { specialAddressReason } from '../egress/address-class.js';
import { chooseAddress } from '../egress/resolution.js';
import { parseRequestHost } from '../egress/rules.js';
import {
  connectClient,
  eventually,
  FIXTURE,
  runBridge,
  runEgressProxy,
  selfSignedCertificate,
  textOf,
  type BridgeProcess,
} from './harness.js';

describe('egress rules', () => {
  test('matchEgress decides by exact names, wildcards, ports, IP addresses and CIDRs', () => {
    const rules = [
      'api.example.com:443',
      '*.corp.example:80,8080',
      'Registry.NPMJS.org',
      '10.0.0.0/8:5432',
      '[fd00::1]:443',
      '192.168.1.7',
    ].map(parseEgressRule);
    const cases: [{ host: string; port: number; address?: string }, string | undefined][] = [
      [{ host: 'api.example.com', port: 443 }, 'api.example.com:443'],
      [{ host: 'API.example.com.', port: 443 }, 'api.example.com:443'],
      [{ host: 'api.example.com', port: 80 }, undefined],
      [{ host: 'www.example.com', port: 443 }, undefined],
      [{ host: 'git.corp.example', port: 8080 }, '*.corp.example:80,8080'],
      [{ host: 'a.b.corp.example', port: 80 }, '*.corp.example:80,8080'],
      [{ host: 'corp.example', port: 80 }, undefined],
      [{ host: 'evilcorp.example', port: 80 }, undefined],
      [{ host: 'git.corp.example', port: 443 }, undefined],
      [{ host: 'registry.npmjs.org', port: 12345 }, 'Registry.NPMJS.org'],
      [{ host: '10.1.2.3', port: 5432 }, '10.0.0.0/8:5432'],
      [{ host: 'db.internal', port: 5432, address: '10.9.9.9' }, '10.0.0.0/8:5432'],
      [{ host: 'db.internal', port: 5432, address: '11.9.9.9' }, undefined],
      [{ host: '10.1.2.3', port: 5433 }, undefined],
      [{ host: '[fd00::1]', port: 443 }, '[fd00::1]:443'],
      [{ host: '[fd00::2]', port: 443 }, undefined],
      [{ host: '192.168.1.7', port: 22 }, '192.168.1.7'],
      [{ host: '192.168.1.8', port: 22 }, undefined],
    ];
    for (const [destination, rule] of cases) {
      // As the proxy does: the host normalized once, then matched.
      assert.deepEqual(
        matchEgress(rules, { ...destination, host: parseRequestHost(destination.host).host }),
        { allowed: rule !== undefined, rule },
        JSON.stringify(destination),
      );
    }
    assert.deepEqual(matchEgress([], { host: 'api.example.com', port: 443 }), { allowed: false, rule: undefined });
  });

  test('bad rules are refused with the reason', () => {
    assert.throws(() => parseEgressRule('exa mple.com'), /"exa mple.com" is not a DNS name/);
    assert.throws(() => parseEgressRule('example.com:0'), /ports must be numbers from 1 to 65535/);
    assert.throws(() => parseEgressRule('10.0.0.0/33'), /is not a CIDR/);
    assert.throws(() => parseEgressRule('fd00::1:443'), /write an IPv6 address in brackets/);
    assert.throws(() => parseEgressRule('*.*.example.com'), /is not a DNS name/);
    assert.throws(() => parseEgressRule('127.1'), /is not a DNS name/);
  });

  test('parseRequestHost takes LDH names and IP literals, normalized once, and names a host it refuses', () => {
    assert.deepEqual(parseRequestHost('GitHub.COM.'), { host: 'github.com', family: 0 });
    assert.deepEqual(parseRequestHost('xn--bcher-kva.example'), { host: 'xn--bcher-kva.example', family: 0 });
    assert.deepEqual(parseRequestHost('10.1.2.3'), { host: '10.1.2.3', family: 4 });
    assert.deepEqual(parseRequestHost('[FD00:0::1]'), { host: 'fd00::1', family: 6 });
    for (const [host, reason] of [
      ['x.localhost/.example.com', /not a DNS name of letters, digits and hyphens/],
      ['localhost..', /at most one trailing dot/],
      ['a..example.com', /not a DNS name/],
      ['-lead.example.com', /not a DNS name/],
      ['under_score.example.com', /not a DNS name/],
      ['127.1', /not a DNS name/],
      ['0x7f000001', /not a DNS name/],
      ['bücher.example', /not ASCII: send an internationalized name in its A-label \(xn--\) form/],
      ['fd00::1', /write an IPv6 address in brackets/],
      ['[fe80::1%25eth0]', /IPv6 address without a zone/],
      ['', /empty/],
    ] as const) {
      assert.throws(
        () => parseRequestHost(host),
        (error: Error) =>
          error.message.startsWith(`${JSON.stringify(host)} is not a host the egress proxy takes: `) && reason.test(error.message),
        host,
      );
    }
  });

  test('a name rule never leads to a special-purpose address unless a cidr rule declares it', () => {
    const reasons: [string, string | undefined][] = [
      ['140.82.112.5', undefined],
      ['2606:4700::1111', undefined],
      ['64:ff9b::808:808', undefined],
      ['10.0.0.5', 'a private (RFC 1918) address 10.0.0.5'],
      ['192.168.1.1', 'a private (RFC 1918) address 192.168.1.1'],
      ['127.0.0.1', 'a loopback address 127.0.0.1'],
      ['::1', 'a loopback address ::1'],
      ['169.254.169.254', 'a cloud metadata address 169.254.169.254'],
      ['169.254.1.1', 'a link-local address 169.254.1.1'],
      ['fd00:ec2::254', 'a cloud metadata address fd00:ec2::254'],
      ['100.100.100.200', 'a cloud metadata address 100.100.100.200'],
      ['100.64.0.1', 'a carrier-grade NAT (RFC 6598) address 100.64.0.1'],
      ['fd12:3456::1', 'a unique-local (RFC 4193) address fd12:3456::1'],
      ['fe80::1', 'a link-local address fe80::1'],
      ['0.0.0.0', 'an unspecified address 0.0.0.0'],
      ['::', 'an unspecified address ::'],
      ['224.0.0.251', 'a multicast address 224.0.0.251'],
      ['240.0.0.1', 'a reserved address 240.0.0.1'],
      ['::ffff:a9fe:a9fe', 'a cloud metadata address ::ffff:a9fe:a9fe (the IPv4-mapped form of 169.254.169.254)'],
      ['64:ff9b::a00:5', 'a private (RFC 1918) address 64:ff9b::a00:5 (the NAT64 form of 10.0.0.5)'],
      ['2002:7f00:1::1', 'a loopback address 2002:7f00:1::1 (the 6to4 form of 127.0.0.1)'],
      ['::a00:5', 'a private (RFC 1918) address ::a00:5 (the IPv4-compatible form of 10.0.0.5)'],
      ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'a Teredo (RFC 4380) address 2001:0:4136:e378:8000:63bf:3fff:fdd2'],
    ];
    for (const [address, reason] of reasons) assert.equal(specialAddressReason(address), reason, address);

    const rules = ['api.example.com:443', '10.0.0.0/8:443'].map(parseEgressRule);
    const byName = { allowed: true, rule: 'api.example.com:443' };
    const noName = { allowed: false, rule: undefined };
    assert.deepEqual(chooseAddress(rules, 443, byName, ['140.82.112.5']), {
      allowed: true,
      address: '140.82.112.5',
      rule: 'api.example.com:443',
    });
    assert.deepEqual(chooseAddress(rules, 443, byName, ['127.0.0.1', '140.82.112.5']), {
      allowed: true,
      address: '140.82.112.5',
      rule: 'api.example.com:443',
    });
    assert.deepEqual(chooseAddress(rules, 443, byName, ['169.254.169.254', '::1']), {
      allowed: false,
      address: '169.254.169.254',
      reason: 'resolves to a cloud metadata address 169.254.169.254',
    });
    // Declared by the cidr rule (on its port only), whatever name led there.
    assert.deepEqual(chooseAddress(rules, 443, byName, ['10.0.0.5']), { allowed: true, address: '10.0.0.5', rule: '10.0.0.0/8:443' });
    assert.deepEqual(chooseAddress(rules, 443, noName, ['10.0.0.5']), { allowed: true, address: '10.0.0.5', rule: '10.0.0.0/8:443' });
    assert.deepEqual(chooseAddress(rules, 80, noName, ['10.0.0.5']), { allowed: false, address: undefined, reason: undefined });
    assert.deepEqual(chooseAddress(rules, 443, noName, ['140.82.112.5']), { allowed: false, address: undefined, reason: undefined });
  });

  test('egressProxyArgs turns spec.sandbox.egress into the proxy arguments, and names a bad item; egressProxyEnv points a pod at the proxy', () => {
    const egress = [
      { host: 'api.github.com', ports: [443] },
      { host: '*.googleapis.com' },
      { cidr: '10.0.0.0/8', ports: [5432, 6432] },
      { host: 'fd00::7' },
    ];
    assert.deepEqual(egressAllowRules(egress), ['api.github.com:443', '*.googleapis.com', '10.0.0.0/8:5432,6432', '[fd00::7]']);
    assert.deepEqual(egressProxyArgs(egress), [
      'egress-proxy',
      '--port',
      '3128',
      '--allow',
      'api.github.com:443',
      '--allow',
      '*.googleapis.com',
      '--allow',
      '10.0.0.0/8:5432,6432',
      '--allow',
      '[fd00::7]',
    ]);
    assert.deepEqual(egressProxyArgs([], { port: 4000 }), ['egress-proxy', '--port', '4000']);
    assert.throws(() => egressAllowRules([{ host: 'ok.example' }, { host: 'not ok' }]), /sandbox\.egress\[1\]\.host: .*not a DNS name/);
    assert.throws(() => egressAllowRules([{ cidr: 'example.com' }]), /sandbox\.egress\[0\]\.cidr: "example.com" is not a CIDR/);
    assert.throws(() => egressAllowRules([{ host: 'example.com', ports: [] }]), /sandbox\.egress\[0\]\.ports: lists no port/);
    assert.deepEqual(egressProxyEnv('http://fetcher-egress.tools.svc:3128'), [
      { name: 'HTTP_PROXY', value: 'http://fetcher-egress.tools.svc:3128' },
      { name: 'HTTPS_PROXY', value: 'http://fetcher-egress.tools.svc:3128' },
      { name: 'http_proxy', value: 'http://fetcher-egress.tools.svc:3128' },
      { name: 'https_proxy', value: 'http://fetcher-egress.tools.svc:3128' },
      { name: 'NODE_USE_ENV_PROXY', value: '1' },
    ]);
    assert.throws(() => egressProxyEnv('https://proxy:3128'), /must be an http: URL/);
    // Each rule it makes is one the proxy takes.
    for (const rule of egressAllowRules(egress)) assert.equal(parseEgressRule(rule).text, rule);
  });
});

/** The proxy's decision log lines, once there are `count` of them (the log is read from its stderr pipe). */
async function decisions(proxy: BridgeProcess, count: number): Promise<Record<string, unknown>[]> {
  const lines = () => proxy.logs.filter((line) => 'allowed' in line);
  await eventually(() => lines().length >= count, `${count} decisions logged`);
  return lines();
}

/** An answer through the proxy. */
interface Answer {
  status: number;
  body: string;
  headers?: IncomingHttpHeaders;
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

/** A plain HTTP request in absolute form through the proxy. */
function viaProxy(proxy: BridgeProcess, url: string, headers: Record<string, string> = {}): Promise<Answer> {
  const { hostname, port } = new URL(proxy.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path: url, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** `CONNECT target` through the proxy: the status, the socket when it is 200, or the body of a refusal. */
function tunnel(proxy: BridgeProcess, target: string): Promise<{ status: number; socket: Socket; body: string }> {
  const { hostname, port } = new URL(proxy.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, method: 'CONNECT', path: target, agent: false });
    req.on('connect', (res, socket: Socket, head: Buffer) => {
      if (res.statusCode === 200) {
        resolve({ status: 200, socket, body: '' });
        return;
      }
      let body = head.toString('utf8');
      socket.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      socket.on('close', () => resolve({ status: res.statusCode!, socket, body }));
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, socket: res.socket, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * The rules that let the proxy reach this machine's test servers by the name `localhost`: the name rule, and the cidr
 * rule that declares its loopback address (a name rule alone never leads to loopback).
 */
function localhost(...ports: number[]): string[] {
  return ['--allow', `localhost:${ports.join(',')}`, '--allow', `127.0.0.1/32:${ports.join(',')}`];
}

describe('punk-bridge egress-proxy', () => {
  const tls = selfSignedCertificate();
  let seen: IncomingHttpHeaders[] = [];
  const http = createServer((req, res) => {
    seen.push(req.headers);
    res.setHeader('connection', 'x-upstream-private');
    res.setHeader('x-upstream-private', 'hop');
    res.end(`plain hello ${req.url}`);
  });
  const other = createServer((_req, res) => res.end('should never be reached'));
  const https = tls && createHttpsServer({ key: tls.key, cert: tls.cert }, (req, res) => res.end(`tls hello ${req.url}`));
  let httpPort = 0;
  let otherPort = 0;
  let httpsPort = 0;
  const processes: BridgeProcess[] = [];
  const start = async (run: Promise<BridgeProcess>) => {
    const started = await run;
    processes.push(started);
    return started;
  };

  before(async () => {
    httpPort = await listen(http);
    otherPort = await listen(other);
    if (https) httpsPort = await listen(https);
  });
  after(async () => {
    for (const p of processes) if (p.child.exitCode === null) await p.stop();
    for (const server of [http, other, https]) {
      server?.closeAllConnections();
      server?.close();
    }
    tls?.dispose();
  });

  test('plain HTTP: the allowed host:port passes without hop-by-hop fields; another port or host is 403 naming it; each decision is logged', async () => {
    const proxy = await start(runEgressProxy([...localhost(httpPort)]));
    seen = [];
    const allowed = await viaProxy(proxy, `http://localhost:${httpPort}/hello?x=1`, {
      connection: 'x-private',
      'x-private': 'for the proxy only',
      'proxy-authorization': 'Basic c2VjcmV0',
      'x-kept': 'end to end',
    });
    assert.equal(allowed.status, 200);
    assert.equal(allowed.body, 'plain hello /hello?x=1');
    assert.equal(allowed.headers!['x-upstream-private'], undefined, "a field the response's Connection names stays behind");
    assert.match(String(allowed.headers!.via), /punk-egress-proxy/);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]!['x-kept'], 'end to end');
    assert.equal(seen[0]!.host, `localhost:${httpPort}`);
    assert.equal(seen[0]!['x-private'], undefined);
    assert.equal(seen[0]!['proxy-authorization'], undefined);
    assert.match(String(seen[0]!.via), /punk-egress-proxy/);

    const otherPortAnswer = await viaProxy(proxy, `http://localhost:${otherPort}/`);
    assert.equal(otherPortAnswer.status, 403);
    assert.match(otherPortAnswer.body, new RegExp(`egress to localhost:${otherPort} is refused`));
    const otherHost = await viaProxy(proxy, `http://127.0.0.2:${httpPort}/`);
    assert.equal(otherHost.status, 403);
    assert.match(otherHost.body, new RegExp(`egress to 127.0.0.2:${httpPort} is refused`));
    assert.equal(seen.length, 1, 'refused requests never reach a server');

    assert.deepEqual(
      (await decisions(proxy, 3)).map(({ host, port, allowed, rule }) => ({ host, port, allowed, rule })),
      [
        { host: 'localhost', port: httpPort, allowed: true, rule: `127.0.0.1/32:${httpPort}` },
        { host: 'localhost', port: otherPort, allowed: false, rule: null },
        { host: '127.0.0.2', port: httpPort, allowed: false, rule: null },
      ],
    );
  });

  test(
    'CONNECT: a TLS session to the allowed host:port runs end to end through the tunnel; another port is 403 naming it',
    { skip: !tls && 'openssl is not installed' },
    async () => {
      const proxy = await start(runEgressProxy([...localhost(httpsPort)]));
      const opened = await tunnel(proxy, `localhost:${httpsPort}`);
      assert.equal(opened.status, 200);
      const secure = tlsConnect({ socket: opened.socket, servername: 'localhost', ca: tls!.cert });
      await once(secure, 'secureConnect');
      secure.end(`GET /secret HTTP/1.1\r\nhost: localhost:${httpsPort}\r\nconnection: close\r\n\r\n`);
      let answer = '';
      secure.setEncoding('utf8').on('data', (chunk) => (answer += chunk));
      await once(secure, 'end');
      assert.match(answer, /^HTTP\/1\.1 200 OK/);
      assert.match(answer, /tls hello \/secret/);

      const refused = await tunnel(proxy, `localhost:${otherPort}`);
      assert.equal(refused.status, 403);
      assert.match(refused.body, new RegExp(`egress to localhost:${otherPort} is refused`));
      assert.deepEqual(
        (await decisions(proxy, 2)).map(({ method, port, allowed }) => ({ method, port, allowed })),
        [
          { method: 'CONNECT', port: httpsPort, allowed: true },
          { method: 'CONNECT', port: otherPort, allowed: false },
        ],
      );
    },
  );

  test('a CIDR rule allows a name by the address it resolves to, and the proxy connects to that address', async () => {
    const proxy = await start(runEgressProxy(['--allow', `127.0.0.0/8:${httpPort}`]));
    assert.equal((await viaProxy(proxy, `http://localhost:${httpPort}/by-name`)).body, 'plain hello /by-name');
    assert.equal((await viaProxy(proxy, `http://127.0.0.1:${httpPort}/by-address`)).body, 'plain hello /by-address');
    assert.equal((await viaProxy(proxy, `http://localhost:${otherPort}/`)).status, 403);
    const byName = (await decisions(proxy, 3)).find((line) => line.host === 'localhost' && line.port === httpPort);
    assert.equal(byName?.rule, `127.0.0.0/8:${httpPort}`);
    assert.match(String(byName?.address), /^127\./);
  });

  test('a name rule never leads to loopback: localhost alone is 403 naming the address, and passes once a cidr rule declares 127.0.0.1', async () => {
    const proxy = await start(runEgressProxy(['--allow', `localhost:${httpPort}`, '--allow', `*.localhost:${httpPort}`]));
    seen = [];
    const byName = await viaProxy(proxy, `http://localhost:${httpPort}/`);
    assert.equal(byName.status, 403);
    assert.equal(
      byName.body,
      `egress to localhost:${httpPort} is refused: localhost resolves to a loopback address 127.0.0.1, which no cidr rule of this pod's egress allow-list (spec.sandbox.egress) allows on port ${httpPort}\n`,
    );
    const below = await tunnel(proxy, `api.localhost:${httpPort}`);
    assert.equal(below.status, 403);
    assert.match(below.body, /api\.localhost resolves to a loopback address 127\.0\.0\.1/);
    assert.equal(seen.length, 0, 'refused requests never reach a server');
    assert.deepEqual(
      (await decisions(proxy, 2)).map(({ host, allowed, rule, address, reason }) => ({ host, allowed, rule, address, reason })),
      [
        { host: 'localhost', allowed: false, rule: null, address: '127.0.0.1', reason: 'resolves to a loopback address 127.0.0.1' },
        { host: 'api.localhost', allowed: false, rule: null, address: '127.0.0.1', reason: 'resolves to a loopback address 127.0.0.1' },
      ],
    );

    const declared = await start(runEgressProxy([...localhost(httpPort)]));
    assert.equal((await viaProxy(declared, `http://LocalHost.:${httpPort}/declared`)).body, 'plain hello /declared');
    const [decision] = await decisions(declared, 1);
    assert.deepEqual(
      { host: decision!.host, allowed: decision!.allowed, rule: decision!.rule, address: decision!.address },
      { host: 'localhost', allowed: true, rule: `127.0.0.1/32:${httpPort}`, address: '127.0.0.1' },
    );
  });

  test('a host that is not an LDH name or an IP literal is 400 naming it, logged, and never resolved or matched', async () => {
    const proxy = await start(runEgressProxy([...localhost(httpPort), '--allow', '*.example.com']));
    const slashed = await tunnel(proxy, 'x.localhost/.example.com:443');
    assert.equal(slashed.status, 400);
    assert.match(slashed.body, /^"x\.localhost\/\.example\.com" is not a host the egress proxy takes: not a DNS name/);
    const dots = await tunnel(proxy, `localhost..:${httpPort}`);
    assert.equal(dots.status, 400);
    assert.match(dots.body, /^"localhost\.\." is not a host the egress proxy takes: .*at most one trailing dot/);
    const numeric = await tunnel(proxy, `127.1:${httpPort}`);
    assert.equal(numeric.status, 400);
    assert.match(numeric.body, /^"127\.1" is not a host/);
    // One trailing dot is a fully qualified name: the same host.
    const dot = await tunnel(proxy, `localhost.:${httpPort}`);
    assert.equal(dot.status, 200);
    dot.socket.destroy();
    assert.deepEqual(
      (await decisions(proxy, 4)).map(({ host, allowed, rule }) => ({ host, allowed, rule })),
      [
        { host: 'x.localhost/.example.com', allowed: false, rule: null },
        { host: 'localhost..', allowed: false, rule: null },
        { host: '127.1', allowed: false, rule: null },
        { host: 'localhost', allowed: true, rule: `127.0.0.1/32:${httpPort}` },
      ],
    );
  });

  test('--max-connections: a client beyond the limit is answered 503 naming it; a closed connection frees its slot', async () => {
    const proxy = await start(runEgressProxy([...localhost(httpPort), '--max-connections', '1']));
    const held = await tunnel(proxy, `localhost:${httpPort}`);
    assert.equal(held.status, 200);
    const refused = await viaProxy(proxy, `http://localhost:${httpPort}/`);
    assert.equal(refused.status, 503);
    assert.match(refused.body, /limit of 1 connections \(--max-connections\)/);
    held.socket.destroy();
    let again: Answer | undefined;
    await eventually(
      async () => (again = await viaProxy(proxy, `http://localhost:${httpPort}/again`)).status === 200,
      'a request once the slot is free',
    );
    assert.equal(again!.body, 'plain hello /again');
  });

  test('--idle-timeout: a tunnel nothing goes through is closed', async () => {
    const proxy = await start(runEgressProxy([...localhost(httpPort), '--idle-timeout', '300ms']));
    const idle = await tunnel(proxy, `localhost:${httpPort}`);
    assert.equal(idle.status, 200);
    await once(idle.socket, 'close');
  });

  test(
    'an MCP server behind the bridge reaches the allowed hosts through the proxy and is refused the others',
    { skip: !tls && 'openssl is not installed' },
    async () => {
      const proxy = await start(runEgressProxy([...localhost(httpPort, httpsPort)]));
      // What the operator gives the server container (egressProxyEnv), and the test certificate's authority.
      const env = { ...Object.fromEntries(egressProxyEnv(proxy.url).map((v) => [v.name, v.value])), NODE_EXTRA_CA_CERTS: tls!.certPath };
      const bridge = await start(runBridge(FIXTURE, [], env));
      const { client } = await connectClient(bridge);
      const fetchText = async (url: string) => textOf(await client.callTool({ name: 'fetch', arguments: { url } }));

      assert.equal(await fetchText(`https://localhost:${httpsPort}/over-tls`), '200 tls hello /over-tls');
      assert.equal(await fetchText(`http://localhost:${httpPort}/plain`), '200 plain hello /plain');
      // Node's fetch (undici's proxy agent) tunnels http: URLs with CONNECT too, so a refusal is a failed fetch.
      assert.match(await fetchText(`http://localhost:${otherPort}/`), /^error fetch failed/);
      assert.match(await fetchText(`https://localhost:${otherPort}/`), /^error fetch failed/);
      // node:http sends http: URLs in absolute form: the refusal's body reaches the server.
      const httpGet = async (url: string) => textOf(await client.callTool({ name: 'http_get', arguments: { url } }));
      assert.equal(await httpGet(`http://localhost:${httpPort}/absolute`), '200 plain hello /absolute');
      assert.match(await httpGet(`http://localhost:${otherPort}/`), new RegExp(`^403 egress to localhost:${otherPort} is refused`));
      assert.deepEqual(
        (await decisions(proxy, 6)).map(({ method, port, allowed }) => ({ method, port, allowed })),
        [
          { method: 'CONNECT', port: httpsPort, allowed: true },
          { method: 'CONNECT', port: httpPort, allowed: true },
          { method: 'CONNECT', port: otherPort, allowed: false },
          { method: 'CONNECT', port: otherPort, allowed: false },
          { method: 'GET', port: httpPort, allowed: true },
          { method: 'GET', port: otherPort, allowed: false },
        ],
      );
      await client.close();
    },
  );

  test('/healthz and /readyz answer for the probes; SIGTERM stops the proxy with exit code 0', async () => {
    const proxy = await start(runEgressProxy([...localhost(httpPort)]));
    assert.deepEqual(await (await fetch(`${proxy.url}/healthz`)).json(), { status: 'ok' });
    assert.deepEqual(await (await fetch(`${proxy.url}/readyz`)).json(), { status: 'ready' });
    const other = await fetch(`${proxy.url}/anything`);
    assert.equal(other.status, 400);
    assert.match(await other.text(), /this is an HTTP forward proxy/);
    const held = await tunnel(proxy, `localhost:${httpPort}`);
    assert.equal(held.status, 200);
    assert.deepEqual(await proxy.stop(), { code: 0, signal: null });
  });
});
