// The bridge's command-line contract, for those who write it into pods (the operator): the ports, the path, the
// `serve` and `egress-proxy` arguments, the `--allow` rule format and its checker, the proxy environment. Pure
// helpers only: nothing here loads the MCP SDK, pino or node:http (`@punk/bridge/contract`).
export {
  checkEgressItem,
  egressAllowRules,
  egressProxyArgs,
  egressRuleOf,
  parseEgressRule,
  EgressItemError,
  EGRESS_PROXY_PORT,
  type EgressEntry,
  type EgressItem,
  type EgressRule,
} from './egress/rules.js';
export { egressProxyEnv, type EnvVar } from './egress/env.js';
export { serveArgs, serveFlags, BRIDGE_PORT, BRIDGE_PATH, type ServeOptions } from './serve/args.js';
