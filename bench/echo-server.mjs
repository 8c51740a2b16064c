#!/usr/bin/env node
// The benchmarks' upstream: a minimal SDK v2 McpServer that does no work (no timers, no I/O beyond its transport).
// Tools: `echo` ({ message }: the message back as text) and `blob` ({ bytes }: a text content of that many "x",
// for the large-result scenario).
//   node bench/echo-server.mjs stdio            over stdio (both eras: the opening exchange picks one)
//   node bench/echo-server.mjs http [port]      Streamable HTTP (both eras, stateless) on 127.0.0.1:<port>/mcp;
//                                               port from the argument, else PORT, else a free one; prints
//                                               `listening on http://127.0.0.1:<port>/mcp` once it listens
import { createServer } from 'node:http';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { z } from 'zod';

const echoInput = z.object({ message: z.string() });
const blobInput = z.object({ bytes: z.number().int().nonnegative() });

/** A fresh McpServer with the two tools (createMcpHandler builds one per request; serveStdio one per connection). */
function build() {
  const server = new McpServer({ name: 'bench-echo', version: '1.0.0' });
  server.registerTool('echo', { description: 'Returns its message', inputSchema: echoInput }, ({ message }) => ({
    content: [{ type: 'text', text: message }],
  }));
  server.registerTool('blob', { description: 'Returns a text of `bytes` bytes', inputSchema: blobInput }, ({ bytes }) => ({
    content: [{ type: 'text', text: 'x'.repeat(bytes) }],
  }));
  return server;
}

const [mode = 'stdio', portArg] = process.argv.slice(2);
if (mode === 'stdio') {
  serveStdio(build);
} else if (mode === 'http') {
  const serve = toNodeHandler(createMcpHandler(build));
  const http = createServer((req, res) => void serve(req, res));
  await new Promise((listening, failed) => {
    http.once('error', failed);
    http.listen(Number(portArg ?? process.env.PORT ?? 0), '127.0.0.1', listening);
  });
  console.log(`listening on http://127.0.0.1:${http.address().port}/mcp`);
  const stop = () => (http.closeAllConnections(), http.close(() => process.exit(0)));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
} else {
  console.error(`unknown mode "${mode}": use stdio or http [port]`);
  process.exit(2);
}
