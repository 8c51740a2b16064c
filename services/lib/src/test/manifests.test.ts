import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadManifestDirectory, parseManifests, transportOf } from '../index.js';

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
    lines.some((l) => /^2 spec.url: set exactly one of image, package and url/.test(l)),
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

test('a streamable-http server that Punk starts needs a port; env entries need exactly one source', () => {
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
  assert.ok(fields.includes('spec.port'), fields.join());
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

test('McpCredential and McpPolicy documents are passed over; an unknown kind of the group is still an error', () => {
  const text = `${good}---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpCredential
metadata: { name: github }
spec: { secretRef: { name: github-token } }
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
`;
  const { servers, errors } = parseManifests(text, 'mixed.yaml', 'default');
  assert.deepEqual(
    servers.map((s) => s.server.metadata.name),
    ['everything'],
  );
  assert.deepEqual(
    errors.map((e) => [e.document, e.field]),
    [[4, 'kind']],
  );
});

test('the example manifests are valid, and the cluster-only ones of examples/cluster are not served', async () => {
  const { servers, errors } = await loadManifestDirectory(join(import.meta.dirname, '../../../../examples'), 'default');
  assert.deepEqual(errors, []);
  assert.deepEqual(servers.map((s) => s.server.metadata.name).sort(), ['everything', 'everything-http', 'filesystem', 'memory']);
});

test('literal header values must be HTTP field values and env values hold no NUL; errors never echo the value', () => {
  const text = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: remote }
spec:
  url: https://mcp.example.com/mcp
  headers:
    - name: Authorization
      value: "Bearer LITSECRET-1\\r\\nX: y"
    - name: X-Tab
      value: "a\\tb"
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: local }
spec:
  command: ["srv"]
  image: x
  env:
    - name: TOKEN
      value: "NULSECRET-2\\0z"
`;
  const { errors } = parseManifests(text, 'm.yaml', 'default');
  const fields = errors.map((e) => e.field);
  assert.deepEqual(fields.sort(), ['spec.env.0.value', 'spec.headers.0.value'], JSON.stringify(errors));
  assert.ok(!JSON.stringify(errors).includes('SECRET'), JSON.stringify(errors));
  assert.match(errors.find((e) => e.field === 'spec.headers.0.value')!.message, /HTTP field value/);
});

test('a manifest may not set the headers Punk sets itself', () => {
  const text = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: remote }
spec:
  url: https://mcp.example.com/mcp
  headers:
    - { name: Mcp-Session-Id, value: forged }
    - { name: content-length, value: "0" }
    - { name: X-Api-Version, value: "2" }
`;
  const { errors } = parseManifests(text, 'm.yaml', 'default');
  assert.deepEqual(errors.map((e) => e.field).sort(), ['spec.headers.0.name', 'spec.headers.1.name']);
  assert.match(errors[0]!.message, /set by Punk itself/);
});

test('protocolEra pins "2025" or "2026"; a bare YAML number and an sse server in 2026 are refused, naming the field', () => {
  const manifest = (name: string, spec: string) => `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: ${name} }
spec:
  image: x
${spec}
`;
  const pinned = parseManifests(manifest('pinned', '  protocolEra: "2026"'), 'pinned.yaml', 'default');
  assert.deepEqual(pinned.errors, []);
  assert.equal(pinned.servers[0]?.server.spec.protocolEra, '2026');
  assert.equal(parseManifests(good, 'x.yaml', 'default').servers[0]?.server.spec.protocolEra, undefined, 'default: the client era');
  const bare = parseManifests(manifest('bare', '  protocolEra: 2026'), 'bare.yaml', 'default').errors;
  assert.deepEqual(
    bare.map((e) => e.field),
    ['spec.protocolEra'],
  );
  assert.match(bare[0]?.message ?? '', /quoted \(in YAML a bare 2026 is a number\)/);
  const sse = parseManifests(
    manifest('old', '  url: https://example.com/sse\n  transport: sse\n  protocolEra: "2026"').replace('  image: x\n', ''),
    'old.yaml',
    'default',
  ).errors;
  assert.deepEqual(
    sse.map((e) => e.field),
    ['spec.protocolEra'],
  );
  assert.match(sse[0]?.message ?? '', /an sse server speaks the 2025 era only/);
});
