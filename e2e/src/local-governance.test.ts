/**
 * McpPolicy and McpCredential documents under the real `punk up`: loaded from the manifests directory with one line
 * each, a broken document and one of an unknown kind reported with file, document and field while the rest loads;
 * a policy that denies a tool refuses the call; a credential from an environment variable reaches an http upstream
 * (the echo server shows the header it received); edits are reloaded (a policy that changes what it denies, a
 * credential that moves to a file with a new value) and a removed document is withdrawn.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import { connectClient, listAllTools, textOf } from './clients.js';
import { startEchoServer, type EchoServer } from './echo-server.js';
import { scratchDatabase } from './distributed.js';
import { eventually, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';
import { startOwnNats } from './nats-server.js';

const ENV_SECRET = `env-${randomBytes(8).toString('hex')}`;
const FILE_SECRET = `file-${randomBytes(8).toString('hex')}`;

let echo: EchoServer;
let punk: RunningPunk;
let dir: string;
let client: Client;

const server = (url: string) => `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: echo }
spec:
  url: ${url}
  headers:
    - name: Authorization
      valueFrom: { credentialRef: { name: echo-key } }
`;
const credential = (valueFrom: string) => `apiVersion: mcp.punk.dev/v1alpha1
kind: McpCredential
metadata: { name: echo-key }
spec:
  values:
    - key: value
      valueFrom: ${valueFrom}
`;
const policy = (tool: string) => `apiVersion: mcp.punk.dev/v1alpha1
kind: McpPolicy
metadata: { name: guard }
spec:
  rules:
    - { name: no-${tool}, servers: [echo], tools: [${tool}], decision: deny, reason: not here }
`;
const broken = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpPolicy
metadata: { name: wrong }
spec:
  rules:
    - { name: maybe, decision: perhaps }
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpGadget
metadata: { name: g }
spec: {}
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpCredential
metadata: { name: from-secret }
spec:
  secretRef: { name: github-token }
`;

/**
 * The Authorization header the echo server received on a call of `headers` (read on the server's side: Punk keeps
 * vault values out of what clients receive), or the call's refusal text.
 */
async function headersCall(): Promise<{ authorization?: unknown; refused?: string }> {
  const result = await client.callTool({ name: 'echo__headers', arguments: {} });
  if (result.isError) return { refused: textOf(result) };
  return { authorization: echo.lastHeaders.authorization };
}

before(async () => {
  echo = await startEchoServer();
  dir = await manifestDir('local-governance', {
    'echo.yaml': server(echo.url),
    'credential.yaml': credential('{ env: ECHO_TOKEN }'),
    'policy.yaml': policy('fail'),
    'broken.yaml': broken,
  });
  punk = await startPunk({ manifestDir: dir, env: { ECHO_TOKEN: ENV_SECRET } });
  client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
});

after(async () => {
  await client?.close();
  await punk?.stop();
  await echo?.close();
  await removeDir(dir);
});

test('each document gets a line: the loaded ones, and the broken ones with file, document and field', () => {
  const output = punk.output();
  assert.match(output, /loaded McpPolicy default\/guard from policy\.yaml \(document 1\): 1 rules, 0 rate limits/);
  assert.match(output, /loaded McpCredential default\/echo-key from credential\.yaml \(document 1\): static, keys value/);
  assert.match(output, /manifest error: broken\.yaml \(document 1\) spec\.rules\.0\.decision: /);
  assert.match(
    output,
    /manifest error: broken\.yaml \(document 2\) kind: expected apiVersion mcp\.punk\.dev\/v1alpha1 and kind McpServer, McpPolicy or McpCredential/,
  );
  assert.match(
    output,
    /manifest error: broken\.yaml \(document 3\) spec\.secretRef: McpCredential default\/from-secret: punk up has no Kubernetes Secrets: give the values as spec\.values/,
  );
  assert.ok(!output.includes(ENV_SECRET), 'no line holds the credential value');
  // The banner counts every one of them, the credential's included.
  assert.match(output, /servers: echo \(3 manifest error\(s\) above\)/);
});

test('a credential from an environment variable reaches the http upstream, and the policy denies its tool', async () => {
  const first = await eventually(async () => {
    const seen = await headersCall().catch(() => undefined);
    return seen?.authorization === ENV_SECRET ? seen : undefined;
  }, 60_000);
  assert.ok(first, 'the upstream received the credential from ECHO_TOKEN');
  const names = (await listAllTools(client)).map((t) => t.name);
  assert.ok(names.includes('echo__headers') && !names.includes('echo__fail'), names.join());
  const denied = await client.callTool({ name: 'echo__fail', arguments: {} });
  assert.equal(denied.isError, true);
  assert.match(textOf(denied), /guard\/no-fail/);
});

test('edits are reloaded and a removed document is withdrawn', async () => {
  // The policy now denies headers; fail is allowed again (the upstream answers with its own error).
  await writeFile(join(dir, 'policy.yaml'), policy('headers'));
  const refused = await eventually(async () => {
    const seen = await headersCall();
    return seen.refused ? seen.refused : undefined;
  }, 30_000);
  assert.match(refused!, /guard\/no-headers/);
  const allowed = await client.callTool({ name: 'echo__fail', arguments: {} });
  assert.doesNotMatch(textOf(allowed), /guard\//);

  // The credential moves to a file with another value; the policy goes away.
  await writeFile(join(dir, 'echo-token.txt'), `${FILE_SECRET}\n`);
  await writeFile(join(dir, 'credential.yaml'), credential('{ file: echo-token.txt }'));
  await rm(join(dir, 'policy.yaml'));
  const next = await eventually(async () => {
    const seen = await headersCall().catch(() => undefined);
    return seen?.authorization === FILE_SECRET ? seen : undefined;
  }, 60_000);
  assert.ok(next, `the upstream received the value of the file: ${punk.output().slice(-3000)}`);
  assert.match(punk.output(), /removed McpPolicy default\/guard: its document is gone/);

  // A removed credential leaves the vault: the server's next connection has no value for its header.
  await rm(join(dir, 'credential.yaml'));
  const gone = await eventually(async () => (/removed McpCredential default\/echo-key/.test(punk.output()) ? true : undefined), 30_000);
  assert.ok(gone);
  assert.equal((await fetch(`${punk.baseUrl}/api/v1/credentials/echo-key`)).status, 404, 'the vault no longer holds it');
});

describe('punk cluster serves the same documents over NATS', () => {
  test('its policy is published to the replicas: the denied tool is refused, and an edit is reloaded', async () => {
    const nats = await startOwnNats();
    const db = await scratchDatabase();
    const example = await readFile(join(repoRoot, 'examples/everything-http.yaml'), 'utf8');
    const guard = (tool: string) => `apiVersion: mcp.punk.dev/v1alpha1
kind: McpPolicy
metadata: { name: guard }
spec:
  rules:
    - { name: no-${tool}, servers: [everything-http], tools: [${tool}], decision: deny }
`;
    const clusterDir = await manifestDir('local-governance-cluster', {
      'everything-http.yaml': example,
      'policy.yaml': guard('echo'),
    });
    const cluster = await startPunk({
      manifestDir: clusterDir,
      command: 'cluster',
      env: { PUNK_NATS_URL: nats.url, PUNK_DATABASE_URL: db.url },
      timeoutMs: 180_000,
    });
    const mcp = await connectClient(`${cluster.baseUrl}/mcp`, '2025-11-25');
    try {
      assert.match(cluster.output(), /loaded McpPolicy default\/guard from policy\.yaml \(document 1\)/);
      const refusal = async (tool: string) => {
        const result = await mcp.callTool({ name: `everything-http__${tool}`, arguments: tool === 'echo' ? { message: 'hi' } : {} });
        return result.isError ? textOf(result) : undefined;
      };
      assert.match((await eventually(() => refusal('echo'), 30_000))!, /guard\/no-echo/);
      await writeFile(join(clusterDir, 'policy.yaml'), guard('get-env'));
      assert.match((await eventually(() => refusal('get-env'), 30_000))!, /guard\/no-get-env/);
      assert.equal(await refusal('echo'), undefined, 'echo is allowed again');
    } finally {
      await mcp.close();
      await cluster.stop();
      await nats.stop();
      await db.drop();
      await removeDir(clusterDir);
    }
  });
});
