/**
 * `Mcp-Param-*` header checks of 2026-07-28 tools/call (param-headers.ts), on the cases of the spec's
 * "Value Encoding" table and the conformance suite's SEP-2243 server checks.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { paramHeaderMismatch } from '../param-headers.js';

const schema = {
  type: 'object',
  properties: {
    region: { type: 'string', 'x-mcp-header': 'Region' },
    count: { type: 'integer', 'x-mcp-header': 'Count' },
    dry: { type: 'boolean', 'x-mcp-header': 'Dry' },
    target: { type: 'object', properties: { zone: { type: 'string', 'x-mcp-header': 'Zone' } } },
    query: { type: 'string' },
  },
};
const b64 = (text: string) => `=?base64?${Buffer.from(text, 'utf8').toString('base64')}?=`;

describe('Mcp-Param-* headers against tools/call arguments', () => {
  it('accepts plain and Base64 values equal to the arguments, nested paths, integers and booleans', () => {
    const args = { region: 'us-west1', count: 42, dry: false, target: { zone: 'Hello, 世界' }, query: 'SELECT 1' };
    const headers = {
      'mcp-param-region': 'us-west1',
      'mcp-param-count': '42',
      'mcp-param-dry': 'false',
      'mcp-param-zone': b64('Hello, 世界'),
    };
    assert.equal(paramHeaderMismatch(headers, schema, args), undefined);
    assert.equal(paramHeaderMismatch({ 'mcp-param-region': b64(' padded ') }, schema, { region: ' padded ' }), undefined);
  });

  it('treats a value without the whole =?base64?…?= wrapper as literal', () => {
    const encoded = Buffer.from('Hello').toString('base64');
    assert.equal(paramHeaderMismatch({ 'mcp-param-region': encoded }, schema, { region: encoded }), undefined);
    assert.equal(paramHeaderMismatch({ 'mcp-param-region': `=?base64?${encoded}` }, schema, { region: `=?base64?${encoded}` }), undefined);
  });

  it('refuses a missing header, a different value, malformed Base64 and characters a header may not carry', () => {
    assert.match(paramHeaderMismatch({}, schema, { region: 'eu' })?.message ?? '', /Mcp-Param-Region is missing/);
    assert.match(
      paramHeaderMismatch({ 'mcp-param-region': 'us' }, schema, { region: 'eu' })?.message ?? '',
      /is "us" but the body's arguments.region is "eu"/,
    );
    assert.deepEqual(paramHeaderMismatch({ 'mcp-param-count': '41' }, schema, { count: 42 })?.mismatch, {
      name: 'Mcp-Param-Count',
      header: '41',
      field: 'arguments.count',
      body: 42,
    });
    assert.match(paramHeaderMismatch({ 'mcp-param-zone': 'a' }, schema, { target: { zone: 'b' } })?.message ?? '', /arguments.target.zone/);
    for (const bad of ['=?base64?SGVsbG8?=', '=?base64?SGVs!!!bG8=?=', 'caf\u00e9']) {
      assert.match(
        paramHeaderMismatch({ 'mcp-param-region': bad }, schema, { region: 'Hello' })?.message ?? '',
        /malformed Base64|may not carry/,
        bad,
      );
    }
    assert.match(paramHeaderMismatch({ 'mcp-param-region': ['a', 'a'] }, schema, { region: 'a' })?.message ?? '', /repeated/);
  });

  it('expects no header for an absent or null argument, and ignores tools without annotations', () => {
    assert.equal(paramHeaderMismatch({}, schema, { query: 'x' }), undefined);
    assert.equal(paramHeaderMismatch({}, schema, { region: null }), undefined);
    assert.equal(
      paramHeaderMismatch({ 'mcp-param-region': 'x' }, { type: 'object', properties: { region: { type: 'string' } } }, { region: 'y' }),
      undefined,
    );
  });
});
