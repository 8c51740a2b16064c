import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';
import {
  evaluateExpression,
  expressionSchema,
  formatManifestError,
  formatWorkflowError,
  loadManifestDirectory,
  mcpWorkflowCrd,
  mcpWorkflowSchema,
  parseManifests,
  validateWorkflowCatalog,
  validateWorkflowGraph,
  type CatalogTool,
  type Expression,
  type McpWorkflow,
  type WorkflowCatalog,
} from '../index.js';

const manifest = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata:
  name: summarize-file
spec:
  description: Reads a file and looks its subject up in the memory graph.
  input:
    type: object
    properties: { path: { type: string } }
    required: [path]
  start: read
  nodes:
    - id: read
      kind: tool_call
      next: search
      config:
        server: filesystem
        tool: read_text_file
        args: { path: { kind: ref, path: input.path } }
        saveAs: file
    - id: search
      kind: tool_call
      next: found
      config:
        server: memory
        tool: search_nodes
        args: { query: { kind: template, template: "{{vars.file.content}}" } }
        saveAs: hits
    - id: found
      kind: branch
      next: nothing
      config:
        cases:
          - when: { kind: ne, left: { kind: ref, path: vars.hits.entities }, right: { kind: literal, value: [] } }
            next: summary
    - id: summary
      kind: output
      config:
        value: { kind: object, fields: { path: { kind: ref, path: input.path }, found: { kind: literal, value: true } } }
    - id: nothing
      kind: output
      config:
        value: { kind: object, fields: { path: { kind: ref, path: input.path }, found: { kind: literal, value: false } } }
`;

function workflowOf(text: string): McpWorkflow {
  const { workflows, errors } = parseManifests(text, 'w.yaml', 'team-a');
  assert.deepEqual(errors.map(formatManifestError), []);
  return workflows[0]!.workflow;
}

/** The `spec.nodes` of the example with `edit` applied to a copy. */
function edited(edit: (spec: Record<string, any>) => void): string {
  const object = parse(manifest) as Record<string, any>;
  edit(object.spec);
  return JSON.stringify(object);
}

test('a valid McpWorkflow is loaded with its defaults, its node configs typed by kind', () => {
  const workflow = workflowOf(manifest);
  assert.equal(workflow.metadata.namespace, 'team-a');
  assert.equal(workflow.spec.start, 'read');
  const read = workflow.spec.nodes[0]!;
  assert.equal(read.kind, 'tool_call');
  assert.deepEqual(read.kind === 'tool_call' && read.config.args, { path: { kind: 'ref', path: 'input.path' } });
  assert.deepEqual(validateWorkflowGraph(workflow), []);
});

test('schema errors name the workflow and the field of the node config, by kind', () => {
  const text = edited((spec) => {
    delete spec.nodes[0].config.tool;
    spec.nodes[1].config.args.query = { kind: 'template', template: '{{ env.HOME }}' };
    spec.nodes[2].config.cases[0].when = { kind: 'eval', code: '1' };
    spec.nodes[3].next = 'read';
  });
  const { workflows, errors } = parseManifests(text, 'w.yaml', 'default');
  assert.equal(workflows.length, 0);
  const by = new Map(errors.map((e) => [e.field, e.message]));
  assert.match(by.get('spec.nodes.0.config.tool') ?? '', /^McpWorkflow default\/summarize-file node read: /);
  assert.match(by.get('spec.nodes.1.config.args.query.template') ?? '', /\{\{env\.HOME\}\} is not a path/);
  assert.ok(by.has('spec.nodes.2.config.cases.0.when.kind'), [...by.keys()].join(' '));
  assert.match(by.get('spec.nodes.3.next') ?? '', /an output node ends the run/);
});

test('graph errors: a missing start, unknown targets, duplicate ids, a cycle and an unreachable node, each named', () => {
  const check = (edit: (spec: Record<string, any>) => void) => {
    const { errors } = parseManifests(edited(edit), 'w.yaml', 'default');
    return errors.map((e) => `${e.field}: ${e.message}`);
  };
  assert.deepEqual(
    check((spec) => (spec.start = 'begin')),
    ['spec.start: McpWorkflow default/summarize-file: no node has id begin; known: read, search, found, summary, nothing'],
  );
  assert.deepEqual(
    check((spec) => (spec.nodes[2].config.cases[0].next = 'sumary')),
    ['spec.nodes.2.config.cases.0.next: McpWorkflow default/summarize-file node found: no node has id sumary'],
  );
  assert.deepEqual(
    check((spec) => (spec.nodes[4].id = 'summary')),
    [
      'spec.nodes.4.id: McpWorkflow default/summarize-file node summary: duplicate node id summary',
      'spec.nodes.2.next: McpWorkflow default/summarize-file node found: no node has id nothing',
    ],
  );
  assert.deepEqual(
    check((spec) => (spec.nodes[1].next = 'read')),
    [
      'spec.nodes.1.next: McpWorkflow default/summarize-file node search: going to read makes a cycle: a workflow is a graph without loops, so every run ends',
      'spec.nodes.2: McpWorkflow default/summarize-file node found: not reachable from start node read',
      'spec.nodes.3: McpWorkflow default/summarize-file node summary: not reachable from start node read',
      'spec.nodes.4: McpWorkflow default/summarize-file node nothing: not reachable from start node read',
    ],
  );
  // A diamond (two paths to one node) is not a cycle.
  assert.deepEqual(
    check((spec) => (spec.nodes[2].next = 'summary')),
    ['spec.nodes.4: McpWorkflow default/summarize-file node nothing: not reachable from start node read'],
  );
});

test('the catalog check names an unknown server, an unknown tool, a missing and an undeclared argument', () => {
  const workflow = workflowOf(manifest);
  const catalog: WorkflowCatalog = new Map<string, ReadonlyMap<string, CatalogTool>>([
    ['filesystem', new Map([['read_text_file', { inputSchema: { type: 'object', properties: { path: {} }, required: ['path'] } }]])],
    ['memory', new Map([['search_nodes', { inputSchema: { type: 'object', properties: { query: {} }, required: ['query'] } }]])],
  ]);
  assert.deepEqual(validateWorkflowCatalog(workflow, catalog), []);
  const strict: WorkflowCatalog = new Map<string, ReadonlyMap<string, CatalogTool>>([
    ['filesystem', new Map([['read_file', {}]])],
    [
      'memory',
      new Map([
        [
          'search_nodes',
          {
            inputSchema: {
              type: 'object',
              properties: { q: {}, limit: { type: 'integer' } },
              required: ['q'],
              additionalProperties: false,
            },
          },
        ],
      ]),
    ],
  ]);
  assert.deepEqual(validateWorkflowCatalog(workflow, strict).map(formatWorkflowError), [
    'McpWorkflow team-a/summarize-file node read spec.nodes.0.config.tool: McpServer filesystem has no tool read_text_file; it has: read_file',
    'McpWorkflow team-a/summarize-file node search spec.nodes.1.config.args: tool search_nodes requires argument q',
    'McpWorkflow team-a/summarize-file node search spec.nodes.1.config.args.query: tool search_nodes takes no argument query; it takes: q, limit',
  ]);
  const typed = workflowOf(
    manifest.replace('args: { query:', 'args: { limit: { kind: literal, value: "5" }, q: { kind: literal, value: x }, query:'),
  );
  assert.deepEqual(
    validateWorkflowCatalog(typed, strict)
      .filter((e) => e.node === 'search')
      .map((e) => `${e.field}: ${e.message}`),
    [
      'spec.nodes.1.config.args.limit.value: tool search_nodes takes integer for limit, not string',
      'spec.nodes.1.config.args.query: tool search_nodes takes no argument query; it takes: q, limit',
    ],
  );
  assert.deepEqual(
    validateWorkflowCatalog(workflow, new Map()).map((e) => e.field),
    ['spec.nodes.0.config.server', 'spec.nodes.1.config.server'],
  );
});

test('expressions: literal, template, ref, object, comparisons and booleans; a missing path is an error naming it', () => {
  const env = { input: { topic: 'cats', n: 3 }, vars: { issues: { items: [{ title: 'first' }], total: 1 } } };
  const run = (expression: unknown) => evaluateExpression(expressionSchema.parse(expression), env);
  const ref = (path: string): Expression => ({ kind: 'ref', path });
  const lit = (value: unknown) => ({ kind: 'literal', value });
  assert.equal(run(lit(5)), 5);
  assert.equal(
    run({ kind: 'template', template: '{{input.topic}} label:bug, {{ vars.issues.items.0.title }} of {{vars.issues.total}}' }),
    'cats label:bug, first of 1',
  );
  assert.equal(run({ kind: 'template', template: 'all: {{vars.issues.items}}' }), 'all: [{"title":"first"}]');
  assert.deepEqual(run(ref('vars.issues.items.0')), { title: 'first' });
  assert.deepEqual(run({ kind: 'object', fields: { topic: ref('input.topic'), one: lit(1) } }), { topic: 'cats', one: 1 });
  assert.equal(run({ kind: 'eq', left: ref('vars.issues.items'), right: lit([{ title: 'first' }]) }), true);
  assert.equal(run({ kind: 'ne', left: ref('input.topic'), right: lit('cats') }), false);
  assert.equal(run({ kind: 'lt', left: ref('input.n'), right: lit(4) }), true);
  assert.equal(run({ kind: 'ge', left: lit('b'), right: lit('a') }), true);
  assert.equal(run({ kind: 'exists', path: 'vars.nothing.here' }), false);
  assert.equal(run({ kind: 'exists', path: 'vars.issues.items.0.title' }), true);
  assert.equal(
    run({
      kind: 'and',
      operands: [
        { kind: 'exists', path: 'input.n' },
        { kind: 'not', operand: { kind: 'gt', left: ref('input.n'), right: lit(9) } },
      ],
    }),
    true,
  );
  // or stops at the first true operand: the missing path after it is never read.
  assert.equal(run({ kind: 'or', operands: [lit(true), ref('vars.missing')] }), true);
  assert.throws(() => run(ref('vars.issues.items.3')), { code: 'WorkflowExpression', message: /vars\.issues\.items\.3 is not set/ });
  assert.throws(() => run({ kind: 'template', template: 'x {{input.nope}}' }), /input\.nope is not set/);
  assert.throws(() => run({ kind: 'lt', left: lit('1'), right: lit(2) }), /lt compares two numbers or two strings, not "1" and 2/);
  assert.throws(() => run({ kind: 'and', operands: [lit(1)] }), /and takes true or false, not 1/);
  // Nothing but the IR: no other kind, no path outside input and vars.
  assert.equal(expressionSchema.safeParse({ kind: 'code', source: 'process.exit()' }).success, false);
  assert.equal(expressionSchema.safeParse({ kind: 'ref', path: 'process.env' }).success, false);
  assert.equal(expressionSchema.safeParse({ kind: 'ref', path: 'vars.a', extra: 1 }).success, false);
});

test('the McpWorkflow CRD accepts the example with the same defaults as zod and refuses a node without kind', () => {
  const crd = mcpWorkflowCrd() as Record<string, any>;
  assert.equal(crd.metadata.name, 'mcpworkflows.mcp.punk.dev');
  assert.deepEqual(crd.spec.names.shortNames, ['mcpwf']);
  const ajv = new Ajv({ strict: false, allErrors: true, useDefaults: true });
  (addFormats as unknown as (ajv: Ajv) => void)(ajv);
  const strip = (node: unknown): unknown =>
    Array.isArray(node)
      ? node.map(strip)
      : typeof node === 'object' && node !== null
        ? Object.fromEntries(
            Object.entries(node)
              .filter(([k]) => !k.startsWith('x-kubernetes-'))
              .map(([k, v]) => [k, strip(v)]),
          )
        : node;
  const validate = ajv.compile(strip(crd.spec.versions[0].schema.openAPIV3Schema) as object);
  const object = parse(manifest) as Record<string, any>;
  assert.ok(validate(object), JSON.stringify(validate.errors));
  assert.deepEqual(
    object.spec.nodes.map((n: { config: unknown }) => n.config),
    mcpWorkflowSchema.parse(object).spec.nodes.map((n) => n.config),
  );
  assert.equal(object.spec.description, mcpWorkflowSchema.parse(object).spec.description);
  const bad = parse(manifest) as Record<string, any>;
  delete bad.spec.nodes[0].kind;
  assert.equal(validate(bad), false);
  assert.ok(validate.errors!.some((e) => e.instancePath === '/spec/nodes/0' && e.params.missingProperty === 'kind'));
});

test('a manifest directory yields its workflows beside its servers; a second workflow of the same name is an error', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'punk-workflows-'));
  try {
    const server =
      'apiVersion: mcp.punk.dev/v1alpha1\nkind: McpServer\nmetadata: { name: memory }\nspec: { package: { name: "@modelcontextprotocol/server-memory" } }\n';
    await writeFile(join(dir, 'a.yaml'), `${server}---\n${manifest}`);
    await writeFile(join(dir, 'b.yaml'), manifest);
    await writeFile(join(dir, 'c.yaml'), edited((spec) => (spec.start = 'nope')).replace('summarize-file', 'broken'));
    const { servers, workflows, errors } = await loadManifestDirectory(dir, 'default');
    assert.deepEqual(
      servers.map((s) => s.server.metadata.name),
      ['memory'],
    );
    assert.deepEqual(
      workflows.map((w) => [w.workflow.metadata.name, w.file.endsWith('a.yaml'), w.document]),
      [['summarize-file', true, 2]],
    );
    assert.equal(errors.length, 2, JSON.stringify(errors));
    assert.ok(errors.some((e) => e.file.endsWith('b.yaml') && e.field === 'metadata.name' && /already defined/.test(e.message)));
    assert.ok(errors.some((e) => e.file.endsWith('c.yaml') && e.field === 'spec.start' && /McpWorkflow default\/broken/.test(e.message)));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
