import { PunkError } from '../errors.js';
import { encodePayload } from './bus.js';

/** Past this depth a value is copied by a JSON round trip, which also reports a cycle as JSON.stringify does. */
const MAX_WALK_DEPTH = 64;

/**
 * A copy of `value` equal to `JSON.parse(JSON.stringify(value))`, what a payload becomes on the wire, made without
 * the text in between: plain objects and arrays are walked (a property whose value is undefined, a function or a
 * symbol is left out; in an array it becomes null; a number that is not finite becomes null), anything else that
 * is an object (a Date, a class instance, an object with `toJSON`) and anything deeper than 64 levels takes the
 * JSON round trip. The in-process bus copies every request, reply and broadcast this way so that sender and
 * receiver share nothing by reference, at a fraction of the round trip's cost (bench/in-process-bus.mjs).
 * The copy is checked against `limit` UTF-8 bytes of its JSON, as `encodePayload` checks a payload: the walk sums an
 * upper bound of that size (6 bytes per UTF-16 unit of a string, an escape's worst case, and 24 per other value), and
 * only a payload whose bound passes the limit is measured exactly.
 * @throws PunkError `BusInvalidPayload` when `value` itself has no JSON form (undefined, a function, a symbol),
 *   `PayloadTooLarge` (naming `what`) past `limit`; TypeError as JSON.stringify throws it, for a BigInt or a cycle.
 */
export function copyJsonValue(value: unknown, limit = Number.POSITIVE_INFINITY, what = 'the payload'): unknown {
  const size = { bound: 0 };
  const copy = walk(value, 0, size);
  if (copy === undefined) throw new PunkError('BusInvalidPayload', 'bus payload must be a JSON value');
  if (size.bound > limit) encodePayload(copy, limit, what);
  return copy;
}

/** The copy of `value`, or undefined where JSON would leave the value out; adds its size bound to `size`. */
function walk(value: unknown, depth: number, size: { bound: number }): unknown {
  if (value === null || typeof value !== 'object') {
    size.bound += typeof value === 'string' ? value.length * 6 + 2 : 24;
    switch (typeof value) {
      case 'number':
        return Number.isFinite(value) ? value : null;
      case 'undefined':
      case 'function':
      case 'symbol':
        return undefined;
      case 'bigint':
        return JSON.stringify(value); // throws, as on the wire
      default:
        return value; // string, boolean, null
    }
  }
  if (depth >= MAX_WALK_DEPTH) return roundTrip(value, size);
  if (Array.isArray(value)) {
    const out: unknown[] = new Array<unknown>(value.length);
    size.bound += 2 + value.length;
    for (let i = 0; i < value.length; i++) out[i] = walk(value[i], depth + 1, size) ?? null;
    return out;
  }
  const prototype = Object.getPrototypeOf(value) as unknown;
  if ((prototype !== Object.prototype && prototype !== null) || typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    return roundTrip(value, size);
  }
  const out: Record<string, unknown> = {};
  size.bound += 2;
  for (const key of Object.keys(value)) {
    size.bound += key.length * 6 + 4;
    const copied = walk((value as Record<string, unknown>)[key], depth + 1, size);
    if (copied === undefined) continue;
    // An own `__proto__` (JSON.parse makes one) stays a property: assigning it would set the copy's prototype.
    if (key === '__proto__') Object.defineProperty(out, key, { value: copied, enumerable: true, writable: true, configurable: true });
    else out[key] = copied;
  }
  return out;
}

function roundTrip(value: object, size: { bound: number }): unknown {
  const text = JSON.stringify(value);
  if (text === undefined) return undefined;
  size.bound += text.length * 3;
  return JSON.parse(text) as unknown;
}
