import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse as parseCel } from '@marcbachmann/cel-js';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { parse, parseAllDocuments } from 'yaml';
import {
  mcpCredentialCrd,
  mcpCredentialSchema,
  mcpCredentialSpecSchema,
  mcpPolicyCrd,
  mcpPolicySchema,
  mcpPolicySpecSchema,
  mcpServerCrd,
  mcpWorkflowCrd,
  mcpWorkflowSchema,
  mcpWorkflowSpecSchema,
  mcpServerSchema,
  mcpServerSpecSchema,
  renderCrds,
  structuralSchema,
  type JsonSchemaProps,
  MCPSERVER_CRD_FILE,
} from '../index.js';
import { z } from 'zod';

const root = join(import.meta.dirname, '../../../..');
const crd = mcpServerCrd();
const schemaOf = (definition: JsonSchemaProps) =>
  (definition.spec as { versions: { schema: { openAPIV3Schema: JsonSchemaProps } }[] }).versions[0]!.schema.openAPIV3Schema;
const openAPIV3Schema = schemaOf(crd);
const crds = { McpServer: crd, McpCredential: mcpCredentialCrd(), McpPolicy: mcpPolicyCrd(), McpWorkflow: mcpWorkflowCrd() };

/** Every schema node with its path (`spec.env[].name`), depth first. */
function* nodes(node: JsonSchemaProps, path = ''): Generator<[string, JsonSchemaProps]> {
  yield [path, node];
  for (const [name, child] of Object.entries((node.properties ?? {}) as Record<string, JsonSchemaProps>))
    yield* nodes(child, path ? `${path}.${name}` : name);
  if (node.items !== undefined) yield* nodes(node.items as JsonSchemaProps, `${path}[]`);
  if (typeof node.additionalProperties === 'object') yield* nodes(node.additionalProperties as JsonSchemaProps, `${path}.*`);
}

/** The CRD schema as plain OpenAPI v3 / JSON Schema for Ajv: the `x-kubernetes-*` extensions removed. */
function withoutKubernetesExtensions(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutKubernetesExtensions);
  if (typeof node !== 'object' || node === null) return node;
  return Object.fromEntries(
    Object.entries(node)
      .filter(([key]) => !key.startsWith('x-kubernetes-'))
      .map(([key, value]) => [key, withoutKubernetesExtensions(value)]),
  );
}

/** An Ajv validator of whole objects of a CRD (McpServer by default) that fills in defaults, as the API server does. */
function objectValidator(schema: JsonSchemaProps = openAPIV3Schema): ValidateFunction {
  const ajv = new Ajv({ strict: false, allErrors: true, useDefaults: true });
  (addFormats as unknown as (ajv: Ajv) => void)(ajv);
  return ajv.compile(withoutKubernetesExtensions(schema) as object);
}

test('the committed crds/ are what the schema in code generates', async () => {
  const rendered = renderCrds();
  const committed = (await readdir(join(root, 'crds'))).filter((file) => file.endsWith('.yaml')).sort();
  assert.deepEqual(
    committed,
    [...rendered.keys()].sort(),
    'crds/ holds other files than `npm run crds` writes: run `npm run crds` and commit crds/',
  );
  for (const [file, text] of rendered) {
    const onDisk = await readFile(join(root, 'crds', file), 'utf8');
    assert.ok(
      onDisk === text,
      `crds/${file} differs from services/lib/src/spec/mcpserver.ts: run \`npm run crds\` and commit crds/${file}`,
    );
  }
  assert.equal(
    renderCrds().get(MCPSERVER_CRD_FILE),
    rendered.get(MCPSERVER_CRD_FILE),
    'two renderings differ: the output is not deterministic',
  );
});

test('the McpServer CRD names, scope, subresources (status, scale) and printer columns', () => {
  const spec = crd.spec as Record<string, any>;
  assert.equal((crd.metadata as { name: string }).name, 'mcpservers.mcp.punk.dev');
  assert.equal(spec.group, 'mcp.punk.dev');
  assert.deepEqual(spec.names, {
    kind: 'McpServer',
    listKind: 'McpServerList',
    plural: 'mcpservers',
    singular: 'mcpserver',
    shortNames: ['mcps'],
  });
  assert.equal(spec.scope, 'Namespaced');
  const [version] = spec.versions;
  assert.deepEqual([version.name, version.served, version.storage], ['v1alpha1', true, true]);
  assert.deepEqual(version.subresources, {
    status: {},
    scale: { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.replicas', labelSelectorPath: '.status.selector' },
  });
  assert.deepEqual(
    version.additionalPrinterColumns.map((c: { name: string; jsonPath: string }) => [c.name.toUpperCase(), c.jsonPath]),
    [
      ['READY', '.status.conditions[?(@.type=="Ready")].status'],
      ['TRANSPORT', '.spec.transport'],
      ['TOOLS', '.status.toolCount'],
      ['ENDPOINT', '.status.endpoint'],
      ['AGE', '.metadata.creationTimestamp'],
    ],
  );
  const conditions = (openAPIV3Schema.properties as any).status.properties.conditions;
  assert.equal(conditions['x-kubernetes-list-type'], 'map');
  assert.deepEqual(conditions['x-kubernetes-list-map-keys'], ['type']);
  assert.deepEqual(conditions.items.required, ['type', 'status', 'lastTransitionTime', 'reason', 'message']);
});

test('every schema is structural and every field has kubectl explain text', () => {
  for (const [kind, definition] of Object.entries(crds)) assertStructural(kind, schemaOf(definition));
});

function assertStructural(kind: string, openAPIV3Schema: JsonSchemaProps): void {
  const forbidden = [
    '$ref',
    '$schema',
    '$defs',
    'definitions',
    'dependencies',
    'patternProperties',
    'propertyNames',
    'additionalItems',
    'anyOf',
    'oneOf',
    'allOf',
    'not',
    'const',
    'id',
  ];
  for (const [path, node] of nodes(openAPIV3Schema)) {
    const where = `${kind} ${path || '<root>'}`;
    assert.ok(
      node.type !== undefined || node['x-kubernetes-preserve-unknown-fields'] === true,
      `${where} has neither a type nor x-kubernetes-preserve-unknown-fields`,
    );
    for (const keyword of forbidden) assert.ok(!(keyword in node), `${where} has ${keyword}, which a structural schema forbids`);
    assert.ok(
      node.additionalProperties !== false,
      `${where} has additionalProperties: false (the API server prunes unknown fields instead)`,
    );
    assert.ok(
      !(node.properties !== undefined && node.additionalProperties !== undefined),
      `${where} has both properties and additionalProperties`,
    );
    assert.ok(node.uniqueItems !== true, `${where} has uniqueItems: true`);
    if (path.startsWith('spec.') || path.startsWith('status.')) {
      const isItem = path.endsWith('[]');
      assert.ok(isItem || typeof node.description === 'string', `${where} has no description for kubectl explain`);
    }
  }
}

test('every cross-field rule of the zod schema has its CEL rule, with a message', () => {
  const rules = [...nodes(openAPIV3Schema)].flatMap(([path, node]) =>
    ((node['x-kubernetes-validations'] ?? []) as { rule: string; message: string; fieldPath?: string }[]).map((r) => ({ path, ...r })),
  );
  for (const r of rules) assert.ok(r.message.length > 0, `${r.path}: rule ${r.rule} has no message`);
  const at = (path: string) => rules.filter((r) => r.path === path).map((r) => r.fieldPath ?? r.message);
  assert.deepEqual(at('spec'), [
    'set exactly one of image, package, url and openapi: in the cluster a server runs from an image or a package (command alone runs a local process under punk up only)',
    '.command',
    '.args',
    '.transport',
    '.headers',
    '.command',
    '.args',
    '.transport',
    '.port',
    '.protocolEra',
  ]);
  assert.deepEqual(at('spec.openapi'), ['set exactly one of url, file, content and configMapKeyRef', '.refreshInterval']);
  assert.deepEqual(at('spec.openapi.refreshInterval'), ['must be at least 5s: the document is fetched again that often']);
  assert.deepEqual(at('spec.openapi.url'), ['must be an http or https URL']);
  assert.deepEqual(at('spec.openapi.baseUrl'), ['must be an http or https URL']);
  assert.deepEqual(at('spec.env[]'), ['set exactly one of value and valueFrom']);
  assert.deepEqual(at('spec.headers[]'), ['set exactly one of value and valueFrom']);
  assert.deepEqual(at('spec.sandbox.egress[]'), ['set exactly one of host and cidr']);
  assert.deepEqual(at('spec.url'), ['must be an http or https URL']);
  assert.deepEqual(at(''), ['.metadata.name', '.metadata.name', '.metadata.name']);
});

test('the McpServer name rules of the CRD and of mcpServerSchema refuse the same names, at metadata.name', () => {
  const objectRules = openAPIV3Schema['x-kubernetes-validations'] as { rule: string; fieldPath?: string }[];
  const long = (n: number) => `s${'a'.repeat(n - 1)}`;
  // [name, spec, refused]
  const cases: [string, Record<string, unknown>, boolean][] = [
    ['files', { image: 'x' }, false],
    [long(63), { image: 'x' }, false],
    ['files-egress', { image: 'x' }, true],
    ['files-egress-a', { image: 'x' }, false],
    [long(56), { package: { name: 'p' } }, false],
    [long(57), { package: { name: 'p' } }, true],
    [long(57), { image: 'x', sandbox: { egress: [{ cidr: '10.0.0.0/8' }, { host: 'a.example' }] } }, true],
    [long(57), { image: 'x', sandbox: { egress: [{ cidr: '10.0.0.0/8' }] } }, false],
  ];
  for (const [name, spec, refused] of cases) {
    const manifest = { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpServer', metadata: { name }, spec };
    const zod = mcpServerSchema.safeParse(manifest);
    assert.equal(
      !zod.success && zod.error.issues.some((issue) => issue.path.join('.') === 'metadata.name'),
      refused,
      `zod, ${name}: ${JSON.stringify(spec)}`,
    );
    if (!zod.success)
      assert.deepEqual(
        zod.error.issues.map((issue) => issue.path.join('.')),
        ['metadata.name'],
      );
    const failing = objectRules.filter((r) => parseCel(r.rule)({ self: manifest }) !== true);
    assert.equal(failing.length > 0, refused, `CEL, ${name}: ${JSON.stringify(spec)}`);
    for (const r of failing) assert.equal(r.fieldPath, '.metadata.name');
  }
});

test('the example manifests validate against the CRD schema, with the defaults zod gives them', async () => {
  const validate = objectValidator();
  const dir = join(root, 'examples');
  const files = (await readdir(dir)).filter((file) => file.endsWith('.yaml'));
  assert.ok(files.length >= 4, `only ${files.length} examples`);
  for (const file of files) {
    const manifest = parse(await readFile(join(dir, file), 'utf8')) as { kind: string; spec: unknown };
    if (manifest.kind !== 'McpServer') continue; // policies.yaml: checked with the cluster examples below
    const parsed = mcpServerSpecSchema.parse(manifest.spec);
    assert.ok(validate(manifest), `examples/${file}: ${JSON.stringify(validate.errors)}`);
    assert.deepEqual(manifest.spec, parsed, `examples/${file}: the CRD's defaults differ from zod's`);
  }
});

test('the CRD schema refuses what the OpenAPI part of the zod schema refuses, naming the field', () => {
  const validate = objectValidator();
  const manifest = (spec: unknown, name = 'bad') => ({ apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpServer', metadata: { name }, spec });
  const cases: [unknown, string][] = [
    [{ image: 'x', transport: 'websocket' }, '/spec/transport'],
    [{ image: 'x', port: 70000 }, '/spec/port'],
    [{ package: { registry: 'cargo', name: 'x' } }, '/spec/package/registry'],
    [{ image: 'x', env: [{ name: '1BAD', value: 'x' }] }, '/spec/env/0/name'],
    [{ image: 'x', timeout: 'soon' }, '/spec/timeout'],
    [{ image: 'x', path: 'mcp' }, '/spec/path'],
    [{ image: 'x', tools: { overrides: [{ name: 't', sideEffectLevel: 5 }] } }, '/spec/tools/overrides/0/sideEffectLevel'],
  ];
  for (const [spec, field] of cases) {
    assert.equal(mcpServerSpecSchema.safeParse(spec).success, false, `zod accepts ${JSON.stringify(spec)}`);
    assert.equal(validate(manifest(spec)), false, `the CRD schema accepts ${JSON.stringify(spec)}`);
    assert.ok(
      validate.errors!.some((e) => e.instancePath === field),
      `${JSON.stringify(spec)}: ${JSON.stringify(validate.errors)}`,
    );
  }
});

/**
 * The CEL rules of the schema that fail for `value` at `node`, as `path: message`, checked the way the
 * API server does: each rule on the node it sits on, with `self` the (defaulted) value there. Rules that
 * use the Kubernetes URL library (`isURL`, `url`), which plain CEL lacks, are left to the API server.
 */
function celFailures(node: JsonSchemaProps, value: unknown, path: string): string[] {
  if (value === undefined) return [];
  const failures: string[] = [];
  for (const { rule, message, fieldPath } of (node['x-kubernetes-validations'] ?? []) as {
    rule: string;
    message: string;
    fieldPath?: string;
  }[]) {
    if (/\burl\(|\bisURL\(/.test(rule)) continue;
    if (parseCel(rule)({ self: value }) !== true) failures.push(`${path}${fieldPath ?? ''}: ${message}`);
  }
  if (Array.isArray(value) && node.items !== undefined)
    value.forEach((item, i) => failures.push(...celFailures(node.items as JsonSchemaProps, item, `${path}[${i}]`)));
  else if (typeof value === 'object' && value !== null && node.properties !== undefined) {
    for (const [name, child] of Object.entries(node.properties as Record<string, JsonSchemaProps>))
      failures.push(...celFailures(child, (value as Record<string, unknown>)[name], `${path}.${name}`));
  }
  return failures;
}

test('the CEL rules accept and refuse the same specs as the zod superRefine, naming the same field', () => {
  const specSchema = (openAPIV3Schema.properties as Record<string, JsonSchemaProps>).spec!;
  const secret = { secretKeyRef: { name: 'tok', key: 'token' } };
  // [spec, the field zod and the CRD both name, or undefined for a valid spec]
  const cases: [Record<string, unknown>, string | undefined][] = [
    [{ image: 'ghcr.io/x/y' }, undefined],
    [{ package: { name: 'p' }, transport: 'streamable-http', port: 8080 }, undefined],
    [{ url: 'https://example.com/mcp', transport: 'sse', headers: [{ name: 'Authorization', valueFrom: secret }] }, undefined],
    [
      {
        image: 'x',
        env: [
          { name: 'A', value: 'a' },
          { name: 'B', valueFrom: secret },
        ],
        sandbox: { egress: [{ host: 'example.com' }, { cidr: '10.0.0.0/8', ports: [443] }] },
      },
      undefined,
    ],
    [{ openapi: { url: 'https://example.com/openapi.json', refreshInterval: '30s' } }, undefined],
    [{ openapi: { url: 'https://example.com/openapi.json', refreshInterval: '4s' } }, 'spec.openapi.refreshInterval'],
    [{ openapi: { configMapKeyRef: { name: 'doc', key: 'openapi.yaml' }, refreshInterval: '1m' } }, 'spec.openapi.refreshInterval'],
    [{}, 'spec'],
    [{ transport: 'stdio' }, 'spec'],
    [{ image: 'x', package: { name: 'p' } }, 'spec'],
    [{ image: 'x', url: 'https://example.com/mcp' }, 'spec'],
    [{ url: 'https://example.com/mcp', command: ['srv'] }, 'spec.command'],
    [{ url: 'https://example.com/mcp', transport: 'stdio' }, 'spec.transport'],
    [{ image: 'x', headers: [{ name: 'Authorization', value: 'Bearer x' }] }, 'spec.headers'],
    [{ image: 'x', transport: 'streamable-http' }, undefined],
    [{ package: { name: 'p' }, transport: 'sse' }, undefined],
    [{ image: 'x', env: [{ name: 'A' }] }, 'spec.env[0]'],
    [
      {
        image: 'x',
        env: [
          { name: 'A', value: 'a' },
          { name: 'B', value: 'b', valueFrom: secret },
        ],
      },
      'spec.env[1]',
    ],
    [{ url: 'https://example.com/mcp', headers: [{ name: 'X-Key' }] }, 'spec.headers[0]'],
    [{ image: 'x', sandbox: { egress: [{ host: 'example.com', cidr: '10.0.0.0/8' }] } }, 'spec.sandbox.egress[0]'],
    [{ image: 'x', sandbox: { egress: [{ ports: [443] }] } }, 'spec.sandbox.egress[0]'],
  ];
  const validate = objectValidator();
  for (const [spec, field] of cases) {
    const zod = mcpServerSpecSchema.safeParse(spec);
    const defaulted = structuredClone(spec);
    assert.ok(
      validate({ apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpServer', metadata: { name: 'x' }, spec: defaulted }),
      `${JSON.stringify(spec)}: ${JSON.stringify(validate.errors)}`,
    );
    const cel = celFailures(specSchema, defaulted, 'spec');
    if (field === undefined) {
      assert.ok(zod.success, `zod refuses ${JSON.stringify(spec)}: ${zod.error?.message}`);
      assert.deepEqual(cel, [], `the CRD refuses ${JSON.stringify(spec)}`);
      continue;
    }
    assert.ok(!zod.success, `zod accepts ${JSON.stringify(spec)}`);
    const zodFields = zod.error.issues.map((issue) =>
      issue.path.reduce<string>((at, step) => (typeof step === 'number' ? `${at}[${step}]` : `${at}.${String(step)}`), 'spec'),
    );
    const celFields = cel.map((failure) => failure.slice(0, failure.indexOf(':')));
    assert.ok(
      celFields.includes(field),
      `the CRD does not refuse ${JSON.stringify(spec)} at ${field}: ${cel.join('; ') || 'no CEL failure'}`,
    );
    // zod names the second source where the CRD names the spec, as it has no single field to blame.
    assert.ok(
      zodFields.includes(field) || (field === 'spec' && zodFields.every((f) => /^spec(\.(image|package|url))?$/.test(f))),
      `zod names ${zodFields.join(', ')}, not ${field}, for ${JSON.stringify(spec)}`,
    );
  }
});

test('command alone is a local process: zod (punk up) accepts it, the CRD (the cluster) refuses it saying an image is needed', () => {
  const specSchema = (openAPIV3Schema.properties as Record<string, JsonSchemaProps>).spec!;
  const spec = { command: ['node', 'server.mjs'] };
  assert.ok(mcpServerSpecSchema.safeParse(spec).success);
  assert.deepEqual(celFailures(specSchema, spec, 'spec'), [
    'spec: set exactly one of image, package, url and openapi: in the cluster a server runs from an image or a package (command alone runs a local process under punk up only)',
  ]);
  const none = mcpServerSpecSchema.safeParse({ args: ['x'] });
  assert.equal(
    none.error?.issues[0]?.message,
    'set exactly one of image, package, url and openapi (found none), or only command for a local process under punk up',
  );
});

test('a schema with no structural form is refused, naming the field', () => {
  const refused = (schema: z.ZodType, message: RegExp) =>
    assert.throws(() => structuralSchema(schema), { name: 'PunkError', code: 'UnsupportedSchema', message });
  refused(
    z.object({ spec: z.object({ either: z.union([z.object({ a: z.string() }), z.object({ b: z.string() })]) }) }),
    /^\.spec\.either: JSON Schema keyword "anyOf"/,
  );
  refused(
    z.object({ spec: z.object({ either: z.union([z.string(), z.number()]) }) }),
    /^\.spec\.either: a Kubernetes structural schema has one type per node, not string or number/,
  );
  refused(z.object({ anything: z.unknown() }), /^\.anything: a Kubernetes structural schema needs a type on every node/);
});

test('the McpCredential and McpPolicy CRDs: names, subresource, printer columns, conditions and named lists', () => {
  const columns = (definition: JsonSchemaProps) =>
    ((definition.spec as any).versions[0].additionalPrinterColumns as { name: string; type: string; jsonPath: string }[]).map((c) => [
      c.name.toUpperCase(),
      c.type,
      c.jsonPath,
    ]);
  const credential = crds.McpCredential.spec as Record<string, any>;
  assert.equal((crds.McpCredential.metadata as { name: string }).name, 'mcpcredentials.mcp.punk.dev');
  assert.deepEqual(credential.names, {
    kind: 'McpCredential',
    listKind: 'McpCredentialList',
    plural: 'mcpcredentials',
    singular: 'mcpcredential',
    shortNames: ['mcpcred'],
  });
  assert.deepEqual(columns(crds.McpCredential), [
    ['TYPE', 'string', '.spec.type'],
    ['SECRET', 'string', '.spec.secretRef.name'],
    ['READY', 'string', '.status.conditions[?(@.type=="Ready")].status'],
    ['EXPIRES', 'date', '.status.expiresAt'],
    ['AGE', 'date', '.metadata.creationTimestamp'],
  ]);
  const policy = crds.McpPolicy.spec as Record<string, any>;
  assert.equal((crds.McpPolicy.metadata as { name: string }).name, 'mcppolicies.mcp.punk.dev');
  assert.deepEqual(policy.names, {
    kind: 'McpPolicy',
    listKind: 'McpPolicyList',
    plural: 'mcppolicies',
    singular: 'mcppolicy',
    shortNames: ['mcppol'],
  });
  assert.deepEqual(columns(crds.McpPolicy), [
    ['PRIORITY', 'integer', '.spec.priority'],
    ['RULES', 'integer', '.status.ruleCount'],
    ['READY', 'string', '.status.conditions[?(@.type=="Ready")].status'],
    ['AGE', 'date', '.metadata.creationTimestamp'],
  ]);
  for (const definition of [credential, policy]) {
    assert.equal(definition.scope, 'Namespaced');
    assert.deepEqual(definition.versions[0].subresources, { status: {} });
    const conditions = definition.versions[0].schema.openAPIV3Schema.properties.status.properties.conditions;
    assert.deepEqual([conditions['x-kubernetes-list-type'], conditions['x-kubernetes-list-map-keys']], ['map', ['type']]);
  }
  // Unique names are the API server's list-map check: the key must be required in every item.
  const spec = policy.versions[0].schema.openAPIV3Schema.properties.spec.properties;
  for (const list of ['rules', 'rateLimits']) {
    assert.deepEqual([spec[list]['x-kubernetes-list-type'], spec[list]['x-kubernetes-list-map-keys']], ['map', ['name']], list);
    assert.ok(spec[list].items.required.includes('name'), `${list}[].name is required`);
  }
  assert.equal(spec.priority.default, 100);
});

/** The McpCredential and McpPolicy documents of cluster-examples/ and examples/, with the file they come from. */
async function clusterExamples(): Promise<{ file: string; object: { kind: string; spec: unknown } }[]> {
  const out: { file: string; object: { kind: string; spec: unknown } }[] = [];
  for (const dir of ['cluster-examples', 'examples']) {
    for (const file of (await readdir(join(root, dir))).filter((name) => name.endsWith('.yaml')).sort()) {
      for (const doc of parseAllDocuments(await readFile(join(root, dir, file), 'utf8'))) {
        const object = doc.toJS() as { kind: string; spec: unknown };
        if (object.kind !== 'McpServer') out.push({ file: `${dir}/${file}`, object });
      }
    }
  }
  return out;
}

test('the McpCredential, McpPolicy and McpWorkflow examples validate against their CRD and zod, with the same defaults', async () => {
  const examples = await clusterExamples();
  assert.deepEqual([...new Set(examples.map((e) => e.object.kind))].sort(), ['McpCredential', 'McpPolicy', 'McpWorkflow']);
  const validators = {
    McpCredential: objectValidator(schemaOf(crds.McpCredential)),
    McpPolicy: objectValidator(schemaOf(crds.McpPolicy)),
    McpWorkflow: objectValidator(schemaOf(crds.McpWorkflow)),
  };
  const schemas = { McpCredential: mcpCredentialSchema, McpPolicy: mcpPolicySchema, McpWorkflow: mcpWorkflowSchema };
  for (const { file, object } of examples) {
    const kind = object.kind as keyof typeof validators;
    const parsed = schemas[kind].parse(object);
    const validate = validators[kind];
    assert.ok(validate(object), `${file}: ${JSON.stringify(validate.errors)}`);
    assert.deepEqual(object.spec, parsed.spec, `${file}: the CRD's defaults differ from zod's`);
    assert.deepEqual(celFailures(schemaOf(crds[kind]), object, ''), [], file);
  }
});

/** Checks that the CRD of `kind` (OpenAPI part and CEL rules) refuses `spec` where zod does, at `field`; or accepts it as zod does. */
function agree(kind: 'McpCredential' | 'McpPolicy', spec: Record<string, unknown>, field: string | undefined): void {
  const zodSchema = kind === 'McpCredential' ? mcpCredentialSpecSchema : mcpPolicySpecSchema;
  const schema = schemaOf(crds[kind]);
  const validate = objectValidator(schema);
  const zod = zodSchema.safeParse(spec);
  const object = { apiVersion: 'mcp.punk.dev/v1alpha1', kind, metadata: { name: 'x' }, spec: structuredClone(spec) };
  const openApi = validate(object);
  const cel = openApi ? celFailures((schema.properties as Record<string, JsonSchemaProps>).spec!, object.spec, 'spec') : [];
  const what = `${kind} ${JSON.stringify(spec)}`;
  if (field === undefined) {
    assert.ok(zod.success, `zod refuses ${what}: ${zod.error?.message}`);
    assert.ok(openApi, `the CRD schema refuses ${what}: ${JSON.stringify(validate.errors)}`);
    assert.deepEqual(cel, [], `the CRD's rules refuse ${what}`);
    return;
  }
  assert.ok(!zod.success, `zod accepts ${what}`);
  const zodFields = zod.error.issues.map((issue) =>
    issue.path.reduce<string>((at, step) => (typeof step === 'number' ? `${at}[${step}]` : `${at}.${String(step)}`), 'spec'),
  );
  assert.ok(zodFields.includes(field), `zod names ${zodFields.join(', ')}, not ${field}, for ${what}`);
  const crdFields = openApi
    ? cel.map((failure) => failure.slice(0, failure.indexOf(':')))
    : validate.errors!.map((e) =>
        e.instancePath
          .replace(/^\//, '')
          .replace(/\/(\d+)/g, '[$1]')
          .replaceAll('/', '.'),
      );
  assert.ok(crdFields.includes(field), `the CRD does not refuse ${what} at ${field}: ${crdFields.join('; ') || 'no failure'}`);
}

test('the McpCredential CRD accepts and refuses the same specs as zod, naming the same field', () => {
  agree('McpCredential', { secretRef: { name: 'tok' } }, undefined);
  agree(
    'McpCredential',
    {
      type: 'oauth2',
      secretRef: { name: 'tok', keys: ['access_token', 'refresh_token'] },
      oauth2: { tokenUrl: 'https://auth.example.com/token', scopes: ['a'] },
    },
    undefined,
  );
  agree('McpCredential', { type: 'static', secretRef: { name: 'tok' }, oauth2: { clientId: 'c' } }, 'spec.oauth2');
  agree('McpCredential', { secretRef: { name: 'tok' }, oauth2: {} }, 'spec.oauth2');
  agree('McpCredential', { type: 'oauth2', secretRef: { name: 'Bad_Name' } }, 'spec.secretRef.name');
  agree('McpCredential', { type: 'kerberos', secretRef: { name: 'tok' } }, 'spec.type');
  agree('McpCredential', { secretRef: { name: 'tok', keys: [] } }, 'spec.secretRef.keys');
  // Under punk up: values from environment variables and files, instead of a Secret.
  agree(
    'McpCredential',
    {
      values: [
        { key: 'token', valueFrom: { env: 'TOKEN' } },
        { key: 'b', valueFrom: { file: 'b.txt' } },
      ],
    },
    undefined,
  );
  agree('McpCredential', {}, 'spec.secretRef');
  agree('McpCredential', { secretRef: { name: 'tok' }, values: [{ key: 'a', valueFrom: { env: 'A' } }] }, 'spec.secretRef');
  agree('McpCredential', { values: [{ key: 'a', valueFrom: { env: 'A', file: 'a' } }] }, 'spec.values[0].valueFrom');
  agree('McpCredential', { values: [{ key: 'a', valueFrom: {} }] }, 'spec.values[0].valueFrom');
  agree('McpCredential', { values: [{ key: 'a', valueFrom: { env: '1BAD' } }] }, 'spec.values[0].valueFrom.env');
});

test('the McpPolicy CRD accepts and refuses the same specs as zod, naming the same field', () => {
  agree('McpPolicy', {}, undefined);
  agree(
    'McpPolicy',
    {
      priority: 5,
      rules: [
        { name: 'a', sideEffectLevels: { min: 2, max: 2 }, decision: 'deny' },
        { name: 'b', decision: 'allow' },
      ],
      rateLimits: [{ name: 'a', requests: 5, per: '1m' }],
    },
    undefined,
  );
  agree(
    'McpPolicy',
    {
      rules: [
        { name: 'a', decision: 'allow' },
        { name: 'b', sideEffectLevels: { min: 3, max: 1 }, decision: 'deny' },
      ],
    },
    'spec.rules[1].sideEffectLevels',
  );
  agree('McpPolicy', { rules: [{ name: 'a', sideEffectLevels: { min: 5 }, decision: 'deny' }] }, 'spec.rules[0].sideEffectLevels.min');
  agree('McpPolicy', { rules: [{ name: 'a', decision: 'maybe' }] }, 'spec.rules[0].decision');
  agree('McpPolicy', { priority: 1001 }, 'spec.priority');
  agree('McpPolicy', { rateLimits: [{ name: 'r', requests: 0, per: '1m' }] }, 'spec.rateLimits[0].requests');
  agree('McpPolicy', { rateLimits: [{ name: 'r', requests: 1, per: 'a minute' }] }, 'spec.rateLimits[0].per');
  // A repeated name: zod names the second item; the API server's list-map check refuses it (see the named-lists test).
  const duplicate = mcpPolicySpecSchema.safeParse({
    rules: [
      { name: 'a', decision: 'allow' },
      { name: 'a', decision: 'deny' },
    ],
  });
  assert.deepEqual(
    duplicate.error?.issues.map((i) => [i.path.join('.'), i.message]),
    [['rules.1.name', 'duplicate name a']],
  );
});

test('the McpWorkflow CRD refuses at apply what CEL can check: start naming no node, an output node with next; nodes keyed by id', () => {
  const schema = schemaOf(crds.McpWorkflow);
  const spec = (schema.properties as Record<string, JsonSchemaProps>).spec!;
  assert.deepEqual(
    [
      (spec.properties as Record<string, JsonSchemaProps>).nodes!['x-kubernetes-list-type'],
      (spec.properties as Record<string, JsonSchemaProps>).nodes!['x-kubernetes-list-map-keys'],
    ],
    ['map', ['id']],
  );
  const validate = objectValidator(schema);
  const output = { id: 'done', kind: 'output', config: { value: { kind: 'literal', value: 1 } } };
  const failures = (workflowSpec: Record<string, unknown>) => {
    const object = { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpWorkflow', metadata: { name: 'w' }, spec: workflowSpec };
    assert.ok(validate(object), JSON.stringify(validate.errors));
    return celFailures(spec, object.spec, 'spec');
  };
  const good = { start: 'done', nodes: [output] };
  assert.deepEqual(failures(good), []);
  assert.ok(mcpWorkflowSpecSchema.safeParse(good).success);
  assert.deepEqual(failures({ start: 'nope', nodes: [output] }), ['spec.start: start must be the id of a node']);
  const withNext = { start: 'done', nodes: [{ ...output, next: 'done' }] };
  assert.deepEqual(failures(withNext), ['spec.nodes[0].next: an output node ends the run: remove next']);
  assert.deepEqual(
    mcpWorkflowSpecSchema.safeParse(withNext).error?.issues.map((i) => i.path.join('.')),
    ['nodes.0.next'],
  );
});
