/**
 * Which servers a credential change concerns: those whose connection settings reference the credential.
 */
import type { McpServer } from '@punk/lib';
import { parseReference } from './input.js';

/**
 * Whether `server`'s `spec.headers` or `spec.env` reference credential `id`: a `cred:<id>` or `cred:<id>/<key>`
 * literal, or `valueFrom.credentialRef.name` equal to `id`. A malformed `cred:` literal references nothing (it
 * fails at connect time with its own error).
 */
export function referencesCredential(server: McpServer, id: string): boolean {
  return [...(server.spec.headers ?? []), ...(server.spec.env ?? [])].some((entry) => {
    if (entry.valueFrom?.credentialRef) return entry.valueFrom.credentialRef.name === id;
    if (entry.value === undefined) return false;
    try {
      return parseReference(entry.value)?.id === id;
    } catch {
      return false;
    }
  });
}
