import test from 'node:test';
import assert from 'node:assert/strict';
import { GENESIS_HASH, chainEvent, hashLink } from '../chain.js';
import { event } from './helpers.js';

test('a hash covers the canonical (RFC 8785) content: key order does not matter, content does', () => {
  const e = event('acme', 'run-1', 'tool.called', { b: 1, a: { y: [1, 2], x: 'é' } });
  const first = chainEvent(e, 1, GENESIS_HASH);
  assert.match(first.hash, /^[0-9a-f]{64}$/);
  const reordered = chainEvent({ ...e, data: { a: { x: 'é', y: [1, 2] }, b: 1 } }, 1, GENESIS_HASH);
  assert.equal(reordered.hash, first.hash);
  assert.notEqual(chainEvent({ ...e, data: { b: 2, a: { y: [1, 2], x: 'é' } } }, 1, GENESIS_HASH).hash, first.hash);
  assert.notEqual(chainEvent(e, 2, GENESIS_HASH).hash, first.hash, 'the position is covered');
  assert.notEqual(chainEvent(e, 1, first.hash).hash, first.hash, 'the link is covered');
  const { hash, ...link } = first;
  assert.equal(hashLink(link), hash);
  // Absent optional fields hash like fields read back as NULL.
  const bare = { ...e, principal: undefined, sessionId: undefined, server: undefined };
  assert.equal(hashLink({ ...chainEvent(bare, 1, GENESIS_HASH), principal: undefined }), chainEvent(bare, 1, GENESIS_HASH).hash);
});
