import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { COMMAND_RULE, loadManifestDirectory, parseManifests, transportOf } from '../index.js';

const good = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata:
  name: everything
spec:
  package: { name: "@modelcontextprotocol/server-everything" }
  args: ["stdio"]
`;

test('a valid manifest gets its defaults', () => {
  const { servers, errors } = parseManifests(good, 'x.yaml', 'default');
  assert.deepEqual(errors, []);
  const server = servers[0]!.server;
  assert.equal(server.metadata.namespace, 'default');
  assert.equal(server.spec.package?.registry, 'npm');
  assert.equal(transportOf(server.spec), 'stdio');
  assert.equal(server.spec.sessionMode, 'shared');
  // No spec.timeout: the call deadline is PUNK_CALL_TIMEOUT_MS, on the gateway and on the front alike.
  assert.equal(server.spec.timeout, undefined);
});

test('a command is a list or, as the registration API takes it, the executable alone: read as a one-element list', () => {
  const manifest = (command: string) => `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: local }
spec:
  command: ${command}
  args: [server.mjs]
`;
  const one = parseManifests(manifest('node'), 'x.yaml', 'default');
  assert.deepEqual(one.errors, []);
  assert.deepEqual(one.servers[0]!.server.spec.command, ['node']);
  assert.deepEqual(one.servers[0]!.server.spec.args, ['server.mjs']);
  const list = parseManifests(manifest('[node, --no-warnings]'), 'x.yaml', 'default');
  assert.deepEqual(list.servers[0]!.server.spec.command, ['node', '--no-warnings']);
  const refused: Array<[string, string]> = [
    ['""', `spec.command: ${COMMAND_RULE}`],
    ['[]', `spec.command: ${COMMAND_RULE}`],
    ['42', `spec.command: ${COMMAND_RULE}`],
    ['{ run: node }', `spec.command: ${COMMAND_RULE}`],
    ['[node, ""]', 'spec.command.1: must be a non-empty string'],
  ];
  for (const [bad, message] of refused) {
    const { servers, errors } = parseManifests(manifest(bad), 'x.yaml', 'default');
    assert.deepEqual(servers, [], bad);
    assert.deepEqual(
      errors.map((e) => `${e.field}: ${e.message}`),
      [message],
      bad,
    );
  }
});

test('errors name the file, document and field, and valid documents are kept', () => {
  const text = `${good}---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: two }
spec:
  image: ghcr.io/x/y
  url: https://example.com/mcp
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: three }
spec:
  command: ["x"]
  package: { name: p }
  transport: streamable-http
  surprise: true
---
apiVersion: v1
kind: ConfigMap
metadata: { name: cm }
---
- just
- a list
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: four }
spec:
  url: ftp://example.com/
`;
  const { servers, errors } = parseManifests(text, 'many.yaml', 'default');
  assert.deepEqual(
    servers.map((s) => s.server.metadata.name),
    ['everything'],
  );
  const lines = errors.map((e) => `${e.document} ${e.field}: ${e.message}`);
  assert.ok(
    lines.some((l) => /^2 spec.url: set exactly one of image, package, url and openapi/.test(l)),
    lines.join('\n'),
  );
  assert.ok(
    lines.some((l) => /^3 spec: Unrecognized key: "surprise"/.test(l) || /^3 spec.*surprise/.test(l)),
    lines.join('\n'),
  );
  assert.ok(
    lines.some((l) => /^4 kind: expected apiVersion mcp\.punk\.dev\/v1alpha1 and kind McpServer/.test(l)),
    lines.join('\n'),
  );
  assert.ok(
    lines.some((l) => /^5 \(document\): a manifest must be a mapping/.test(l)),
    lines.join('\n'),
  );
  assert.ok(
    lines.some((l) => /^6 spec\.url: must be an http or https URL/.test(l)),
    lines.join('\n'),
  );
  assert.ok(errors.every((e) => e.file === 'many.yaml'));
});

test('a streamable-http server that Punk starts may leave its port out; env entries need exactly one source', () => {
  const text = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: web }
spec:
  command: ["srv"]
  image: x
  transport: streamable-http
  env:
    - name: A
    - name: B
      value: b
      valueFrom: { secretKeyRef: { name: s, key: k } }
`;
  const { errors } = parseManifests(text, 'web.yaml', 'default');
  const fields = errors.map((e) => e.field);
  assert.ok(!fields.includes('spec.port'), `punk up picks a port: ${fields.join()}`);
  assert.ok(fields.includes('spec.env.0'), fields.join());
  assert.ok(fields.includes('spec.env.1'), fields.join());
});

test('a directory load reads every yaml file, reports YAML errors and duplicate names', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'punk-manifests-'));
  try {
    await writeFile(join(dir, 'a.yaml'), good);
    await writeFile(join(dir, 'b.yml'), good);
    await writeFile(join(dir, 'c.yaml'), 'key: [unclosed');
    await writeFile(join(dir, 'notes.txt'), 'ignored');
    const { servers, errors } = await loadManifestDirectory(dir, 'team-a');
    assert.equal(servers.length, 1);
    assert.equal(servers[0]!.server.metadata.namespace, 'team-a');
    assert.ok(errors.some((e) => e.file.endsWith('b.yml') && e.field === 'metadata.name' && /already defined/.test(e.message)));
    assert.ok(errors.some((e) => e.file.endsWith('c.yaml') && /^YAML/.test(e.message)));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("a directory load reads subdirectories, and leaves out dot directories (state, such as punk up's .punk/)", async () => {
  const dir = await mkdtemp(join(tmpdir(), 'punk-manifests-'));
  try {
    await mkdir(join(dir, 'team/servers'), { recursive: true });
    await mkdir(join(dir, '.punk/data'), { recursive: true });
    await writeFile(join(dir, 'team/servers/a.yaml'), good);
    // A copy in a dot directory would be a duplicate name if it were read.
    await writeFile(join(dir, '.punk/data/a.yaml'), good);
    const { servers, errors } = await loadManifestDirectory(dir, 'team-a');
    assert.deepEqual(errors, []);
    assert.deepEqual(
      servers.map((s) => s.file.slice(s.file.indexOf('team'))),
      ['team/servers/a.yaml'],
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('McpCredential and McpPolicy documents are loaded beside McpServers; an unknown kind of the group is an error', () => {
  const text = `${good}---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpCredential
metadata: { name: github }
spec: { values: [{ key: token, valueFrom: { env: GITHUB_TOKEN } }] }
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpPolicy
metadata: { name: baseline }
spec: {}
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpGadget
metadata: { name: g }
spec: {}
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpCredential
metadata: { name: both }
spec: { values: [{ key: a, valueFrom: { env: A, file: a.txt } }] }
`;
  const { servers, policies, credentials, errors } = parseManifests(text, 'mixed.yaml', 'default');
  assert.deepEqual(
    servers.map((s) => s.server.metadata.name),
    ['everything'],
  );
  assert.deepEqual(
    policies.map((p) => [p.object.metadata.namespace, p.object.metadata.name, p.document]),
    [['default', 'baseline', 3]],
  );
  assert.deepEqual(
    credentials.map((c) => [c.object.metadata.name, c.document]),
    [['github', 2]],
  );
  assert.deepEqual(
    errors.map((e) => [e.document, e.field, e.message]),
    [
      [
        4,
        'kind',
        'expected apiVersion mcp.punk.dev/v1alpha1 and kind McpServer, McpPolicy or McpCredential (got "mcp.punk.dev/v1alpha1" "McpGadget")',
      ],
      [5, 'spec.values.0.valueFrom', 'set exactly one of env and file'],
    ],
  );
});

test('the example manifests are valid: the servers and the policy of examples/ (cluster-examples/ is not under it)', async () => {
  const { servers, policies, credentials, errors } = await loadManifestDirectory(
    join(import.meta.dirname, '../../../../examples'),
    'default',
  );
  assert.deepEqual(errors, []);
  assert.deepEqual(servers.map((s) => s.server.metadata.name).sort(), [
    'everything',
    'everything-http',
    'filesystem',
    'memory',
    'petstore',
  ]);
  // The OpenAPI document beside its manifest is not read as a manifest, and its path is made absolute.
  const petstore = servers.find((s) => s.server.metadata.name === 'petstore')!.server;
  assert.equal(petstore.spec.openapi?.file, join(import.meta.dirname, '../../../../examples/openapi/petstore-openapi.yaml'));
  assert.deepEqual(
    policies.map((p) => p.object.spec.rules.map((r) => r.decision)),
    [['deny', 'deny', 'approval_required', 'allow']],
  );
  assert.deepEqual(credentials, []);
});

test('auth.tokenExchange is read on an HTTP server, and refused on a stdio or openapi server and without an audience', () => {
  const server = (name: string, source: string, tokenExchange: string) => `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: ${name} }
spec:
  ${source}
  auth: { tokenExchange: ${tokenExchange} }
`;
  const { servers, errors } = parseManifests(
    [
      server('hr', 'url: https://hr.example.com/mcp', '{ audience: https://hr.example.com }'),
      server('local', 'command: [node, server.mjs]', '{ audience: https://local.example.com }'),
      server('rest', 'openapi: { content: "{}" }', '{ audience: https://rest.example.com }'),
      server('nobody', 'url: https://nobody.example.com/mcp', '{ scopes: [read] }'),
    ].join('---\n'),
    'servers.yaml',
    'default',
  );
  assert.deepEqual(
    servers.map(({ server }) => [server.metadata.name, server.spec.auth]),
    [['hr', { tokenExchange: { audience: 'https://hr.example.com', scopes: [] } }]],
  );
  const rule = 'auth applies only to servers Punk reaches over HTTP: a url server, or transport streamable-http or sse';
  assert.deepEqual(
    errors.filter((e) => e.field === 'spec.auth').map((e) => e.message),
    [rule, rule],
  );
  assert.ok(
    errors.some((e) => e.field === 'spec.auth.tokenExchange.audience'),
    errors.map((e) => `${e.field}: ${e.message}`).join('; '),
  );
});

test('auth.perUser is read with its defaults; with tokenExchange too, or a clientSecret that is no cred: reference, it is refused naming the field', () => {
  const perUser = (extra: string) =>
    `{ provider: github, authorizationUrl: https://gh.example/authorize, tokenUrl: https://gh.example/token, clientId: punk${extra} }`;
  const server = (name: string, auth: string) => `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: ${name} }
spec:
  url: https://${name}.example.com/mcp
  auth: ${auth}
`;
  const { servers, errors } = parseManifests(
    [
      server('gh', `{ perUser: ${perUser(', clientSecret: cred:gh-app')} }`),
      server('both', `{ perUser: ${perUser('')}, tokenExchange: { audience: https://both.example.com } }`),
      server('literal', `{ perUser: ${perUser(', clientSecret: hunter2')} }`),
    ].join('---\n'),
    'servers.yaml',
    'default',
  );
  assert.deepEqual(
    servers.map(({ server }) => [server.metadata.name, server.spec.auth]),
    [
      [
        'gh',
        {
          perUser: {
            provider: 'github',
            authorizationUrl: 'https://gh.example/authorize',
            tokenUrl: 'https://gh.example/token',
            clientId: 'punk',
            clientSecret: 'cred:gh-app',
            scopes: [],
          },
        },
      ],
    ],
  );
  const messages = errors.map((e) => `${e.field}: ${e.message}`);
  assert.ok(messages.includes('spec.auth: auth.tokenExchange and auth.perUser exclude each other: declare one'), messages.join('; '));
  assert.ok(
    messages.includes('spec.auth.perUser.clientSecret: must be a credential reference cred:<id> or cred:<id>/<key>'),
    messages.join('; '),
  );
});
