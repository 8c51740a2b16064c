export {
  runService,
  runServiceMain,
  type ServiceDefinition,
  type ServiceContext,
  type StartedService,
  type RunOptions,
  type RunningService,
} from './run.js';
export { listenHealth, listenMetrics, type HttpHandler, type HealthServer, type ListenOptions, type MetricsServer } from './health.js';
export { TrackedBus } from './tracked-bus.js';
export * from './hosts.js';
