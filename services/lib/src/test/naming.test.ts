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
    // The tool literally named x_y keeps its name; x.y, which step 2 changed into the same one, is hashed.
    assert.deepEqual(forward.resolve('a__x_y'), { server: 'a', name: 'x_y' });
    const other = [...forward.entries()].find(([, e]) => e.name === 'x.y')?.[0];
    assert.match(String(other), /^a__x_y_[0-9a-f]{8}$/);
    assert.equal(forward.resolve('a__x.y'), undefined);
    assert.deepEqual(forward.conflicts, []);
  });

  it("never drops a long name whose shortened form is another tool's literal 64-character name", () => {
    const server = 'files';
    const long = `summarize-${'every-section-of-the-file-'.repeat(3)}in-plain-words`;
    const shortened = namespacedName(server, long);
    assert.equal(shortened.length, MAX_NAME_LENGTH);
    // A tool whose own (unshortened) namespaced name is exactly that: `files__<the rest>`.
    const literal = shortened.slice(`${server}__`.length);
    assert.equal(namespacedName(server, literal), shortened);
    const others = Array.from({ length: 13 }, (_, i) => ({ server, name: `tool-${String(i)}` }));
    const entries = [{ server, name: long }, { server, name: literal }, ...others];
    for (const order of [entries, [...entries].reverse()]) {
      const map = new NameMap(order, true);
      assert.equal(map.size, 15, 'every one of the 15 tools keeps a name');
      assert.deepEqual(map.conflicts, []);
      assert.deepEqual(map.resolve(shortened), { server, name: literal }, 'the literal name stays literal');
      const renamed = String([...map.entries()].find(([, e]) => e.name === long)?.[0]);
      assert.notEqual(renamed, shortened);
      assert.match(renamed, /^[A-Za-z0-9_-]{64}$/);
      assert.equal(renamed, `${shortened.slice(0, 55)}_${createHash('sha256').update(`${server}__${long}#1`).digest('hex').slice(0, 8)}`);
    }
  });

  it('reports an entry listed twice instead of dropping it silently', () => {
    const map = new NameMap(
      [
        { server: 'a', name: 'echo' },
        { server: 'a', name: 'echo' },
      ],
      true,
    );
    assert.equal(map.size, 1);
    assert.equal(map.conflicts.length, 1);
    const [conflict] = map.conflicts;
    assert.deepEqual([conflict?.server, conflict?.name], ['a', 'echo']);
    assert.match(String(conflict?.reason), /server a lists echo more than once/);
    const perServer = new NameMap(
      [
        { server: 'a', name: 'echo' },
        { server: 'a', name: 'echo' },
      ],
      false,
    );
    assert.equal(perServer.size, 1);
    assert.match(String(perServer.conflicts[0]?.reason), /more than once/);
  });

  it('keeps names unchanged on a per-server endpoint', () => {
    const map = new NameMap([{ server: 'everything', name: 'echo' }], false);
    assert.deepEqual(map.resolve('echo'), { server: 'everything', name: 'echo' });
  });
});
