/**
 * The checksum of the Secrets a server's pod reads. Kubernetes does not restart pods when a Secret behind an
 * env var changes; the pod template carries this checksum as an annotation, so a changed Secret changes the
 * template and the Deployment rolls out new pods. It is made from each Secret's identity and version, never
 * its data: anyone who may read Deployments reads the annotation, and a hash of values would let them test
 * guesses of a low-entropy secret offline.
 */
import { createHash } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';

/** The pod template annotation holding {@link secretChecksum}. */
export const SECRET_CHECKSUM_ANNOTATION = 'mcp.punk.dev/secret-checksum';

/**
 * SHA-256 (hex) over the Secrets' namespaces, names, `metadata.uid` and `metadata.resourceVersion`, sorted by
 * namespace and name: the same for the same Secrets in any order, different when a Secret is added, removed,
 * recreated (new uid) or edited (the API server gives every write a new resourceVersion). The Secrets' `data`
 * is not read. Each field is length-prefixed, so no two different lists hash the same bytes.
 */
export function secretChecksum(secrets: readonly V1Secret[]): string {
  const hash = createHash('sha256');
  const field = (text: string) => hash.update(`${Buffer.byteLength(text)}:${text};`);
  const id = (secret: V1Secret) => `${secret.metadata?.namespace ?? ''}/${secret.metadata?.name ?? ''}`;
  for (const secret of [...secrets].sort((a, b) => (id(a) < id(b) ? -1 : id(a) > id(b) ? 1 : 0))) {
    field(id(secret));
    field(secret.metadata?.uid ?? '');
    field(secret.metadata?.resourceVersion ?? '');
  }
  return hash.digest('hex');
}
