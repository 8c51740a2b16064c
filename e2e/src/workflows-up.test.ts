/**
 * McpWorkflow manifests on `punk up`: loaded beside the example memory server, a workflow whose node names a
 * field wrongly is refused at load, and once the servers listed their tools a workflow naming a tool the server
 * lacks, or leaving out a required argument, is reported naming the workflow, the node and the field; a valid one
 * is not reported, and none of them stops Punk from serving. A broken workflow added while it runs is reported the
 * same way, naming its file, document and field.
 */
import assert from 'node:assert/strict';
import { copyFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { eventually, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';

const workflows = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: find }
spec:
  input: { type: object, properties: { topic: { type: string } }, required: [topic] }
  start: search
  nodes:
    - id: search
      kind: tool_call
      next: done
      config: { server: memory, tool: search_nodes, args: { query: { kind: ref, path: input.topic } }, saveAs: hits }
    - id: done
      kind: output
      config: { value: { kind: ref, path: vars.hits } }
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: misnamed }
spec:
  start: search
  nodes:
    - id: search
      kind: tool_call
      next: open
      config: { server: memory, tool: search_everything, args: {} }
    - id: open
      kind: tool_call
      config: { server: memory, tool: open_nodes, args: {} }
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: no-server }
spec:
  start: search
  nodes:
    - { id: search, kind: tool_call, config: { tool: search_nodes } }
`;

let dir: string;
let punk: RunningPunk;

before(async () => {
  dir = await manifestDir('workflows-up', { 'workflows.yaml': workflows });
  await copyFile(join(repoRoot, 'examples/memory.yaml'), join(dir, 'memory.yaml'));
  punk = await startPunk({ manifestDir: dir });
});

after(async () => {
  await punk?.stop();
  await removeDir(dir);
});

test('workflow problems are reported at load and against the catalog, naming workflow, node and field', { timeout: 180_000 }, async () => {
  // The log (stderr) may arrive after the ready line (stdout): wait for the last error.
  await eventually(async () => (/node open: /.test(punk.output()) ? true : undefined), 30_000);
  const output = punk.output();
  assert.match(
    output,
    /manifest error: workflows\.yaml \(document 3\) spec\.nodes\.0\.config\.server: McpWorkflow default\/no-server node search: /,
  );
  assert.match(
    output,
    /manifest error: workflows\.yaml \(document 2\) spec\.nodes\.0\.config\.tool: McpWorkflow default\/misnamed node search: McpServer memory has no tool search_everything; it has: [a-z_, ]*search_nodes/,
  );
  assert.match(
    output,
    /manifest error: workflows\.yaml \(document 2\) spec\.nodes\.1\.config\.args: McpWorkflow default\/misnamed node open: tool open_nodes requires argument names/,
  );
  assert.doesNotMatch(output, /(workflow|manifest) error: [^\n]*McpWorkflow default\/find/);
  assert.match(output, /servers: memory \(3 manifest error\(s\) above\)/);
  // Punk serves on.
  const runs = await fetch(`${punk.baseUrl}/api/v1/runs`);
  assert.equal(runs.status, 200, await runs.clone().text());
});

test(
  'a broken workflow added while punk up runs is reported as at start, naming file, document and field',
  { timeout: 60_000 },
  async () => {
    await writeFile(
      join(dir, 'late.yaml'),
      `apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: late }
spec:
  start: look
  nodes:
    - { id: look, kind: tool_call, config: { server: memory, tool: look_everywhere, args: {} } }
`,
    );
    const reported = await eventually(
      async () =>
        /manifest error: late\.yaml \(document 1\) spec\.nodes\.0\.config\.tool: McpWorkflow default\/late node look: McpServer memory has no tool look_everywhere/.test(
          punk.output(),
        )
          ? true
          : undefined,
      20_000,
    );
    assert.ok(reported, `no manifest error for late.yaml in:\n${punk.output()}`);
  },
);
