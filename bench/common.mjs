// What the benchmark scripts share: the repository root, a free port, percentiles,
// and a manifest directory holding server-everything over stdio.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The entry point of @modelcontextprotocol/server-everything. */
export const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');

/** A free TCP port on 127.0.0.1. */
export const freePort = () =>
  new Promise((done) => {
    const probe = createServer();
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => done(port));
    });
  });

/** Resolves once something accepts TCP connections on 127.0.0.1:`port` (a server started as a child process). */
export async function untilListening(port) {
  for (;;) {
    const up = await new Promise((done) => {
      const socket = connect(port, '127.0.0.1', () => (socket.destroy(), done(true)));
      socket.once('error', () => done(false));
    });
    if (up) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The `p`th percentile (0-100) of ascending `sorted` values. */
export const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];

/** Milliseconds, two decimals. */
export const fmt = (ms) => `${ms.toFixed(2)} ms`;

/** A fresh temporary directory (`punk-<prefix>-…`) holding one McpServer manifest: `everything`, server-everything over stdio. */
export async function everythingManifestDir(prefix) {
  const dir = await mkdtemp(join(tmpdir(), `punk-${prefix}-`));
  await writeFile(
    join(dir, 'everything.yaml'),
    `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: everything }
spec:
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(everything)}]
  image: local/everything
  args: [stdio]
`,
  );
  return dir;
}
