/**
 * An McpCredential as the gateway's vault takes it (`credentials.apply` on `punk.gateway.admin`): the one
 * translation of the operator (values from a Secret) and of `punk up` (values from environment variables and files).
 */
import type { McpCredentialSpec } from './mcpcredential.js';

/** The body of `credentials.apply`: `{ id, type, data }` as the gateway's credentials API takes it. */
export interface CredentialBody {
  id: string;
  type: 'static' | 'oauth2';
  data: Record<string, string>;
}

/**
 * The credential body of McpCredential `name` from its spec and its values (key to value): the values and, for
 * oauth2, the spec's `tokenUrl`, `clientId` and `scopes` as `token_url`, `client_id` and `scope` (space-separated,
 * RFC 6749 §3.3), which win over the values'.
 */
export function credentialBody(name: string, spec: McpCredentialSpec, values: Record<string, string>): CredentialBody {
  const data: Record<string, string> = { ...values };
  if (spec.type === 'oauth2' && spec.oauth2) {
    if (spec.oauth2.tokenUrl !== undefined) data.token_url = spec.oauth2.tokenUrl;
    if (spec.oauth2.clientId !== undefined) data.client_id = spec.oauth2.clientId;
    if (spec.oauth2.scopes !== undefined) data.scope = spec.oauth2.scopes.join(' ');
  }
  return { id: name, type: spec.type, data };
}
