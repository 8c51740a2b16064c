/**
 * The Prometheus side of every Punk process: `GET /metrics` in the text exposition format (Prometheus
 * "Exposition formats", text 0.0.4) from prom-client's default registry, and the process metrics, collected
 * once per process. docs/observability.md lists every metric family.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { collectDefaultMetrics, register } from 'prom-client';

let processMetrics = false;

/**
 * Starts prom-client's default process and Node.js metrics (`process_cpu_seconds_total`,
 * `process_resident_memory_bytes`, `nodejs_eventloop_lag_seconds`, `nodejs_heap_size_used_bytes`, …) on the
 * default registry, without a prefix, so the usual Node.js dashboards and alerts apply as they are. Idempotent:
 * several listeners (or services) in one process collect them once.
 */
export function collectProcessMetrics(): void {
  if (processMetrics) return;
  processMetrics = true;
  collectDefaultMetrics();
}

/**
 * Answers one request for `/metrics`: `GET` (and `HEAD`) get every metric of the default registry as
 * `text/plain; version=0.0.4; charset=utf-8`, never cached; any other method gets 405 with `Allow: GET, HEAD`
 * and a JSON error naming the method. A collection that fails answers 500 naming the failure.
 */
export function serveMetrics(req: IncomingMessage, res: ServerResponse): void {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify({ error: { code: 'MethodNotAllowed', message: `${req.method} is not allowed on /metrics: use GET` } }));
    return;
  }
  register.metrics().then(
    (text) => {
      res.writeHead(200, { 'content-type': register.contentType, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : text);
    },
    (error: unknown) => {
      res.writeHead(500, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(
        JSON.stringify({
          error: { code: 'MetricsFailed', message: `collecting metrics failed: ${error instanceof Error ? error.message : String(error)}` },
        }),
      );
    },
  );
}
