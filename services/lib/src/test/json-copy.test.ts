/**
 * The in-process bus's payload copy: the same value a JSON round trip gives (what the NATS bus delivers), sharing
 * nothing with the original, and the same refusals.
 */
import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { PunkError } from '../errors.js';
import { copyJsonValue } from '../bus/json-copy.js';

const wire = (value: unknown): unknown => JSON.parse(JSON.stringify(value)) as unknown;

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}

test('a copy equals what the wire delivers, for every kind of value', () => {
  const deep: Record<string, unknown> = {};
  let at = deep;
  for (let i = 0; i < 100; i++) at = (at['next'] = { i }) as Record<string, unknown>;
  const values: unknown[] = [
    'text',
    0,
    -1.5,
    true,
    null,
    [],
    {},
    { a: 1, b: [1, 'two', { three: 3 }], c: { d: null } },
    { missing: undefined, fn: () => 1, sym: Symbol('s'), kept: 1 },
    [undefined, () => 1, Symbol('s'), NaN, Infinity, 2],
    // eslint-disable-next-line no-sparse-arrays
    [1, , 3],
    { when: new Date(0), point: new Point(1, 2), boxed: new String('s'), map: new Map([[1, 2]]) },
    { custom: { toJSON: () => 'custom' } },
    JSON.parse('{"__proto__": {"polluted": true}, "x": 1}'),
    Object.assign(Object.create(null), { bare: true }),
    deep,
  ];
  for (const value of values) assert.deepStrictEqual(copyJsonValue(value), wire(value), JSON.stringify(value));
  const proto = copyJsonValue(JSON.parse('{"__proto__": {"polluted": true}}')) as Record<string, unknown>;
  assert.equal(Object.getPrototypeOf(proto), Object.prototype, 'an own __proto__ property does not become the prototype');
  assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
});

test('a copy shares nothing with the original', () => {
  const original = { list: [{ n: 1 }], nested: { deeper: { n: 2 } } };
  const copy = copyJsonValue(original) as typeof original;
  copy.list[0]!.n = 99;
  copy.nested.deeper.n = 99;
  copy.list.push({ n: 3 });
  assert.deepEqual(original, { list: [{ n: 1 }], nested: { deeper: { n: 2 } } });
});

test('what has no JSON form is refused as the wire refuses it', () => {
  for (const value of [undefined, () => 1, Symbol('s')]) {
    assert.throws(
      () => copyJsonValue(value),
      (e: PunkError) => e.code === 'BusInvalidPayload',
    );
  }
  const cycle: Record<string, unknown> = {};
  cycle['self'] = cycle;
  assert.throws(() => copyJsonValue(cycle), TypeError);
  assert.throws(() => copyJsonValue({ big: 1n }), TypeError);
});
