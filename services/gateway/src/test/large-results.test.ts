/**
 * The gateway and `PUNK_MAX_RESULT_BYTES` (here 1 MiB, on the bus and the gateway alike), with a real stdio server
 * that answers as many bytes as asked (fixtures/sized.mjs): a result within the limit is relayed intact; a tool result
 * past it is a tool error naming the limit, a resource past it a `PayloadTooLarge` error, each recorded on the ledger
 * as the call's failure; a line past twice the limit is dropped as it streams in and its call is at once a tool
 * error naming the limit, recorded as its failure, and the server keeps serving.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PunkError } from '@punk/lib';
import { fixture, manifest, startHarness, waitFor } from './harness.js';

const MiB = 1024 * 1024;
type ToolResult = { content: { type: string; text: string }[]; isError?: boolean };

test('results past PUNK_MAX_RESULT_BYTES are refused by name and recorded as failures; smaller ones cross intact', async (t) => {
  const h = await startHarness(
    (tenant) => [manifest(tenant, 'sized', { image: 'example/sized:1', command: [process.execPath, fixture('sized.mjs')] })],
    { maxResultBytes: MiB },
  );
  t.after(() => h.close());
  await h.gateway.ready();

  const fits = (await h.call({ method: 'tools/call', server: 'sized', name: 'sized', arguments: { bytes: MiB / 2 } })) as ToolResult;
  assert.equal(fits.content[0]!.text.length, MiB / 2);
  assert.notEqual(fits.isError, true);

  const tooLarge = (await h.call({ method: 'tools/call', server: 'sized', name: 'sized', arguments: { bytes: 1.5 * MiB } })) as ToolResult;
  assert.equal(tooLarge.isError, true);
  assert.match(
    tooLarge.content[0]!.text,
    /^the result of tool sized on server sized is \d+ bytes, past the limit of 1048576 bytes \(PUNK_MAX_RESULT_BYTES\)/,
  );
  await waitFor(() =>
    h.events.some((e) => e.type === 'tool.completed' && e.data.isError === true && /PUNK_MAX_RESULT_BYTES/.test(String(e.data.error))),
  );

  await assert.rejects(h.call({ method: 'resources/read', server: 'sized', uri: `sized://${1.5 * MiB}` }), (error: unknown) => {
    assert.ok(error instanceof PunkError);
    assert.equal(error.code, 'PayloadTooLarge');
    assert.match(error.message, /^the result of resource sized:\/\/\d+ on server sized is \d+ bytes, past the limit of 1048576 bytes/);
    return true;
  });
  await waitFor(() =>
    h.events.some((e) => e.type === 'resource.completed' && e.data.isError === true && /PUNK_MAX_RESULT_BYTES/.test(String(e.data.error))),
  );

  // Past twice the limit the line is not even held: the call fails at once (its deadline is far), as a tool error
  // naming the limit, like a result past the limit, recorded on the ledger as the call's failure.
  const dropped = (await h.call(
    { method: 'tools/call', server: 'sized', name: 'sized', arguments: { bytes: 3 * MiB } },
    600_000,
  )) as ToolResult;
  assert.equal(dropped.isError, true);
  const droppedText =
    /^server \S*sized answered with \d+ bytes, past the limit of 1048576 bytes \(PUNK_MAX_RESULT_BYTES\) and past the 2097152 bytes Punk reads from a stdio server \(twice the limit\), so Punk dropped it; raise PUNK_MAX_RESULT_BYTES to carry it$/;
  assert.match(dropped.content[0]!.text, droppedText);
  assert.doesNotMatch(dropped.content[0]!.text, /answered with an error/);
  await waitFor(() =>
    h.events.some((e) => e.type === 'tool.completed' && e.data.isError === true && droppedText.test(String(e.data.error))),
  );
  const again = (await h.call({ method: 'tools/call', server: 'sized', name: 'sized', arguments: { bytes: 1000 } })) as ToolResult;
  assert.equal(again.content[0]!.text.length, 1000, 'the server still serves after a dropped line');
});
