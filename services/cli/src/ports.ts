import { createServer } from 'node:net';

/** Asks the kernel for a free TCP port on 127.0.0.1 (it may be taken again before use; callers bind at once). */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
  });
}
