/**
 * The SSRF guard's table: URLs an upstream registration must not reach with authentication on, each
 * refused by checkDestination and by guardedFetch before anything connects (a loopback server listening
 * on every loopback address counts the connections that got through: none), and what the open-dev
 * carve-out and PUNK_UPSTREAM_ALLOWED_NETWORKS let through.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { PunkError } from '@punk/lib';
import { checkDestination, checkUrlShape, guardedFetch, type DestinationPolicy, type HostLookup } from '../index.js';

/** Test names resolved by the policy's lookup (DNS is not under test); any other name goes to no resolver. */
const names: Record<string, { address: string; family: number }[]> = {
  'internal.example.test': [{ address: '10.1.2.3', family: 4 }],
  'mixed.example.test': [
    { address: '93.184.215.14', family: 4 },
    { address: '10.1.2.3', family: 4 },
  ],
  'public.example.test': [
    { address: '93.184.215.14', family: 4 },
    { address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 },
  ],
};
const testLookup: HostLookup = async (hostname) => {
  const answer = names[hostname];
  if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return answer;
};

/** Authentication on: nothing special-purpose is allowed. */
const closed: DestinationPolicy = { allowPrivate: false, allowedNetworks: [], lookup: testLookup };
/** The same, resolving through the system resolver (for `localhost`). */
const closedRealDns: DestinationPolicy = { allowPrivate: false, allowedNetworks: [] };

let server: Server;
let port: number;
let connections = 0;

before(async () => {
  // Listening on :: (dual stack) receives 127.0.0.1, ::1, ::ffff:127.0.0.1 and 0.0.0.0 alike.
  server = createServer((_request, response) => response.end('reached'));
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '::', resolve));
  port = (server.address() as AddressInfo).port;
});

after(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

interface Row {
  url: () => string;
  /** What the refusal names: the address class or the reason. */
  refused: RegExp;
  policy?: DestinationPolicy;
  /** Text of the URL that no error may repeat (its credentials). */
  secret?: RegExp;
}

const table: Row[] = [
  { url: () => `http://127.0.0.1:${port}/mcp`, refused: /127\.0\.0\.1 is a special-purpose address, class loopback/ },
  {
    url: () => `http://localhost:${port}/mcp`,
    refused: /localhost resolves to (127\.0\.0\.1|::1), which is a special-purpose address, class loopback/,
    policy: closedRealDns,
  },
  { url: () => `http://0.0.0.0:${port}/`, refused: /0\.0\.0\.0 is a special-purpose address, class unspecified/ },
  { url: () => `http://[::]:${port}/`, refused: /:: is a special-purpose address, class unspecified/ },
  { url: () => `http://[::1]:${port}/`, refused: /::1 is a special-purpose address, class loopback/ },
  { url: () => `http://[::ffff:127.0.0.1]:${port}/`, refused: /IPv4-mapped \(RFC 4291\) form of 127\.0\.0\.1, which is loopback/ },
  {
    url: () => `http://2130706433:${port}/`,
    refused: /^upstream URL http:\/\/2130706433:\d+\/ refused: 127\.0\.0\.1 is .* class loopback/,
  },
  { url: () => `http://0x7f.1:${port}/`, refused: /127\.0\.0\.1 is .* class loopback/ },
  { url: () => `http://017700000001:${port}/`, refused: /127\.0\.0\.1 is .* class loopback/ },
  { url: () => `http://127.1:${port}/`, refused: /127\.0\.0\.1 is .* class loopback/ },
  { url: () => `http://127.0.0.1.:${port}/`, refused: /127\.0\.0\.1 is .* class loopback/ },
  { url: () => `http://[64:ff9b::7f00:1]:${port}/`, refused: /NAT64 \(RFC 6052\) form of 127\.0\.0\.1, which is loopback/ },
  { url: () => 'http://169.254.169.254/latest/meta-data', refused: /169\.254\.169\.254 is .* class cloud metadata service/ },
  {
    url: () => 'http://metadata.google.internal/computeMetadata/v1/',
    refused: /metadata\.google\.internal is the name of a cloud metadata service/,
  },
  { url: () => 'http://metadata/computeMetadata/v1/', refused: /metadata is the name of a cloud metadata service/ },
  { url: () => 'http://METADATA.Google.Internal./', refused: /metadata\.google\.internal\. is the name of a cloud metadata service/ },
  { url: () => 'http://[fd00:ec2::254]/latest/meta-data', refused: /fd00:ec2::254 is .* class cloud metadata service/ },
  { url: () => 'http://[::ffff:169.254.169.254]/', refused: /form of 169\.254\.169\.254, which is cloud metadata service/ },
  { url: () => 'http://10.0.0.1/', refused: /10\.0\.0\.1 is .* class private \(RFC 1918\)/ },
  { url: () => 'http://172.16.5.4/', refused: /class private \(RFC 1918\)/ },
  { url: () => 'http://192.168.1.1/', refused: /192\.168\.1\.1 is .* class private \(RFC 1918\)/ },
  { url: () => 'http://100.64.0.1/', refused: /100\.64\.0\.1 is .* class carrier-grade NAT \(RFC 6598\)/ },
  { url: () => 'http://169.254.10.1/', refused: /class link-local/ },
  { url: () => 'http://[fe80::1]/', refused: /class link-local/ },
  { url: () => 'http://[fc00::1]/', refused: /class unique-local \(RFC 4193\)/ },
  { url: () => 'http://224.0.0.1/', refused: /class multicast/ },
  { url: () => 'http://[ff02::1]/', refused: /class multicast/ },
  { url: () => 'http://255.255.255.255/', refused: /class broadcast/ },
  { url: () => 'http://240.0.0.1/', refused: /class reserved/ },
  { url: () => 'http://[2002:c0a8:101::1]/', refused: /6to4 \(RFC 3056\) form of 192\.168\.1\.1, which is private/ },
  {
    url: () => 'http://internal.example.test/mcp',
    refused: /internal\.example\.test resolves to 10\.1\.2\.3, which is a special-purpose address, class private/,
  },
  { url: () => 'http://mixed.example.test/mcp', refused: /mixed\.example\.test resolves to 10\.1\.2\.3, which is .* class private/ },
  { url: () => 'file:///etc/passwd', refused: /the scheme file: is not allowed/ },
  { url: () => 'gopher://x/', refused: /the scheme gopher: is not allowed/ },
  { url: () => 'ftp://example.com/', refused: /the scheme ftp: is not allowed/ },
  { url: () => 'data:text/plain,hello', refused: /the scheme data: is not allowed/ },
  {
    url: () => 'http://user:pass@example.com/mcp',
    refused:
      /^upstream URL http:\/\/example\.com\/mcp refused: credentials in the URL are not allowed: put them in a header or a credential/,
    secret: /user|pass/,
  },
  {
    url: () => 'gopher://user:pass@example.com/',
    refused: /^upstream URL gopher:\/\/example\.com\/ refused: the scheme gopher:/,
    secret: /user|pass/,
  },
  { url: () => 'http://user:pass@exa mple.com/', refused: /whitespace/, secret: /user|pass/ },
  { url: () => 'http://public.example.test\\@internal.example.test/', refused: /backslash/ },
  { url: () => 'http://public.example.test/#@internal.example.test', refused: /a fragment \(#\.\.\.\) is not allowed/ },
  { url: () => 'http:///internal.example.test/', refused: /the host must follow the scheme as in http:\/\/host\// },
  { url: () => 'http:internal.example.test', refused: /the host must follow the scheme/ },
  { url: () => '/mcp', refused: /it is not an absolute URL/ },
];

test('with authentication on, every special-purpose destination, odd URL form and non-http scheme is refused before any connection', async () => {
  for (const row of table) {
    const url = row.url();
    const policy = row.policy ?? closed;
    await assert.rejects(checkDestination(url, policy), (error: unknown) => {
      assert.ok(error instanceof PunkError, `${url}: ${String(error)}`);
      assert.equal(error.code, 'EgressRefused', url);
      assert.match(error.message, row.refused, url);
      if (row.secret) assert.doesNotMatch(`${error.message} ${JSON.stringify(error.details)}`, row.secret, 'no userinfo in the error');
      return true;
    });
    const fetchGuarded = guardedFetch(policy);
    await assert.rejects(fetchGuarded(url), (error: unknown) => {
      assert.ok(error instanceof PunkError && error.code === 'EgressRefused', url);
      if (row.secret) assert.doesNotMatch(`${error.message} ${JSON.stringify(error.details)}`, row.secret);
      return true;
    });
    await fetchGuarded.close();
  }
  assert.equal(connections, 0, 'no refused URL reached the loopback server');
});

test('a refusal for a special-purpose address says how to allow it', async () => {
  await assert.rejects(checkDestination('http://10.0.0.1/', closed), {
    message:
      /to allow it, add its network to PUNK_UPSTREAM_ALLOWED_NETWORKS, or, for local development only, turn authentication off \(PUNK_AUTH_MODE=off\)/,
  });
});

test('public destinations pass, and the checked addresses are all those the host resolved to', async () => {
  const byName = await checkDestination('https://public.example.test/mcp', closed);
  assert.equal(byName.hostname, 'public.example.test');
  assert.deepEqual(byName.addresses, names['public.example.test']);
  const literal = await checkDestination('http://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:8080/mcp', closed);
  assert.deepEqual(literal.addresses, [{ address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 }]);
  const nat64 = await checkDestination('http://[64:ff9b::5db8:d70e]/', closed);
  assert.equal(nat64.addresses[0]!.address, '64:ff9b::5db8:d70e', 'NAT64 of a public IPv4 address is public');
});

test('a host that does not resolve is UpstreamUnreachable, not a refusal', async () => {
  await assert.rejects(checkDestination('http://nowhere.example.test/', closed), {
    code: 'UpstreamUnreachable',
    message: /cannot resolve nowhere\.example\.test/,
  });
});

test('open-dev carve-out (allowPrivate, authentication off) reaches 127.0.0.1 but still refuses file:, gopher: and credentials in the URL', async () => {
  const openDev: DestinationPolicy = { allowPrivate: true, allowedNetworks: [] };
  const fetchGuarded = guardedFetch(openDev);
  try {
    const before = connections;
    const response = await fetchGuarded(`http://127.0.0.1:${port}/mcp`);
    assert.equal(await response.text(), 'reached');
    assert.equal(connections, before + 1);
    const metadata = await checkDestination('http://metadata.google.internal/', {
      ...openDev,
      lookup: async () => [{ address: '169.254.169.254', family: 4 }],
    });
    assert.equal(metadata.addresses[0]!.address, '169.254.169.254', 'the carve-out lifts every destination class');
    await assert.rejects(fetchGuarded('file:///etc/passwd'), { code: 'EgressRefused', message: /scheme file:/ });
    await assert.rejects(fetchGuarded('gopher://127.0.0.1:70/'), { code: 'EgressRefused', message: /scheme gopher:/ });
    await assert.rejects(fetchGuarded(`http://user:pass@127.0.0.1:${port}/`), (error: unknown) => {
      assert.ok(error instanceof PunkError && error.code === 'EgressRefused');
      assert.match(error.message, /credentials in the URL are not allowed/);
      assert.doesNotMatch(error.message, /user|pass/);
      return true;
    });
    assert.equal(connections, before + 1, 'the refused URLs did not connect');
  } finally {
    await fetchGuarded.close();
  }
});

test('PUNK_UPSTREAM_ALLOWED_NETWORKS lets a listed network through and nothing else', async () => {
  const allowed: DestinationPolicy = { allowPrivate: false, allowedNetworks: ['127.0.0.0/8', '10.1.0.0/16'], lookup: testLookup };
  const fetchGuarded = guardedFetch(allowed);
  try {
    const response = await fetchGuarded(`http://127.0.0.1:${port}/`);
    assert.equal(await response.text(), 'reached');
    assert.deepEqual((await checkDestination('http://internal.example.test/', allowed)).addresses, [{ address: '10.1.2.3', family: 4 }]);
    assert.ok(await checkDestination('http://[::ffff:10.1.9.9]/', allowed), 'an IPv4-mapped address matches its IPv4 network');
    await assert.rejects(fetchGuarded(`http://[::1]:${port}/`), { code: 'EgressRefused', message: /class loopback/ });
    await assert.rejects(checkDestination('http://10.2.0.1/', allowed), { code: 'EgressRefused' });
  } finally {
    await fetchGuarded.close();
  }
  await assert.rejects(checkDestination('http://10.2.0.1/', { allowPrivate: false, allowedNetworks: ['10.0.0.0/33'] }), {
    code: 'InvalidConfig',
    message: /PUNK_UPSTREAM_ALLOWED_NETWORKS: "10\.0\.0\.0\/33" is not a CIDR/,
  });
});

test('a launched origin (a process Punk started) is reached at exactly that origin; another port or host is refused', async () => {
  const launched: DestinationPolicy = { ...closed, launchedOrigins: [`http://127.0.0.1:${port}`] };
  const fetchGuarded = guardedFetch(launched);
  try {
    assert.equal(await (await fetchGuarded(`http://127.0.0.1:${port}/mcp`)).text(), 'reached');
    await assert.rejects(checkDestination(`http://127.0.0.1:${port + 1}/mcp`, launched), {
      code: 'EgressRefused',
      message: /class loopback/,
    });
    const byName: DestinationPolicy = { ...closedRealDns, launchedOrigins: [`http://127.0.0.1:${port}`] };
    await assert.rejects(
      checkDestination(`http://localhost:${port}/mcp`, byName),
      { code: 'EgressRefused' },
      'a name is resolved and checked',
    );
    await assert.rejects(checkDestination(`http://[::1]:${port}/mcp`, launched), { code: 'EgressRefused' });
    await assert.rejects(checkDestination('http://internal.example.test/', launched), { code: 'EgressRefused' });
  } finally {
    await fetchGuarded.close();
  }
  await assert.rejects(checkDestination(`http://127.0.0.1:${port}/mcp`, closed), { code: 'EgressRefused' }, 'without it, refused');
});

test('checkUrlShape returns the normalized URL of an acceptable one', () => {
  assert.equal(checkUrlShape('HTTPS://Example.COM:443/mcp?x=1').href, 'https://example.com/mcp?x=1');
  assert.equal(checkUrlShape('http://0x7f.1/').hostname, '127.0.0.1', 'shape does not judge the destination');
});
