import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { createLogger } from '@punk/lib';
import { excessOf, SCHEMA_BOUNDS, ToolSchemaValidator } from '../validate.js';

const validator = new ToolSchemaValidator(createLogger('test', 'silent'));
const echoSchema = { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] };

describe('tool arguments checked against inputSchema', () => {
  it('accepts matching arguments', () => {
    assert.deepEqual(validator.checkInput('echo', echoSchema, { message: 'hi' }), { ok: true });
  });

  it('names the bad field: wrong type, missing, nested', () => {
    const wrong = validator.checkInput('echo', echoSchema, { message: 42 });
    assert.equal(wrong.ok, false);
    assert.ok(!wrong.ok && wrong.field === 'message' && /field "message" must be string/.test(wrong.message), JSON.stringify(wrong));
    const missing = validator.checkInput('echo', echoSchema, {});
    assert.ok(!missing.ok && missing.field === 'message' && /"message" is required/.test(missing.message));
    const nested = validator.checkInput(
      'deep',
      { type: 'object', properties: { items: { type: 'array', items: { type: 'object', properties: { id: { type: 'integer' } } } } } },
      { items: [{ id: 'x' }] },
    );
    assert.ok(!nested.ok && nested.field === 'items/0/id', JSON.stringify(nested));
  });

  it('uses draft-07 when $schema says so, 2020-12 otherwise', () => {
    const draft7 = {
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      properties: { a: { type: 'array', items: [{ type: 'string' }] } },
    };
    assert.equal(validator.checkInput('t7', draft7, { a: [1] }).ok, false, 'draft-07 tuple items apply');
    const v2020 = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: { a: { type: 'array', prefixItems: [{ type: 'string' }] } },
    };
    assert.equal(validator.checkInput('t20', v2020, { a: [1] }).ok, false, '2020-12 prefixItems apply');
    assert.equal(validator.checkInput('t20', v2020, { a: ['x'] }).ok, true);
  });

  it('resolves $ref to $defs (2020-12) and definitions (draft-07), recursion included', () => {
    const tree = {
      type: 'object',
      properties: { root: { $ref: '#/$defs/node' } },
      $defs: {
        node: {
          type: 'object',
          properties: { value: { type: 'integer' }, children: { type: 'array', items: { $ref: '#/$defs/node' } } },
          required: ['value'],
        },
      },
    };
    assert.equal(validator.checkInput('tree', tree, { root: { value: 1, children: [{ value: 2, children: [] }] } }).ok, true);
    const bad = validator.checkInput('tree', tree, { root: { value: 1, children: [{ value: 'two' }] } });
    assert.ok(!bad.ok && bad.field === 'root/children/0/value', JSON.stringify(bad));
    const draft7 = {
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      properties: { a: { $ref: '#/definitions/s' } },
      definitions: { s: { type: 'string' } },
    };
    assert.equal(validator.checkInput('d7', draft7, { a: 1 }).ok, false);
  });

  it('two tools may reuse one $id', () => {
    const a = { $id: 'https://example.com/args', type: 'object', properties: { x: { type: 'string' } } };
    const b = { $id: 'https://example.com/args', type: 'object', properties: { x: { type: 'integer' } } };
    assert.equal(validator.checkInput('a', a, { x: 1 }).ok, false);
    assert.equal(validator.checkInput('b', b, { x: 1 }).ok, true);
  });

  it('does not enforce a schema that does not compile, or one with an unresolvable $ref', () => {
    assert.deepEqual(validator.checkInput('broken', { type: 'object', properties: { a: { type: 'no-such-type' } } }, { a: 1 }), {
      ok: true,
    });
    assert.deepEqual(
      validator.checkInput('remote', { type: 'object', properties: { a: { $ref: 'https://example.com/elsewhere.json' } } }, { a: 1 }),
      { ok: true },
    );
  });

  it('bounds composition: schemas past the limits are not enforced', () => {
    const wide = { anyOf: Array.from({ length: SCHEMA_BOUNDS.maxBranches + 1 }, (_, i) => ({ const: i })) };
    assert.match(excessOf(wide) ?? '', /anyOf has 65 branches/);
    assert.deepEqual(validator.checkInput('wide', wide, { not: 'a number' }), { ok: true });
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < SCHEMA_BOUNDS.maxDepth; i++) deep = { type: 'object', properties: { a: deep } };
    assert.match(excessOf(deep) ?? '', /nests deeper than 32/);
    const many = { allOf: Array.from({ length: 20 }, () => ({ oneOf: Array.from({ length: 30 }, (_, i) => ({ const: i })) })) };
    assert.match(excessOf(many) ?? '', /more than 512 branches together/);
    const within = { type: 'object', properties: { a: { anyOf: [{ type: 'string' }, { type: 'integer' }] } } };
    assert.equal(excessOf(within), undefined);
    assert.equal(validator.checkInput('within', within, { a: true }).ok, false);
  });

  it('runs patterns on RE2: a catastrophic-backtracking pattern answers at once', () => {
    const schema = { type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } };
    const started = Date.now();
    assert.equal(validator.checkInput('redos', schema, { s: `${'a'.repeat(100_000)}!` }).ok, false);
    assert.equal(validator.checkInput('redos', schema, { s: 'aaaa' }).ok, true);
    assert.ok(Date.now() - started < 2_000, `took ${Date.now() - started} ms`);
    const props = { type: 'object', patternProperties: { '^x-\\d+$': { type: 'integer' } } };
    assert.equal(validator.checkInput('pp', props, { 'x-1': 'no' }).ok, false);
    assert.equal(validator.checkInput('pp', props, { 'x-1': 1, other: 'yes' }).ok, true);
    const lookahead = { type: 'object', properties: { s: { type: 'string', pattern: '^(?=a)a$' } } };
    assert.deepEqual(validator.checkInput('lookahead', lookahead, { s: 'b' }), { ok: true }, 'syntax RE2 lacks: not enforced');
  });
});

describe('structuredContent checked against outputSchema', () => {
  const outputSchema = { type: 'object', properties: { total: { type: 'number' } }, required: ['total'] };

  it('accepts a conforming result and skips error results', () => {
    assert.deepEqual(validator.checkOutput('sum', outputSchema, { content: [], structuredContent: { total: 3 } }), { ok: true });
    assert.deepEqual(validator.checkOutput('sum', outputSchema, { content: [], isError: true }), { ok: true });
    assert.deepEqual(validator.checkOutput('sum', undefined, { content: [] }), { ok: true });
  });

  it('refuses a missing or mismatching structuredContent, naming the field', () => {
    const missing = validator.checkOutput('sum', outputSchema, { content: [] });
    assert.ok(!missing.ok && /has no structuredContent/.test(missing.message));
    const wrong = validator.checkOutput('sum', outputSchema, { content: [], structuredContent: { total: 'three' } });
    assert.ok(!wrong.ok && wrong.field === 'total' && /does not match its outputSchema/.test(wrong.message), JSON.stringify(wrong));
  });
});
