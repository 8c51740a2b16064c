/**
 * The checksum of the Secrets a server's pod reads. Kubernetes does not restart pods when a Secret behind an
 * env var changes; the pod template carries this checksum as an annotation, so a changed value changes the
 * template and the Deployment rolls out new pods.
 */
import { createHash } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';

/** The pod template annotation holding {@link secretChecksum}. */
export const SECRET_CHECKSUM_ANNOTATION = 'mcp.punk.dev/secret-checksum';

/**
 * SHA-256 (hex) over the Secrets' namespaces, names, and `data` keys (sorted) with their values: the same for
 * the same contents in any order of Secrets or keys, different when a name, key or value differs. Each field is
 * length-prefixed, so no two different contents hash the same bytes.
 */
export function secretChecksum(secrets: readonly V1Secret[]): string {
  const hash = createHash('sha256');
  const field = (text: string) => hash.update(`${Buffer.byteLength(text)}:${text};`);
  const id = (secret: V1Secret) => `${secret.metadata?.namespace ?? ''}/${secret.metadata?.name ?? ''}`;
  for (const secret of [...secrets].sort((a, b) => (id(a) < id(b) ? -1 : id(a) > id(b) ? 1 : 0))) {
    field(id(secret));
    const data = secret.data ?? {};
    const keys = Object.keys(data).sort();
    field(String(keys.length));
    for (const key of keys) {
      field(key);
      field(data[key]!);
    }
  }
  return hash.digest('hex');
}
