/**
 * Reconciles one McpCredential: reads its Secret, sends the credential to the gateway's vault with
 * `credentials.apply` (`punk.gateway.admin`), and writes status from what the vault reports through
 * `credentials.get`: key names, expiry and refresh health, never a value.
 *
 * Deletion uses a finalizer, `mcp.punk.dev/vault`: the credential lives outside the cluster (the gateway's
 * encrypted store), where owner references cannot reach, and a missed delete event would leave a usable secret
 * behind. The finalizer keeps the object until `credentials.delete` succeeded. (McpServer and McpPolicy entries
 * in NATS KV need none: they are rebuilt from the objects, and the manager's orphan sweep removes what no
 * object backs; the vault cannot be swept that way, since it also holds credentials made through the API.)
 */
import { createHash } from 'node:crypto';
import type { KubernetesObject, V1Secret } from '@kubernetes/client-node';
import { deadlines, errorMessage, mcpCredentialSpecSchema, PunkError, subjects, type McpCredentialSpec } from '@punk/lib';
import { setFinalizers } from './apply.js';
import { operatorPrincipal, type ReconcileContext } from './context.js';
import { conditionsOf, degraded, fieldPath, healthy, setConditions, writeStatus, type ConditionDecision } from './status.js';

/** The finalizer that holds a deleted McpCredential until the vault has forgotten it. */
export const VAULT_FINALIZER = 'mcp.punk.dev/vault';

/** Deadline of one admin request to the gateway from a reconcile, in milliseconds. */
const GATEWAY_TIMEOUT_MS = Math.min(deadlines.gatewayAdminMs, 15_000);

/** The body of `credentials.apply`: `{ id, type, data }` as the gateway's credentials API takes it. */
export interface CredentialBody {
  id: string;
  type: 'static' | 'oauth2';
  data: Record<string, string>;
}

/** What `credentials.get` answers, the fields the status shows. */
interface CredentialInfo {
  keys?: string[];
  expiresAt?: string;
  lastRefreshAt?: string;
  refreshError?: string;
}

/**
 * The credential body of McpCredential `name` from its spec and its Secret's decoded data: the Secret's keys
 * (only `secretRef.keys` when given) and, for oauth2, the spec's `tokenUrl`, `clientId` and `scopes` as
 * `token_url`, `client_id` and `scope` (space-separated, RFC 6749 §3.3), which win over the Secret's.
 * @throws PunkError `KeyMissing` naming `spec.secretRef.keys[i]` when the Secret lacks a listed key.
 */
export function credentialBody(name: string, spec: McpCredentialSpec, secretData: Record<string, string>): CredentialBody {
  const data: Record<string, string> = {};
  if (spec.secretRef.keys) {
    spec.secretRef.keys.forEach((key, i) => {
      if (secretData[key] === undefined) throw new PunkError('KeyMissing', `spec.secretRef.keys[${i}]: Secret ${spec.secretRef.name} has no key ${key}`, { field: `spec.secretRef.keys[${i}]` });
      data[key] = secretData[key];
    });
  } else Object.assign(data, secretData);
  if (spec.type === 'oauth2' && spec.oauth2) {
    if (spec.oauth2.tokenUrl !== undefined) data.token_url = spec.oauth2.tokenUrl;
    if (spec.oauth2.clientId !== undefined) data.client_id = spec.oauth2.clientId;
    if (spec.oauth2.scopes !== undefined) data.scope = spec.oauth2.scopes.join(' ');
  }
  return { id: name, type: spec.type, data };
}

/**
 * `sourceChecksum` of an apply: SHA-256 (hex) of the body, keys sorted. The body is made of the Secret's data and
 * the spec's oauth2 settings, so a change of either re-applies, and an unchanged one lets the gateway keep a token
 * it refreshed since.
 */
export function credentialChecksum(body: CredentialBody): string {
  const sorted = Object.fromEntries(Object.entries(body.data).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return createHash('sha256').update(JSON.stringify({ id: body.id, type: body.type, data: sorted })).digest('hex');
}

/** A Secret's `data`, decoded from base64 (as UTF-8 text). */
export function secretValues(secret: V1Secret): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(secret.data ?? {})) out[key] = Buffer.from(value, 'base64').toString('utf8');
  return out;
}

type CredentialObject = KubernetesObject & { spec?: unknown; status?: Record<string, unknown> };

/** Reconciles McpCredential objects into the gateway's vault. */
export class McpCredentialReconciler {
  constructor(private readonly context: ReconcileContext) {}

  /**
   * Brings the vault's credential `namespace/name` and the object's status in line with the object.
   * @throws when the gateway or the API server failed; the queue retries (status names the failure first).
   */
  async reconcile(namespace: string, name: string): Promise<void> {
    const object = this.context.caches.McpCredential.get(name, namespace) as CredentialObject | undefined;
    if (!object) return;
    const meta = object.metadata!;
    const finalizers = meta.finalizers ?? [];
    if (meta.deletionTimestamp) {
      if (!finalizers.includes(VAULT_FINALIZER)) return;
      await this.deleteFromVault(namespace, name);
      await setFinalizers(this.context.clients, 'McpCredential', namespace, name, meta.resourceVersion!, finalizers.filter(f => f !== VAULT_FINALIZER));
      return;
    }
    if (!finalizers.includes(VAULT_FINALIZER)) {
      // Added before anything reaches the vault, so no credential exists there without it.
      await setFinalizers(this.context.clients, 'McpCredential', namespace, name, meta.resourceVersion!, [...finalizers, VAULT_FINALIZER]);
      return; // the update event brings the object back with its new resourceVersion
    }
    const generation = meta.generation ?? 0;
    const subject = { kind: 'McpCredential' as const, metadata: { name, namespace, uid: meta.uid, resourceVersion: meta.resourceVersion }, status: object.status };
    const write = (decisions: ConditionDecision[], extra: Record<string, unknown>) =>
      writeStatus(this.context.clients, this.context.recorder, subject, {
        observedGeneration: generation,
        conditions: setConditions(conditionsOf(object), decisions, this.context.now(), generation),
        ...extra,
      });
    const kept = pick(object.status, ['keys', 'expiresAt', 'lastRefreshTime', 'refreshHealth']);

    const parsed = mcpCredentialSpecSchema.safeParse(object.spec);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const message = `spec.${fieldPath(issue.path)}: ${issue.message}`;
      await write(degraded('InvalidSpec', message), { ...kept, lastError: message });
      return;
    }
    const spec = parsed.data;
    const secret = this.context.caches.Secret.get(spec.secretRef.name, namespace) as V1Secret | undefined;
    if (!secret) {
      const message = `spec.secretRef.name: Secret ${spec.secretRef.name} not found in namespace ${namespace}`;
      await write(degraded('SecretMissing', message), { ...kept, lastError: message });
      return;
    }
    let body: CredentialBody;
    try {
      body = credentialBody(name, spec, secretValues(secret));
    } catch (error) {
      if (!(error instanceof PunkError)) throw error;
      await write(degraded(error.code, error.message), { ...kept, lastError: error.message });
      return;
    }
    let info: CredentialInfo;
    try {
      await this.context.bus.request(subjects.gatewayAdmin, { op: 'credentials.apply', tenant: namespace, principal: operatorPrincipal(namespace), body, sourceChecksum: credentialChecksum(body) }, { timeoutMs: GATEWAY_TIMEOUT_MS });
      const reply = (await this.context.bus.request(subjects.gatewayAdmin, { op: 'credentials.get', tenant: namespace, id: name }, { timeoutMs: GATEWAY_TIMEOUT_MS })) as { credential?: CredentialInfo };
      info = reply.credential ?? {};
    } catch (error) {
      const message = `the gateway did not store the credential: ${errorMessage(error)}`;
      const reason = error instanceof PunkError && ['BusTimeout', 'BusNoResponders', 'BusUnavailable'].includes(error.code) ? 'GatewayUnavailable' : 'ApplyFailed';
      await write(degraded(reason, message), { ...kept, lastError: message });
      throw error;
    }
    const refreshHealth = spec.type !== 'oauth2' ? 'NotApplicable' : info.refreshError ? 'Failing' : 'Healthy';
    const status = {
      keys: info.keys ?? Object.keys(body.data).sort(),
      ...(info.expiresAt !== undefined && { expiresAt: info.expiresAt }),
      ...(info.lastRefreshAt !== undefined && { lastRefreshTime: info.lastRefreshAt }),
      refreshHealth,
      ...(info.refreshError !== undefined && { lastError: info.refreshError }),
    };
    const decisions =
      refreshHealth === 'Failing' ? degraded('RefreshFailing', `the gateway's last token refresh failed: ${info.refreshError}`) : healthy('Stored', `the vault holds the keys of Secret ${spec.secretRef.name}`);
    await write(decisions, status);
  }

  private async deleteFromVault(namespace: string, name: string): Promise<void> {
    try {
      await this.context.bus.request(subjects.gatewayAdmin, { op: 'credentials.delete', tenant: namespace, principal: operatorPrincipal(namespace), id: name }, { timeoutMs: GATEWAY_TIMEOUT_MS });
    } catch (error) {
      if (error instanceof PunkError && error.code === 'CredentialNotFound') return;
      throw error;
    }
  }
}

function pick(status: Record<string, unknown> | undefined, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.filter(k => status?.[k] !== undefined).map(k => [k, status![k]]));
}
