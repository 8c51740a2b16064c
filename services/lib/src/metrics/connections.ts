/**
 * Metrics of the TCP connections of Punk's HTTP listeners (service/connection-limits.ts): those open now and
 * those closed by a bound before they carried a request.
 */
import { Counter, Gauge } from 'prom-client';

/** `punk_http_connections` (gauge; label `listener`: `service` for a process's HTTP listener, `proxy` for `punk cluster`'s): TCP connections open now. */
export const httpConnections = new Gauge({
  name: 'punk_http_connections',
  help: 'TCP connections open on the HTTP listeners of this process, by listener.',
  labelNames: ['listener'] as const,
});

/**
 * `punk_http_connections_rejected_total` (counter; labels `listener`; `reason`: `max_connections` (the listener's
 * total bound), `max_connections_per_address` (the bound of one client address), `idle` (no byte within the idle
 * timeout)): connections closed by a bound of the listener before they carried a request.
 */
export const httpConnectionsRejected = new Counter({
  name: 'punk_http_connections_rejected_total',
  help: 'TCP connections an HTTP listener of this process closed at a bound (max_connections, max_connections_per_address, idle), by listener and reason.',
  labelNames: ['listener', 'reason'] as const,
});
