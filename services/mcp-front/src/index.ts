/**
 * @punk/mcp-front: the HTTP MCP endpoint of Punk in both protocol eras,
 * aggregating and namespacing the tenant's servers.
 */
export { createFront, frontOptionsOf, type Front, type FrontOptions } from './front.js';
export { namespacedName, MAX_NAME_LENGTH, NAMESPACE_SEPARATOR } from '@punk/lib';
export { SessionStore, type StoredSession, type SessionBinding } from './sessions.js';
export { authOptionsFromConfig, DEFAULT_ADMIN_SCOPE, DEFAULT_PLATFORM_ADMIN_SCOPE, type AuthOptions } from './auth/authenticator.js';
export { registryRouter, statusOf, type RegistryApiOptions } from './registry-api.js';
export { approvalsRouter, type ApprovalsApiOptions } from './approvals-api.js';
export { ingestRouter, type IngestApiOptions } from './ingest-api.js';
export { adminRouter, confinedTenant, type AdminApiOptions } from './auth/admin-api.js';
export { ApiKeyStore } from './auth/api-keys.js';
export { meRouter } from './auth/me-api.js';
export { connectionsRouter } from './connections-api.js';
export { openApiDocument } from './openapi.js';
