import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { createLogger } from '@punk/lib';
import { ToolInputValidator } from '../validate.js';

const validator = new ToolInputValidator(createLogger('test', 'silent'));
const echoSchema = { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] };

describe('tool arguments checked against inputSchema', () => {
  it('accepts matching arguments', () => {
    assert.deepEqual(validator.check('echo', echoSchema, { message: 'hi' }), { ok: true });
  });

  it('names the bad field: wrong type, missing, nested', () => {
    const wrong = validator.check('echo', echoSchema, { message: 42 });
    assert.equal(wrong.ok, false);
    assert.ok(!wrong.ok && wrong.field === 'message' && /field "message" must be string/.test(wrong.message), JSON.stringify(wrong));
    const missing = validator.check('echo', echoSchema, {});
    assert.ok(!missing.ok && missing.field === 'message' && /"message" is required/.test(missing.message));
    const nested = validator.check(
      'deep',
      { type: 'object', properties: { items: { type: 'array', items: { type: 'object', properties: { id: { type: 'integer' } } } } } },
      { items: [{ id: 'x' }] },
    );
    assert.ok(!nested.ok && nested.field === 'items/0/id', JSON.stringify(nested));
  });

  it('uses draft-07 when $schema says so, 2020-12 otherwise', () => {
    const draft7 = { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { a: { type: 'array', items: [{ type: 'string' }] } } };
    assert.equal(validator.check('t7', draft7, { a: [1] }).ok, false, 'draft-07 tuple items apply');
    const v2020 = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { a: { type: 'array', prefixItems: [{ type: 'string' }] } } };
    assert.equal(validator.check('t20', v2020, { a: [1] }).ok, false, '2020-12 prefixItems apply');
    assert.equal(validator.check('t20', v2020, { a: ['x'] }).ok, true);
  });

  it('does not enforce a schema that does not compile', () => {
    assert.deepEqual(validator.check('broken', { type: 'object', properties: { a: { type: 'no-such-type' } } }, { a: 1 }), { ok: true });
  });
});
