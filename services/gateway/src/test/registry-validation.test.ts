/**
 * Registration bodies: every validation error names the field by its path, a valid body becomes the
 * McpServer the gateway serves, and the ledger's copy holds header and env names, never literal values.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { COMMAND_RULE, HTTP_FIELD_VALUE_RULE, PunkError } from '@punk/lib';
import { auditedRegistration, parseRegistration, toMcpServer } from '../registry/registration.js';

const http = { name: 'remote', type: 'http', url: 'https://mcp.example.com/mcp' };
const stdio = { name: 'local', type: 'stdio', command: 'node' };

/** Asserts that `body` is refused with exactly `message`. */
function refuses(body: unknown, message: string, fixedName?: string): void {
  assert.throws(
    () => parseRegistration(body, fixedName),
    (error: unknown) => {
      assert.ok(error instanceof PunkError);
      assert.equal(error.code, 'InvalidRegistration');
      assert.equal(error.message, message);
      return true;
    },
  );
}

test('each invalid registration is refused with a message naming the field', () => {
  const cases: Array<[unknown, string]> = [
    [[], 'body: must be a JSON object'],
    ['text', 'body: must be a JSON object'],
    [{ type: 'http', url: 'https://x.test/mcp' }, 'body.name: required'],
    [{ ...http, name: 'Not_A_Label' }, 'body.name: must be a DNS-1035 label: lower-case letters, digits and -, starting with a letter'],
    [{ name: 'x' }, 'body.type: required'],
    [{ name: 'x', type: 'ftp' }, 'body.type: must be stdio, http or openapi'],
    [{ ...http, foo: 1 }, 'body.foo: unknown field'],
    [{ name: 'x', type: 'http' }, 'body.url: required for an http registration'],
    [{ ...http, url: 'file:///etc/passwd' }, 'body.url: must be an http or https URL'],
    [{ ...http, url: 'gopher://x.test/' }, 'body.url: must be an http or https URL'],
    [{ ...http, url: 'not a url' }, 'body.url: must be an http or https URL'],
    [{ ...http, headers: { 'bad header': 'x' } }, 'body.headers.bad header: must be an HTTP header name (RFC 9110 token)'],
    [{ ...http, headers: { 'X-Key': 42 } }, 'body.headers.X-Key: Invalid input: expected string, received number'],
    [{ ...http, transport: 'stdio' }, 'body.transport: must be streamable-http or sse'],
    [{ ...http, command: 'node' }, 'body.command: applies only to a stdio registration'],
    [{ ...http, env: { A: '1' } }, 'body.env: applies only to a stdio registration'],
    [{ name: 'x', type: 'stdio' }, 'body.command: required for a stdio registration'],
    [{ ...stdio, command: '' }, `body.command: ${COMMAND_RULE}`],
    [{ ...stdio, command: 42 }, `body.command: ${COMMAND_RULE}`],
    [{ ...stdio, command: [] }, `body.command: ${COMMAND_RULE}`],
    [{ ...stdio, command: ['node', ''] }, 'body.command[1]: must be a non-empty string'],
    [{ ...stdio, args: ['ok', 3] }, 'body.args[1]: Invalid input: expected string, received number'],
    [
      { ...stdio, env: { '1BAD': 'x' } },
      'body.env.1BAD: must be an environment variable name (letters, digits and _, not starting with a digit)',
    ],
    [{ ...stdio, url: 'https://x.test/' }, 'body.url: applies only to an http registration'],
    [{ ...stdio, headers: {} }, 'body.headers: applies only to an http registration'],
    [{ ...stdio, tools: { allowed: [] } }, 'body.tools.allowed: unknown field'],
    [
      { ...stdio, tools: { overrides: [{ name: 'x', sideEffectLevel: 9 }] } },
      'body.tools.overrides[0].sideEffectLevel: Too big: expected number to be <=4',
    ],
    [{ ...stdio, tools: { overrides: [{ name: 'x', level: 1 }] } }, 'body.tools.overrides[0].level: unknown field'],
    [{ ...stdio, tools: { pinning: 'warn' } }, 'body.tools.pinning: must be serve, hide or approval'],
    [{ ...stdio, sessionMode: 'private' }, 'body.sessionMode: must be shared or per-client'],
    [
      { ...stdio, timeout: '10 seconds' },
      'body.timeout: must be a duration such as 500ms, 30s, 15m, 1h or 1h30m (whole numbers with units h, m, s or ms)',
    ],
  ];
  for (const [body, message] of cases) refuses(body, message);
});

test('env and header values: no control characters in literal headers, no NUL in env, well-formed cred: references, bounded counts; never echoed', () => {
  const fieldValue =
    'must be a valid HTTP field value (RFC 9110 §5.5): visible ASCII, spaces, tabs and Latin-1 letters; no line break or other control character';
  const reserved = 'is set by Punk itself (connection, framing, content negotiation or MCP protocol header) and cannot be configured';
  const reference = 'a value starting with "cred:" must be cred:<id> or cred:<id>/<key>, the id a DNS label and the key a key name';
  const cases: Array<[unknown, string]> = [
    [{ ...http, headers: { Authorization: 'Bearer PLANTED-crlf-1\r\nX: y' } }, `body.headers.Authorization: ${fieldValue}`],
    [{ ...http, headers: { 'X-Key': 'PLANTED-nul-2\0' } }, `body.headers.X-Key: ${fieldValue}`],
    [{ ...http, headers: { 'X-Key': 'PLANTED-bell-3\x07' } }, `body.headers.X-Key: ${fieldValue}`],
    [{ ...http, headers: { 'X-Key': 'PLANTED-del-4\x7f' } }, `body.headers.X-Key: ${fieldValue}`],
    [{ ...http, headers: { 'X-Key': 'PLANTED-wide-5\u2028' } }, `body.headers.X-Key: ${fieldValue}`],
    [{ ...stdio, env: { TOKEN: 'PLANTED-nul-6\0z' } }, 'body.env.TOKEN: must not contain a NUL character'],
    [
      { ...http, headers: { 'X-Key': 'PLANTED-a', 'x-key': 'PLANTED-b' } },
      'body.headers.x-key: duplicates another header name (header names are case-insensitive)',
    ],
    [{ ...http, headers: { 'X-Key': 'euro-\u20ac' } }, `body.headers.X-Key: ${fieldValue}`],
    [
      { ...http, headers: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`X-H${i}`, 'v'])) },
      'body.headers: holds more than 100 entries',
    ],
    [
      { ...stdio, env: Object.fromEntries(Array.from({ length: 1001 }, (_, i) => [`V${i}`, 'v'])) },
      'body.env: holds more than 1000 entries',
    ],
  ];
  for (const name of [
    'Host',
    'content-length',
    'Transfer-Encoding',
    'Connection',
    'Content-Type',
    'Accept',
    'Mcp-Session-Id',
    'MCP-Protocol-Version',
  ]) {
    cases.push([{ ...http, headers: { [name]: 'x' } }, `body.headers.${name}: ${reserved}`]);
  }
  for (const bad of ['cred:', 'cred:UPPER', 'cred:a/b/c', 'cred:../x']) {
    cases.push([{ ...http, headers: { Authorization: bad } }, `body.headers.Authorization: ${reference}`]);
    cases.push([{ ...stdio, env: { TOKEN: bad } }, `body.env.TOKEN: ${reference}`]);
  }
  for (const [body, message] of cases) refuses(body, message);
  // Accepted: HTAB, obs-text, a line break in an env value (PEM keys), well-formed references.
  parseRegistration({
    ...http,
    headers: { 'X-A': 'a\tb', 'X-B': 'caf\u00e9', Authorization: 'cred:api/token', Cookie: 'session=cred:api' },
  });
  parseRegistration({ ...stdio, env: { PEM: '-----BEGIN KEY-----\nabc\n-----END KEY-----', TOKEN: 'cred:api' } });
});

test('env and headers are a record or, as in a manifest, a list of { name, value | valueFrom }: both register the same server', () => {
  const asRecord = parseRegistration({ ...stdio, env: { MODE: 'fast', TOKEN: 'cred:api/token', KEY: 'cred:api' } });
  const asList = parseRegistration({
    ...stdio,
    env: [
      { name: 'MODE', value: 'fast' },
      { name: 'TOKEN', valueFrom: { credentialRef: { name: 'api', key: 'token' } } },
      { name: 'KEY', value: 'cred:api' },
    ],
  });
  assert.deepEqual(asList, asRecord);
  assert.deepEqual(toMcpServer('acme', asList).spec.env, [
    { name: 'MODE', value: 'fast' },
    { name: 'TOKEN', value: 'cred:api/token' },
    { name: 'KEY', value: 'cred:api' },
  ]);
  const headers = parseRegistration({ ...http, headers: [{ name: 'Authorization', valueFrom: { credentialRef: { name: 'github' } } }] });
  assert.deepEqual(headers.headers, { Authorization: 'cred:github' });

  const cases: Array<[unknown, string]> = [
    [{ ...stdio, env: [{ name: 'A' }] }, 'body.env[0]: set exactly one of value and valueFrom'],
    [{ ...stdio, env: [{ name: 'A', value: 1 }] }, 'body.env[0].value: Invalid input: expected string, received number'],
    [{ ...stdio, env: [{ name: '1A', value: 'x' }] }, 'body.env[0].name: must be an environment variable name'],
    [{ ...stdio, env: [{ name: 'A', value: 'x', from: 'y' }] }, 'body.env[0].from: unknown field'],
    [
      {
        ...stdio,
        env: [
          { name: 'A', value: 'x' },
          { name: 'A', value: 'y' },
        ],
      },
      'body.env[1].name: names the same entry as [0]',
    ],
    [
      { ...stdio, env: [{ name: 'A', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }] },
      'body.env[0].valueFrom.secretKeyRef: the gateway reads no Kubernetes Secret: store the value as a credential and use valueFrom.credentialRef',
    ],
    [
      {
        ...http,
        headers: [
          { name: 'X-A', value: 'x' },
          { name: 'x-a', value: 'y' },
        ],
      },
      'body.headers[1].name: names the same entry as [0]',
    ],
    [{ ...http, headers: [{ name: 'X-A', value: 'a\nb' }] }, `body.headers[0].value: ${HTTP_FIELD_VALUE_RULE}`],
    [{ ...stdio, env: 'A=1' }, 'body.env: Invalid input: expected record, received string'],
  ];
  for (const [body, message] of cases) refuses(body, message);
});

test('an update may omit the name, and may not rename the server', () => {
  assert.equal(parseRegistration({ type: 'stdio', command: 'node' }, 'local').name, 'local');
  refuses({ ...stdio, name: 'other' }, 'body.name: must be "local", the server named in the path (a server cannot be renamed)', 'local');
});

test('an http registration becomes a url McpServer in the tenant namespace, with cred: references kept as given', () => {
  const registration = parseRegistration({
    ...http,
    headers: { Authorization: 'cred:github-token' },
    transport: 'sse',
    tools: { deny: ['drop'], pinning: 'hide' },
    timeout: '5s',
  });
  const server = toMcpServer('acme', registration);
  assert.deepEqual(server.metadata, { name: 'remote', namespace: 'acme' });
  assert.equal(server.spec.url, 'https://mcp.example.com/mcp');
  assert.equal(server.spec.transport, 'sse');
  assert.deepEqual(server.spec.headers, [{ name: 'Authorization', value: 'cred:github-token' }]);
  assert.deepEqual(server.spec.tools, { deny: ['drop'], pinning: 'hide', overrides: [] });
  assert.equal(server.spec.timeout, '5s');
  assert.equal(server.spec.sessionMode, 'shared');
});

test('a stdio registration becomes a local command McpServer', () => {
  const server = toMcpServer(
    'acme',
    parseRegistration({ ...stdio, args: ['server.js'], env: { TOKEN: 'cred:t1', DEBUG: '1' }, sessionMode: 'per-client' }),
  );
  assert.deepEqual(server.spec.command, ['node']);
  assert.deepEqual(server.spec.args, ['server.js']);
  assert.deepEqual(server.spec.env, [
    { name: 'TOKEN', value: 'cred:t1' },
    { name: 'DEBUG', value: '1' },
  ]);
  assert.equal(server.spec.transport, 'stdio');
  assert.equal(server.spec.sessionMode, 'per-client');
  assert.equal(server.spec.url, undefined);
});

test("a stdio registration's command may be a manifest's list: it is stored as sent, and args follow it", () => {
  const registration = parseRegistration({ ...stdio, command: ['node', 'server.js'], args: ['--verbose'] });
  assert.deepEqual(registration.command, ['node', 'server.js']);
  const server = toMcpServer('acme', registration);
  assert.deepEqual(server.spec.command, ['node', 'server.js']);
  assert.deepEqual(server.spec.args, ['--verbose']);
});

test('a tenant that cannot be a namespace is named as such', () => {
  assert.throws(() => toMcpServer('Acme Corp', parseRegistration(http)), {
    code: 'InvalidRegistration',
    message: /^tenant: must be a DNS-1035 label/,
  });
});

test('the ledger copy of a registration keeps names and cred: references, never literal values or URL secrets', () => {
  const audited = auditedRegistration(
    parseRegistration({
      ...http,
      url: 'https://user:pw-in-url@mcp.example.com/mcp?api_key=query-secret#frag',
      headers: { 'X-Api-Key': 'literal-header-secret', Authorization: 'cred:gh' },
    }),
  );
  assert.deepEqual(audited.headers, [{ name: 'X-Api-Key' }, { name: 'Authorization', value: 'cred:gh' }]);
  assert.equal(audited.url, 'https://mcp.example.com/mcp');
  const text = JSON.stringify(audited);
  for (const secret of ['literal-header-secret', 'pw-in-url', 'query-secret'])
    assert.ok(!text.includes(secret), `${secret} is not recorded`);
  const local = auditedRegistration(parseRegistration({ ...stdio, env: { TOKEN: 'literal-env-secret', REF: 'cred:x' } }));
  assert.deepEqual(local.env, [{ name: 'TOKEN' }, { name: 'REF', value: 'cred:x' }]);
});
