// The platform team's story on a real control plane, end to end through every Punk component but the pods (no
// kubelet runs here, so the McpServer is a remote `url` one): a Secret and an McpCredential, an McpServer whose
// Authorization header comes from that credential, an McpPolicy. The MCP client is the SDK's, connected to the
// server's `status.endpoint` on a real mcp-front; the gateway, governance and operator share a nats-server of the
// test's own and a scratch Postgres database.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import express from 'express';
import { createLogger } from '@punk/lib';
import { createFront, type Front } from '@punk/mcp-front';
import { startProtectedMcpServer, type ProtectedMcpServer } from '../../../services/gateway/dist/test/fixtures/protected-mcp-server.js';
import { controlPlaneAvailability, type ControlPlane } from './control-plane.js';
import { conditionOf, CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();
const log = createLogger('cluster-story', 'silent');
const TOKEN = `s3cret-${randomBytes(6).toString('hex')}`;

/** The text of a tools/call result, or the error message of the call or of the connection. */
async function callEcho(endpoint: string, text: string): Promise<{ ok: boolean; text: string }> {
  const client = new Client({ name: 'story-client', version: '1.0.0' });
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(endpoint)));
    const result = await client.callTool({ name: 'echo', arguments: { text } });
    const content = (result.content as { type: string; text?: string }[])[0];
    return { ok: result.isError !== true, text: content?.text ?? '' };
  } catch (error) {
    return { ok: false, text: (error as Error).message };
  } finally {
    await client.close();
  }
}

/** The tool names an MCP client lists at `endpoint`. */
async function toolNames(endpoint: string): Promise<string[]> {
  const client = new Client({ name: 'story-client', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(endpoint)));
  try {
    return (await client.listTools()).tools.map((tool) => tool.name);
  } finally {
    await client.close();
  }
}

describe(
  'a platform team declares a credential, a server and a policy; an MCP client uses them',
  { skip: availability.available ? false : availability.reason },
  () => {
    let fixture: OperatorFixture;
    let plane: ControlPlane;
    let crs: CustomResources;
    let ns: string;
    let front: Front;
    let http: HttpServer;
    let base: string;
    let upstream: ProtectedMcpServer;

    before(async () => {
      fixture = await startOperatorFixture('story', { operator: false });
      ({ plane, crs, ns } = fixture);
      const { bus } = await fixture.startServices();
      front = await createFront({ bus, log, tenant: ns, maxBodyBytes: 1024 * 1024, callTimeoutMs: 20_000 });
      const app = express();
      app.use(front.router);
      http = await new Promise<HttpServer>((resolve) => {
        const server = app.listen(0, '127.0.0.1', () => resolve(server));
      });
      base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
      upstream = await startProtectedMcpServer({ token: TOKEN });
      await fixture.startOperator({ server: { publicUrl: base } });
    });
    after(async () => {
      await front?.close();
      http?.closeAllConnections();
      if (http) await new Promise((resolve) => http.close(resolve));
      await upstream?.close();
      await fixture?.stop();
    });

    it('serves the server at its status.endpoint with the credential as its Authorization header', async () => {
      await plane.kubeConfig.makeApiClient(CoreV1Api).createNamespacedSecret({
        namespace: ns,
        body: { metadata: { name: 'tickets-auth' }, stringData: { authorization: `Bearer ${TOKEN}` } },
      });
      await crs.create('mcpcredentials', ns, {
        apiVersion: 'mcp.punk.dev/v1alpha1',
        kind: 'McpCredential',
        metadata: { name: 'tickets' },
        spec: { secretRef: { name: 'tickets-auth' } },
      });
      await crs.create('mcpservers', ns, {
        apiVersion: 'mcp.punk.dev/v1alpha1',
        kind: 'McpServer',
        metadata: { name: 'tickets' },
        spec: {
          url: upstream.url,
          headers: [{ name: 'Authorization', valueFrom: { credentialRef: { name: 'tickets', key: 'authorization' } } }],
        },
      });
      const ready = await until(
        'the McpServer Ready',
        async () => {
          const o = await crs.get('mcpservers', ns, 'tickets');
          return conditionOf(o, 'Ready')?.status === 'True' ? o : undefined;
        },
        60_000,
      );
      assert.equal(ready.status.endpoint, `${base}/servers/${ns}/tickets/mcp`);
      assert.deepEqual((ready.status.tools as { name: string }[]).map((t) => t.name).sort(), ['echo', 'wait']);

      const answer = await callEcho(ready.status.endpoint, 'hello from the story');
      assert.deepEqual(answer, { ok: true, text: 'hello from the story' });
      const sent = upstream.requests.filter((r) => r.method === 'POST' && r.refused === undefined);
      assert.ok(
        sent.length > 0 && sent.every((r) => r.headers.authorization === `Bearer ${TOKEN}`),
        'every request the upstream took carried the credential',
      );
      const status = await crs.get('mcpcredentials', ns, 'tickets');
      assert.ok(!JSON.stringify(status).includes(TOKEN), 'the McpCredential never shows the value');
    });

    it('an McpPolicy denying the tool takes effect, and deleting it lifts the denial', async () => {
      const endpoint = `${base}/servers/${ns}/tickets/mcp`;
      await crs.create('mcppolicies', ns, {
        apiVersion: 'mcp.punk.dev/v1alpha1',
        kind: 'McpPolicy',
        metadata: { name: 'no-echo' },
        spec: { rules: [{ name: 'deny-echo', tools: ['echo'], decision: 'deny', reason: 'echo is not allowed here' }] },
      });
      const denied = await until('the call denied', async () => {
        const answer = await callEcho(endpoint, 'again');
        return answer.ok ? undefined : answer;
      });
      assert.match(denied.text, /echo is not allowed here|no-echo\/deny-echo/);
      const policy = await crs.get('mcppolicies', ns, 'no-echo');
      assert.equal(conditionOf(policy, 'Ready')?.status, 'True');
      assert.equal(policy.status.ruleCount, 1);

      await crs.delete('mcppolicies', ns, 'no-echo');
      assert.deepEqual(
        await until('the call allowed again', async () => {
          const answer = await callEcho(endpoint, 'once more');
          return answer.ok ? answer : undefined;
        }),
        { ok: true, text: 'once more' },
      );
    });

    it('deleting the McpServer takes its tools away from the endpoint', async () => {
      assert.ok(
        (await toolNames(`${base}/mcp`)).some((name) => name.endsWith('echo')),
        "the aggregated endpoint lists the server's echo",
      );
      await crs.delete('mcpservers', ns, 'tickets');
      await until('the tools gone from /mcp', async () => ((await toolNames(`${base}/mcp`)).length === 0 ? true : undefined));
      const answer = await callEcho(`${base}/servers/${ns}/tickets/mcp`, 'still there?');
      assert.equal(answer.ok, false);
      assert.match(answer.text, new RegExp(`no MCP server named ${ns}/tickets`));
    });
  },
);
