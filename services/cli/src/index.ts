export { startEmbedded, type EmbeddedOptions, type EmbeddedPunk } from './embedded.js';
export { freePort } from '@punk/gateway';
export { startProxy, type Proxy, type ProxyBackends } from './proxy.js';
export { PLATFORM_TOOLS } from './mcp-tools.js';
