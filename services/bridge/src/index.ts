// The public surface of the bridge: what the operator needs to run it (also alone, as ./contract), and its parts for tests.
export * from './contract.js';
export { matchEgress, type EgressDecision, type EgressDestination } from './egress/rules.js';
export { startEgressProxy, type EgressProxyOptions, type RunningEgressProxy } from './egress/proxy.js';
export { startBridge, type BridgeOptions, type RunningBridge } from './serve/bridge.js';
export { parseCommandLine, parseDuration, UsageError, USAGE, type Command, type ServeFlags, type EgressProxyFlags } from './flags.js';
