import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ProtocolError } from '@modelcontextprotocol/server';
import { decodeCursor, encodeCursor, paginate } from '../cursor.js';

const names = (count: number) => Array.from({ length: count }, (_, i) => `tool-${String(i).padStart(3, '0')}`);

function all(items: string[], pageSize: number): string[][] {
  const pages: string[][] = [];
  let cursor: string | undefined;
  do {
    const page = paginate({ list: 'tools/list', endpoint: '*' }, items, (name) => name, pageSize, cursor);
    pages.push(page.items);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return pages;
}

function invalidCursor(run: () => unknown, pattern: RegExp): void {
  assert.throws(run, (error: unknown) => error instanceof ProtocolError && error.code === -32602 && pattern.test(error.message));
}

describe('composite pagination cursors', () => {
  it('pages through a list in key order, whatever the input order; the last page has no cursor', () => {
    const shuffled = names(7).reverse();
    assert.deepEqual(all(shuffled, 3), [names(7).slice(0, 3), names(7).slice(3, 6), names(7).slice(6)]);
    assert.deepEqual(all(names(6), 3), [names(6).slice(0, 3), names(6).slice(3)]);
    assert.deepEqual(all([], 3), [[]]);
  });

  it('is keyset-based: items added or removed between pages are neither repeated nor skipped', () => {
    const first = paginate({ list: 'tools/list', endpoint: '*' }, names(6), (n) => n, 3, undefined);
    const changed = [...names(6).filter((n) => n !== 'tool-001' && n !== 'tool-003'), 'tool-002a', 'tool-000a'];
    const second = paginate({ list: 'tools/list', endpoint: '*' }, changed, (n) => n, 3, first.nextCursor);
    assert.deepEqual(second.items, ['tool-002a', 'tool-004', 'tool-005']);
  });

  it('is self-contained: a cursor decodes anywhere to the key it names', () => {
    assert.equal(
      decodeCursor({ list: 'prompts/list', endpoint: '*' }, encodeCursor({ list: 'prompts/list', endpoint: '*' }, 'a__b')),
      'a__b',
    );
  });

  it('refuses, with -32602, cursors it did not mint or minted for another list', () => {
    invalidCursor(() => decodeCursor({ list: 'tools/list', endpoint: '*' }, 'not base64!'), /Invalid cursor for tools\/list/);
    invalidCursor(() => decodeCursor({ list: 'tools/list', endpoint: '*' }, ''), /not a cursor this server returned/);
    invalidCursor(
      () =>
        decodeCursor({ list: 'tools/list', endpoint: '*' }, Buffer.from('{"v":2,"list":"tools/list","after":"x"}').toString('base64url')),
      /not a cursor/,
    );
    invalidCursor(() => decodeCursor({ list: 'tools/list', endpoint: '*' }, Buffer.from('[1]').toString('base64url')), /not a cursor/);
    invalidCursor(
      () => decodeCursor({ list: 'tools/list', endpoint: '*' }, encodeCursor({ list: 'resources/list', endpoint: '*' }, 'x')),
      /returned by resources\/list/,
    );
    invalidCursor(() => decodeCursor({ list: 'tools/list', endpoint: '*' }, 'A'.repeat(20_000)), /not a cursor/);
    invalidCursor(
      () => decodeCursor({ list: 'tools/list', endpoint: 'everything' }, encodeCursor({ list: 'tools/list', endpoint: '*' }, 'x')),
      /returned by another endpoint/,
    );
  });
});
