/**
 * The README stays a front door (small, pointing into docs/), and every relative link of the README and of
 * docs/*.md names a file that exists (and, with `#anchor`, a heading of that file).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from './harness.js';

/** Largest README, in bytes: reference material belongs in docs/. */
const MAX_README_BYTES = 8 * 1024;

/** GitHub's anchors of the headings of a Markdown text (outside code fences). */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = /^#{1,6} (.*)$/.exec(line);
    if (!fenced && heading?.[1] !== undefined)
      anchors.add(
        heading[1]
          .trim()
          .toLowerCase()
          .replace(/[^\w\- ]/g, '')
          .replaceAll(' ', '-'),
      );
  }
  return anchors;
}

/** `file: link (why)` for every relative link of `file` that does not resolve. */
function brokenLinksOf(file: string): string[] {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  const broken: string[] = [];
  for (const [, link] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    if (link === undefined || /^[a-z]+:/.test(link)) continue;
    const [path = '', anchor] = link.split('#');
    const target = path === '' ? file : resolve(dirname(file), path);
    const name = `${relative(repoRoot, file)}: ${link}`;
    if (!existsSync(target)) broken.push(`${name} (no such file)`);
    else if (anchor !== undefined && target.endsWith('.md') && !anchorsOf(readFileSync(target, 'utf8')).has(anchor))
      broken.push(`${name} (no such heading)`);
  }
  return broken;
}

void test('the README is a front door, under 8 KB, that links into docs/', () => {
  const readme = join(repoRoot, 'README.md');
  const size = statSync(readme).size;
  assert.ok(size <= MAX_README_BYTES, `README.md is ${String(size)} bytes; move reference material into docs/`);
  const text = readFileSync(readme, 'utf8');
  for (const part of [
    'npm ci && npm start',
    'npm test',
    'claude mcp add --transport http punk http://127.0.0.1:4100/mcp',
    'docs/README.md',
  ])
    assert.ok(text.includes(part), `README.md names ${part}`);
});

void test('every relative link of the README and of docs/ names an existing file and heading', () => {
  const docs = readdirSync(join(repoRoot, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => join(repoRoot, 'docs', name));
  assert.deepEqual([join(repoRoot, 'README.md'), ...docs].flatMap(brokenLinksOf), []);
});
