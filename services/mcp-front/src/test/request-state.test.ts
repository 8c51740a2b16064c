/** The requestState codec: a minted state verifies under its key, and a tampered, foreign, malformed or expired one is refused with -32602 naming why. */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { ProtocolError } from '@modelcontextprotocol/server';
import { RequestStateCodec } from '../request-state.js';

const fields = {
  requestId: '6f1c7c2e-4a43-4f7b-9d5e-1c1a2b3c4d5e',
  method: 'tools/call',
  target: 'everything__echo',
  tenant: 'acme',
  principal: 'ada',
};
const refused = (pattern: RegExp) => (error: unknown) =>
  error instanceof ProtocolError && error.code === -32602 && pattern.test(error.message);

describe('requestState', () => {
  const key = randomBytes(32);
  const codec = new RequestStateCodec(key, 60_000);

  it('verifies on any replica holding the key, and carries what it was minted with', () => {
    const state = codec.mint(fields, 1_000);
    assert.deepEqual(new RequestStateCodec(Buffer.from(key), 60_000).verify(state, 2_000), { ...fields, expiresAt: 61_000 });
  });

  it('refuses a tampered payload, another key, garbage and an expired state', () => {
    const state = codec.mint(fields, 1_000);
    const [v, payload, mac] = state.split('.');
    const forged = `${v}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload!, 'base64url').toString()), principal: 'mallory' })).toString('base64url')}.${mac}`;
    assert.throws(() => codec.verify(forged, 2_000), refused(/signature does not verify/));
    assert.throws(() => new RequestStateCodec(randomBytes(32)).verify(state, 2_000), refused(/signature does not verify/));
    assert.throws(() => codec.verify('v1.abc', 2_000), refused(/malformed/));
    assert.throws(() => codec.verify(state, 61_000), refused(/expired at 1970-01-01T00:01:01.000Z/));
  });
});
