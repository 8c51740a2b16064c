/** Serves a front's router on a free port of 127.0.0.1, for tests that talk to it over HTTP. */
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { Front } from '../index.js';

/** Listens with `front.router` alone; `base` is `http://127.0.0.1:<port>`. Close `http` when done. */
export async function listen(front: Front): Promise<{ http: HttpServer; base: string }> {
  const app = express();
  app.use(front.router);
  const http = await new Promise<HttpServer>((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve(server));
  });
  return { http, base: `http://127.0.0.1:${(http.address() as AddressInfo).port}` };
}
