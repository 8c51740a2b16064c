export { collectProcessMetrics, serveMetrics } from './exposition.js';
export { errorTypeOf, jsonRpcErrorTypeOf, FAST_BUCKETS, MCP_DURATION_BUCKETS, NO_ERROR, OTHER, secondsSince } from './labels.js';
export { busAppendDuration, busRequestDuration, busServedInFlight, observeBusCall, subjectFamily } from './bus.js';
export { httpConnections, httpConnectionsRejected } from './connections.js';
