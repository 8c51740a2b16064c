export {
  runService,
  runServiceMain,
  type ServiceDefinition,
  type ServiceContext,
  type StartedService,
  type RunOptions,
  type RunningService,
} from './run.js';
export {
  KEEP_ALIVE_TIMEOUT_MS,
  listenHealth,
  listenMetrics,
  listenOptionsOf,
  type HttpHandler,
  type HealthServer,
  type ListenOptions,
  type MetricsServer,
} from './health.js';
export { TrackedBus } from './tracked-bus.js';
export { limitConnections, type ConnectionLimits } from './connection-limits.js';
export * from './hosts.js';
export { methodNotAllowed, refuseOtherMethods, type RouterWithRoutes } from './methods.js';
