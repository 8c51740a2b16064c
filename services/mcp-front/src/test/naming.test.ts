import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { NameMap, namespacedName, MAX_NAME_LENGTH } from '../naming.js';

describe('namespaced names on the aggregated endpoint', () => {
  it('joins server and tool with two underscores when the result is already safe', () => {
    assert.equal(namespacedName('everything', 'echo'), 'everything__echo');
    assert.equal(namespacedName('everything', 'get-sum'), 'everything__get-sum');
  });

  it('turns every character outside [A-Za-z0-9_-] into one underscore per code point', () => {
    assert.equal(namespacedName('files', 'read.file/v2'), 'files__read_file_v2');
    assert.equal(namespacedName('files', 'héllo 👋'), 'files__h_llo__');
  });

  it('shortens a long name to 64 characters: a prefix, _, and 8 hex of the SHA-256 of the full name', () => {
    const server = 'a-server-with-a-really-long-name-that-fills-most-of-the-budget';
    const full = `${server}__get-annotated-message`;
    const exposed = namespacedName(server, 'get-annotated-message');
    const hash = createHash('sha256').update(full).digest('hex').slice(0, 8);
    assert.equal(exposed.length, MAX_NAME_LENGTH);
    assert.equal(exposed, `${full.slice(0, 55)}_${hash}`);
    assert.match(exposed, /^[A-Za-z0-9_-]{1,64}$/);
    assert.equal(namespacedName(server, 'get-annotated-message'), exposed, 'deterministic');
    assert.notEqual(namespacedName(server, 'get-annotated-messages'), exposed, 'distinct tools stay distinct');
  });

  it('routes exposed names back through the map, and resolves collisions the same way whatever the input order', () => {
    const entries = [
      { server: 'a', name: 'x.y' },
      { server: 'a', name: 'x_y' },
    ];
    const forward = new NameMap(entries, true);
    const backward = new NameMap([...entries].reverse(), true);
    assert.deepEqual([...forward.entries()], [...backward.entries()]);
    assert.equal(forward.size, 2);
    assert.deepEqual(forward.resolve('a__x_y'), { server: 'a', name: 'x.y' });
    const other = [...forward.entries()].find(([, e]) => e.name === 'x_y')![0];
    assert.match(other, /^a__x_y_[0-9a-f]{8}$/);
    assert.equal(forward.resolve('a__x.y'), undefined);
  });

  it('keeps names unchanged on a per-server endpoint', () => {
    const map = new NameMap([{ server: 'everything', name: 'echo' }], false);
    assert.deepEqual(map.resolve('echo'), { server: 'everything', name: 'echo' });
  });
});
