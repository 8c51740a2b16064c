/**
 * An upstream that echoes the HTTP request headers it received, as a careless or hostile server would: an SDK v2
 * `McpServer` behind `createMcpHandler` on `node:http` (both protocol eras, stateless). The headers go back in every
 * channel a result has: the `headers` tool's text content, structured content, a progress and a log message; the
 * `fail` tool's error; the `echo://headers` resource's contents; the `echo://fail` resource's JSON-RPC error (message and data).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer, ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { z } from 'zod';

/** A running echoing server. */
export interface EchoServer {
  /** `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  /** The headers of the last HTTP request. */
  readonly lastHeaders: IncomingHttpHeaders;
  /** Every HTTP request so far: its JSON-RPC method (absent for a response or a request without a body) and `Authorization`. */
  readonly requests: ReadonlyArray<{ method?: string; authorization?: string }>;
  /** Stops listening and drops every open connection. */
  close(): Promise<void>;
}

/**
 * Starts the server on 127.0.0.1, on a free port. With `refuseBearers`, it answers HTTP 401 to every request carrying
 * an `Authorization` header (a server that accepts none of the tokens it is sent).
 */
export async function startEchoServer(options: { refuseBearers?: boolean } = {}): Promise<EchoServer> {
  let lastHeaders: IncomingHttpHeaders = {};
  const echoed = () => JSON.stringify(lastHeaders);
  const build = (): McpServer => {
    const server = new McpServer({ name: 'echo', version: '1.0.0' }, { capabilities: { logging: {} } });
    server.registerTool(
      'headers',
      {
        description: 'Echoes the request headers',
        inputSchema: z.object({}),
        outputSchema: z.object({ headers: z.record(z.string(), z.unknown()) }),
      },
      async (_args, ctx) => {
        const progressToken = ctx.mcpReq._meta?.progressToken;
        if (progressToken !== undefined)
          await ctx.mcpReq.notify({
            method: 'notifications/progress',
            params: { progressToken, progress: 1, total: 2, message: echoed() },
          });
        await ctx.mcpReq.log('info', { headers: lastHeaders, text: echoed() });
        return { content: [{ type: 'text', text: echoed() }], structuredContent: { headers: { ...lastHeaders } } };
      },
    );
    server.registerTool('fail', { description: 'Fails, quoting the request headers', inputSchema: z.object({}) }, () => {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `refused: ${echoed()}`, { headers: lastHeaders });
    });
    server.registerResource(
      'headers',
      'echo://headers',
      { description: 'The request headers', mimeType: 'application/json' },
      async () => ({
        contents: [{ uri: 'echo://headers', mimeType: 'application/json', text: echoed() }],
      }),
    );
    server.registerResource('failing', 'echo://fail', { description: 'Fails, quoting the request headers' }, () => {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `refused: ${echoed()}`, { headers: lastHeaders });
    });
    return server;
  };
  const handler = createMcpHandler(build);
  const serve = toNodeHandler(handler);
  const requests: Array<{ method?: string; authorization?: string }> = [];
  const http = createServer((req, res) => {
    lastHeaders = req.headers;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let body: unknown;
      try {
        body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
      } catch {
        body = undefined;
      }
      const method = (body as { method?: unknown } | undefined)?.method;
      requests.push({
        ...(typeof method === 'string' && { method }),
        ...(req.headers.authorization !== undefined && { authorization: req.headers.authorization }),
      });
      if (options.refuseBearers && req.headers.authorization !== undefined) {
        res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"' }).end();
        return;
      }
      void serve(req, res, body);
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(0, '127.0.0.1', () => {
      resolve();
    });
  });
  return {
    url: `http://127.0.0.1:${String((http.address() as AddressInfo).port)}/mcp`,
    get lastHeaders() {
      return lastHeaders;
    },
    requests,
    close: async () => {
      await handler.close();
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}
