/**
 * The main job, end to end: `punk up` serves the example servers; real MCP
 * clients of both eras list and call their tools through Punk; every call is
 * governed and lands on a hash-chained ledger that verify accepts.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { connectClient, listAllTools, textOf, type Era } from './clients.js';
import { eventually, exampleManifests, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';

const exec = promisify(execFile);

describe('punk up on the examples (PGlite)', () => {
  let punk: RunningPunk;
  let dir: string;

  before(async () => {
    dir = await exampleManifests();
    punk = await startPunk({ manifestDir: dir, args: ['--data', join(dir, '.punk/data')] });
  });
  after(async () => {
    const code = await punk?.stop();
    assert.equal(code, 0, `punk up should exit cleanly on SIGTERM:\n${punk?.output().slice(-2000)}`);
    await removeDir(dir);
  });

  for (const era of ['2025-11-25', '2026-07-28'] as Era[]) {
    test(`a ${era} client lists, calls, reads and gets through /mcp, and the ledger holds every call`, async () => {
      const client = await connectClient(`${punk.baseUrl}/mcp`, era);
      try {
        const tools = await listAllTools(client);
        const names = tools.map((t) => t.name);
        for (const server of ['everything', 'filesystem', 'memory', 'everything-http']) {
          assert.ok(
            names.some((n) => n.startsWith(`${server}__`)),
            `tools of ${server} are listed (got ${names.join(', ')})`,
          );
        }
        for (const name of names) assert.match(name, /^[A-Za-z0-9_-]{1,64}$/);

        const echo = await client.callTool({ name: 'everything__echo', arguments: { message: `hello ${era}` } });
        assert.equal(echo.isError ?? false, false);
        assert.match(textOf(echo), new RegExp(`hello ${era}`));

        const file = await client.callTool({ name: 'filesystem__read_text_file', arguments: { path: join(dir, 'files', 'hello.txt') } });
        assert.equal(file.isError ?? false, false, textOf(file));
        assert.match(textOf(file), /Hello from Punk's filesystem example/);

        const outside = await client.callTool({ name: 'filesystem__read_text_file', arguments: { path: '/etc/passwd' } });
        assert.equal(outside.isError, true, 'the filesystem server refuses paths outside examples/files');

        const { resources } = await client.listResources();
        assert.ok(resources.length > 0);
        const read = await client.readResource({ uri: resources[0]!.uri });
        assert.ok(read.contents.length > 0);

        const prompt = await client.getPrompt({ name: 'everything__simple-prompt' });
        assert.ok(prompt.messages.length > 0);

        type Run = { runId: string; types: string[]; tool?: string };
        const withCall = await eventually(async () => {
          const { runs } = (await (await fetch(`${punk.baseUrl}/api/v1/runs?limit=500`)).json()) as { runs: Run[] };
          return runs.find((r) => r.tool === 'echo' && ['tool.called', 'tool.completed'].every((t) => r.types.includes(t)));
        });
        assert.ok(withCall, 'a run holds tool.called and tool.completed');
        const detail = (await (await fetch(`${punk.baseUrl}/api/v1/runs/${withCall.runId}`)).json()) as {
          events: Array<{ type: string; hash: string; prevHash: string; data: Record<string, unknown> }>;
        };
        assert.equal(detail.events.length, 2);
        const decision = detail.events.find((e) => e.type === 'tool.called')?.data['decision'] as { decision?: string } | undefined;
        assert.equal(decision?.decision, 'allow', 'tool.called carries the decision to allow it');

        const verify = (await (await fetch(`${punk.baseUrl}/api/v1/ledger/verify`)).json()) as { ok: boolean; events: number };
        assert.equal(verify.ok, true, JSON.stringify(verify));
        assert.ok(verify.events >= 3);
      } finally {
        await client.close();
      }
    });

    test(`a ${era} client on /servers/everything/mcp sees names unchanged`, async () => {
      const client = await connectClient(`${punk.baseUrl}/servers/everything/mcp`, era);
      try {
        const names = (await listAllTools(client)).map((t) => t.name);
        assert.ok(names.includes('echo'), names.join(', '));
        assert.ok(!names.some((n) => n.includes('__')));
        const echo = await client.callTool({ name: 'echo', arguments: { message: 'direct' } });
        assert.match(textOf(echo), /direct/);
      } finally {
        await client.close();
      }
    });
  }

  test('the server process gets a scrubbed environment', async () => {
    const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
    try {
      const result = await client.callTool({ name: 'everything__get-env', arguments: {} });
      const env = textOf(result);
      assert.doesNotMatch(env, /PUNK_LOG_LEVEL|npm_config|NODE_TEST_CONTEXT/, "nothing of Punk's environment leaks to servers");
      assert.match(env, /PATH/);
    } finally {
      await client.close();
    }
  });

  test('the McpPolicy of examples/policies.yaml is served: its deny rule hides and refuses a tool, its approval rule fails closed for a client that cannot be asked', async () => {
    assert.match(
      punk.output(),
      /loaded McpPolicy default\/baseline from policies\.yaml \(document 1\): 4 rules, 0 rate limits, priority 10/,
    );
    const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
    try {
      const names = (await listAllTools(client)).map((t) => t.name);
      assert.ok(names.includes('memory__read_graph') && !names.includes('memory__delete_relations'), names.join(', '));
      const denied = await client.callTool({ name: 'memory__delete_relations', arguments: { relations: [] } });
      assert.equal(denied.isError, true);
      assert.match(textOf(denied), /baseline\/relations-by-hand/);
      const write = await client.callTool({
        name: 'memory__add_observations',
        arguments: { observations: [{ entityName: 'x', contents: ['y'] }] },
      });
      assert.equal(write.isError, true);
      assert.match(textOf(write), /approval/);
      assert.match(textOf(write), /baseline\/observations-need-approval/);
    } finally {
      await client.close();
    }
  });

  test('the MCP Inspector CLI lists the tools of the running instance, as docs/clients.md runs it', async () => {
    // The command of docs/clients.md: `cd e2e && npx mcp-inspector-cli --cli <url> --transport http --method tools/list`.
    const cli = join(repoRoot, 'node_modules/.bin/mcp-inspector-cli');
    const { stdout } = await exec(cli, ['--cli', `${punk.baseUrl}/mcp`, '--transport', 'http', '--method', 'tools/list'], {
      timeout: 60_000,
      cwd: join(repoRoot, 'e2e'),
    });
    const listed = JSON.parse(stdout) as { tools: Array<{ name: string }> };
    assert.ok(listed.tools.some((t) => t.name === 'everything__echo'));
    assert.ok(listed.tools.some((t) => t.name.startsWith('memory__')));
  });

  test('a second instance on the same data directory, or on a busy port, stops with a message naming the cause', async () => {
    const port = new URL(punk.baseUrl).port;
    await assert.rejects(
      startPunk({ manifestDir: dir, args: ['--data', join(dir, '.punk/data')] }),
      /in use by another Punk process \(pid \d+\)/,
    );
    await assert.rejects(
      startPunk({ manifestDir: dir, args: ['--ephemeral', '--port', port] }),
      /cannot listen on 127\.0\.0\.1:\d+.*another process listens there: stop it, or pass --port/,
    );
    const notFound = await fetch(`${punk.baseUrl}/no/such/route`);
    assert.equal(notFound.status, 404);
    assert.deepEqual(((await notFound.json()) as { error: { code: string } }).error.code, 'NotFound');
  });

  test('/healthz and /readyz answer', async () => {
    assert.equal((await fetch(`${punk.baseUrl}/healthz`)).status, 200);
    const ready = await fetch(`${punk.baseUrl}/readyz`);
    assert.equal(ready.status, 200);
    assert.equal(ready.headers.get('cache-control'), 'no-store');
  });
});

describe('punk up start-up checks and banner (no manifests)', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'punk-empty-'));
  });
  after(async () => {
    await removeDir(dir);
  });

  test('a bad PUNK_AUTH_JWT_KEY stops start-up before anything runs', async () => {
    const auth = { PUNK_AUTH_MODE: 'on', PUNK_PUBLIC_URL: 'http://127.0.0.1:4100' };
    await assert.rejects(startPunk({ manifestDir: dir, env: { ...auth, PUNK_AUTH_JWT_KEY: 'garbage' } }), (error: Error) => {
      assert.match(error.message, /exited with 2 before it was ready:\npunk: PUNK_AUTH_JWT_KEY: not a PEM public key or a JWK/);
      return true;
    });
    const octKey = JSON.stringify({ kty: 'oct', k: randomBytes(32).toString('base64url') });
    await assert.rejects(
      startPunk({ manifestDir: dir, env: { ...auth, PUNK_AUTH_JWT_KEY: octKey } }),
      /exited with 2 before it was ready:\npunk: PUNK_AUTH_JWT_KEY is an oct \(HMAC\) key.*set PUNK_AUTH_ALGORITHMS=HS256/,
    );
  });

  test('with authentication on, the banner names the configured path and the bearer header', async () => {
    const adminKey = randomBytes(32).toString('hex');
    const punk = await startPunk({
      manifestDir: dir,
      env: {
        PUNK_AUTH_MODE: 'on',
        PUNK_PUBLIC_URL: 'http://127.0.0.1:4100',
        PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: adminKey,
        PUNK_MCP_PATH: '/v1/mcp',
      },
    });
    try {
      const output = punk.output();
      assert.match(output, new RegExp(`Punk is ready in \\d+ ms: ${punk.baseUrl}/v1/mcp\n`));
      assert.match(
        output,
        new RegExp(`claude mcp add --transport http punk ${punk.baseUrl}/v1/mcp --header "Authorization: Bearer <API key>"`),
      );
      assert.match(output, /make an API key \(docs\/authentication\.md\)/);
      assert.ok(!output.includes(adminKey), 'the banner never shows the bootstrap key');
      assert.doesNotMatch(output, /not a loopback address/);
      assert.equal((await fetch(`${punk.baseUrl}/v1/mcp`, { method: 'POST' })).status, 401);
    } finally {
      assert.equal(await punk.stop(), 0, punk.output());
    }
  });

  test('a known path with a method it does not serve is 405 with Allow, naming the allowed methods', async () => {
    const punk = await startPunk({ manifestDir: dir });
    try {
      for (const [method, path, allow] of [
        ['PATCH', '/api/v1/mcp/servers', 'GET, HEAD, POST'],
        ['POST', '/api/v1/mcp/servers/some-server/tools', 'GET, HEAD'],
        ['GET', '/api/v1/mcp/servers/some-server/tools/echo/accept', 'POST'],
        ['PATCH', '/api/v1/credentials/some-id', 'DELETE, GET, HEAD, PUT'],
        ['POST', '/api/v1/settings', 'GET, HEAD, PUT'],
        ['PUT', '/api/v1/api-keys', 'GET, HEAD, POST'],
        ['DELETE', '/api/v1/approvals', 'GET, HEAD'],
        ['GET', '/api/v1/approvals/some-id/approve', 'POST'],
        ['POST', '/api/v1/runs', 'GET, HEAD'],
        ['DELETE', '/api/v1/runs/some-run', 'GET, HEAD'],
        ['POST', '/api/v1/ledger/verify', 'GET, HEAD'],
        ['POST', '/api/v1/openapi.json', 'GET, HEAD'],
        ['POST', '/healthz', 'GET, HEAD'],
        ['POST', '/readyz', 'GET, HEAD'],
      ] as const) {
        const response = await fetch(`${punk.baseUrl}${path}`, { method });
        assert.equal(response.status, 405, `${method} ${path}`);
        assert.equal(response.headers.get('allow'), allow, `${method} ${path}`);
        const { error } = (await response.json()) as { error: { code: string; message: string } };
        assert.deepEqual(error, { code: 'MethodNotAllowed', message: `${method} is not allowed on ${path}; allowed: ${allow}` });
      }
      assert.equal((await fetch(`${punk.baseUrl}/api/v1/mcp/servers`)).status, 200, 'the served methods still answer');
      assert.equal((await fetch(`${punk.baseUrl}/readyz`)).status, 200);
      assert.equal((await fetch(`${punk.baseUrl}/api/v1/nowhere`, { method: 'PATCH' })).status, 404, 'an unknown path stays 404');
    } finally {
      assert.equal(await punk.stop(), 0, punk.output());
    }
  });

  test('on a non-loopback address without authentication it warns once', async () => {
    const punk = await startPunk({ manifestDir: dir, args: ['--ephemeral', '--host', '0.0.0.0'] });
    try {
      const warnings =
        punk
          .output()
          .match(
            /not a loopback address, with PUNK_AUTH_MODE=off: anyone on the network can use the MCP endpoints, the servers API and the ledger API without authentication/g,
          ) ?? [];
      assert.equal(warnings.length, 1, punk.output());
      assert.match(punk.output(), /claude mcp add --transport http punk http:\/\/0\.0\.0\.0:\d+\/mcp\n/);
      assert.equal((await fetch(`${punk.baseUrl}/healthz`)).status, 200);
    } finally {
      assert.equal(await punk.stop(), 0, punk.output());
    }
  });
});
