/**
 * An OpenAPI server whose API does not answer: the tool error names the system error and the API's base URL (a
 * fresh-user trial got only "fetch failed", naming neither).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fixture, freePort, manifest, startHarness } from './harness.js';

type Result = { content: Array<{ text: string }>; isError?: boolean };

test('a call to an API nobody listens on is a tool error naming ECONNREFUSED and the base URL', async (t) => {
  const baseUrl = `http://127.0.0.1:${String(await freePort())}/v1`;
  const harness = await startHarness((tenant) => [manifest(tenant, 'down', { openapi: { file: fixture('openapi/books.yaml'), baseUrl } })]);
  t.after(() => harness.close());
  const result = (await harness.call({ method: 'tools/call', server: 'down', name: 'listbooks', arguments: {} })) as Result;
  assert.equal(result.isError, true);
  assert.equal(result.content[0]!.text, `tool listbooks: the request to the API failed: ECONNREFUSED reaching ${baseUrl}`);
});
