export { startGateway, type Gateway, type GatewayOptions } from './service.js';
export { toolError } from './relay.js';
export {
  planLaunch,
  asLocalUrlServer,
  expandVars,
  findInstalledBin,
  serverWorkDir,
  type LaunchPlan,
  type LaunchOptions,
} from './launch.js';
export { isToolVisible, declaredLevelOf, visibleTools, buildCatalog, type Listings, type McpItem, type ServerIdentity } from './catalog.js';
export {
  BREAKER_FAILURE_THRESHOLD,
  INITIAL_BACKOFF_MS,
  MAX_BACKOFF_MS,
  Upstream,
  type CircuitState,
  type UpstreamOptions,
  type UpstreamPoolOptions,
} from './upstream.js';
export { type Secrets, type ResolvedHeader } from './upstream-secrets.js';
export { gatewayService } from './definition.js';
export { freePort } from './local-port.js';
export {
  checkUrlShape,
  redactUrl,
  checkDestination,
  destinationPolicyOf,
  guardedFetch,
  type CheckedDestination,
  type DestinationPolicy,
  type HostLookup,
  type ResolvedAddress,
  type GuardedFetch,
  type GuardedFetchOptions,
} from './egress/index.js';
export {
  ToolPinning,
  type ToolPinningOptions,
  type ToolPin,
  type PinStatus,
  type AcceptedTool,
  type PinningPolicy,
} from './pinning/tool-pinning.js';
export * from './credentials/index.js';
export { GATEWAY_SCHEMA, GATEWAY_MIGRATIONS_DIR, migrateGateway } from './migrations.js';
