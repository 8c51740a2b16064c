// The public surface of the bridge: what the operator needs to run it, and its parts for tests.
export { egressAllowRules, egressProxyArgs, matchEgress, parseEgressRule, EGRESS_PROXY_PORT, type EgressRule, type EgressItem, type EgressDecision, type EgressDestination } from './egress/rules.js';
export { egressProxyEnv, type EnvVar } from './egress/env.js';
export { startEgressProxy, type EgressProxyOptions, type RunningEgressProxy } from './egress/proxy.js';
export { startBridge, type BridgeOptions, type RunningBridge } from './serve/bridge.js';
export { parseCommandLine, parseDuration, UsageError, USAGE, type Command, type ServeFlags, type EgressProxyFlags } from './flags.js';
export { serveArgs, BRIDGE_PORT, BRIDGE_PATH } from './serve/args.js';
