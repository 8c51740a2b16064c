/**
 * The second upstream of the conformance harness: the fixture's tools, resources and prompts
 * (fixture-server.ts) served the way SDK v2 servers usually are, with nothing shaped for Punk:
 *
 * - over HTTP (`--port <n>`), `createMcpHandler` with its defaults behind `toNodeHandler` on a plain
 *   `node:http` server: 2026-07-28 requests served per request (MRTR, `subscriptions/listen`), 2025-era
 *   requests by its stateless legacy fallback (no session, no GET stream);
 * - over stdio (`--stdio`), `serveStdio`, which pins each connection's era from its opening message.
 *
 * The 2025-era client-input tools send their requests themselves (`ctx.mcpReq.requestSampling`,
 * `elicitInput`), the usual way of a 2025-era server; the 2026-07-28 ones return `inputRequired(...)`.
 *
 * Run: `node e2e/dist/conformance/sdk-server.js --port 4201` (prints `sdk server listening on
 * http://127.0.0.1:4201/mcp`), or `--stdio`.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { buildFixtureServer, connectedFixtureServer, type FixtureHttpServer } from './fixture-server.js';

/**
 * Serves the SDK-style server over HTTP on `127.0.0.1:<port>` (0: a free port); its URL names `/mcp` (the handler
 * answers on any path).
 * @throws Error when the port cannot be bound.
 */
export async function startSdkHttp(port: number): Promise<FixtureHttpServer> {
  const handler = createMcpHandler(() =>
    buildFixtureServer({
      serverRequests: 'push',
      announce: (list) => {
        if (list === 'tools') handler.notify.toolsChanged();
        else handler.notify.promptsChanged();
      },
    }),
  );
  const serve = toNodeHandler(handler);
  const http = createServer((req, res) => void serve(req, res));
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(port, '127.0.0.1', () => {
      resolve();
    });
  });
  return {
    url: `http://127.0.0.1:${String((http.address() as AddressInfo).port)}/mcp`,
    close: async () => {
      await handler.close();
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  if (args.includes('--stdio')) {
    serveStdio(() => connectedFixtureServer({ serverRequests: 'push' }));
  } else {
    const index = args.indexOf('--port');
    const port = index === -1 ? 0 : Number(args[index + 1]);
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      console.error(`--port must be a TCP port (0-65535), not ${String(args[index + 1])}`);
      process.exit(2);
    }
    const server = await startSdkHttp(port);
    console.log(`sdk server listening on ${server.url}`);
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void server.close().then(() => process.exit(0)));
  }
}
