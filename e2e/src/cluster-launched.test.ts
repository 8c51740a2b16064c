/**
 * `punk cluster` with authentication on: the HTTP example server it starts itself is its own process, not a
 * remote URL, so the gateways' SSRF guard lets them reach it (and nothing else on loopback: an admin's
 * registration of that very URL is still refused); the ready banner lists every server with its state, a
 * failed one with its error, as `punk up`'s does.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { connectClient, textOf } from './clients.js';
import { scratchDatabase } from './distributed.js';
import { freePort, manifestDir, removeDir, repoRoot } from './harness.js';
import { startOwnNats, type OwnNats } from './nats-server.js';

const BOOTSTRAP = randomBytes(24).toString('base64url');

describe('punk cluster with PUNK_AUTH_MODE=on on its own HTTP example server', () => {
  let nats: OwnNats;
  let db: { url: string; drop(): Promise<void> };
  let dir: string;
  let serverPort: number;
  let child: ChildProcessByStdio<null, Readable, Readable> | undefined;
  let output = '';
  let baseUrl: string;

  before(async () => {
    nats = await startOwnNats();
    db = await scratchDatabase();
    serverPort = await freePort();
    const example = await readFile(join(repoRoot, 'examples/everything-http.yaml'), 'utf8');
    dir = await manifestDir('cluster-launched', {
      // A declared port (the example leaves it to Punk): the registration below names the same URL.
      'everything-http.yaml': example.replace('transport: streamable-http', `transport: streamable-http\n  port: ${String(serverPort)}`),
      'broken.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: broken }
spec:
  image: local/broken
  command: [${JSON.stringify(process.execPath)}, "-e", "console.error('broken on purpose'); process.exit(3)"]
`,
    });
    child = spawn(process.execPath, [join(repoRoot, 'services/cli/dist/main.js'), 'cluster'], {
      cwd: dir,
      env: {
        ...process.env,
        PUNK_LOG_LEVEL: 'warn',
        PUNK_PORT: '0',
        PUNK_MANIFESTS: dir,
        PUNK_DATA_DIR: join(dir, '.punk/data'),
        PUNK_NATS_URL: nats.url,
        PUNK_DATABASE_URL: db.url,
        PUNK_AUTH_MODE: 'on',
        PUNK_PUBLIC_URL: 'https://punk.example.test',
        PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: BOOTSTRAP,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const started = child;
    for (const stream of [started.stdout, started.stderr]) {
      stream.on('data', (chunk: Buffer) => {
        output += chunk.toString();
      });
    }
    baseUrl = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`punk cluster was not ready within 150 s:\n${output}`));
      }, 150_000);
      started.stdout.on('data', () => {
        const match = /Punk cluster is ready in \d+ ms: (http:\/\/[^\s/]+)\//.exec(output);
        if (match?.[1]) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      });
      started.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`punk cluster exited with ${String(code)} before it was ready:\n${output}`));
      });
    });
  });
  after(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const running = child;
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGTERM');
      await exited;
    }
    await nats.stop();
    await db.drop();
    await removeDir(dir);
  });

  test('the banner lists the launched server ready and the broken one failed with its error', () => {
    const line = /^ {2}servers: (.*)$/m.exec(output)?.[1];
    assert.ok(line, `the banner has a servers line:\n${output}`);
    assert.match(line, /(^|, )everything-http(,|$)/, `everything-http is ready (not refused by the SSRF guard):\n${output}`);
    // Failed, or already trying again (`starting`) with the error of its last try.
    assert.match(line, /broken \((failed|starting): [^)]*broken on purpose/, `the failed server is listed with its error:\n${output}`);
  });

  test('a client calls the launched server through the cluster; registering its URL as a remote server is still refused', async () => {
    const admin = { authorization: `Bearer ${BOOTSTRAP}`, 'content-type': 'application/json' };
    const created = await fetch(`${baseUrl}/api/v1/api-keys`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'e2e' }) });
    assert.equal(created.status, 201, await created.clone().text());
    const { key } = (await created.json()) as { key: string };
    const client = await connectClient(`${baseUrl}/mcp`, '2025-11-25', { Authorization: `Bearer ${key}` });
    try {
      const echo = await client.callTool({ name: 'everything-http__echo', arguments: { message: 'through the cluster' } });
      assert.match(textOf(echo), /through the cluster/);
    } finally {
      await client.close();
    }

    const registered = await fetch(`${baseUrl}/api/v1/mcp/servers`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ name: 'loopback', type: 'http', url: `http://127.0.0.1:${String(serverPort)}/mcp` }),
    });
    const body = await registered.text();
    assert.equal(registered.status, 400, body);
    assert.match(body, /EgressRefused/);
    assert.match(body, /127\.0\.0\.1 is a special-purpose address/);
  });
});
