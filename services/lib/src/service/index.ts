export { runService, runServiceMain, type ServiceDefinition, type ServiceContext, type StartedService, type RunOptions, type RunningService } from './run.js';
export { listenHealth, type HttpHandler, type HealthServer } from './health.js';
export { TrackedBus } from './tracked-bus.js';
