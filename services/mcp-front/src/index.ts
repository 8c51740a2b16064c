/**
 * @punk/mcp-front: the HTTP MCP endpoint of Punk in both protocol eras,
 * aggregating and namespacing the tenant's servers.
 */
export { createFront, frontOptionsOf, type Front, type FrontOptions } from './front.js';
export { namespacedName, MAX_NAME_LENGTH, NAMESPACE_SEPARATOR } from '@punk/lib';
export { SessionStore, type StoredSession, type SessionBinding } from './sessions.js';
export { authOptionsFromConfig, DEFAULT_ADMIN_SCOPE, type AuthOptions } from './auth/authenticator.js';
export { registryRouter, statusOf, type RegistryApiOptions } from './registry-api.js';
export { adminRouter, type AdminApiOptions } from './auth/admin-api.js';
export { ApiKeyStore } from './auth/api-keys.js';
export { openApiDocument } from './openapi.js';
