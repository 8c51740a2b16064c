/**
 * Reconciles one McpCredential: reads its Secret, sends the credential to the gateway's vault with
 * `credentials.apply` (`punk.gateway.admin`), and writes status from what the vault reports through
 * `credentials.get`: key names, expiry and refresh health, never a value.
 *
 * Deletion uses a finalizer, `mcp.punk.dev/vault`: the credential lives outside the cluster (the gateway's
 * encrypted store), where owner references cannot reach, and a missed delete event would leave a usable secret
 * behind. The finalizer keeps the object until `credentials.delete` succeeded, or at most the finalizer timeout
 * (5 minutes by default) after the deletion: then it is released with a Warning Event `FinalizerTimedOut` saying
 * the vault may still hold the credential and how to delete it, so a cluster without a gateway can still delete it. (McpServer and McpPolicy entries
 * in NATS KV need none: they are rebuilt from the objects, and the manager's orphan sweep removes what no
 * object backs; the vault cannot be swept that way, since it also holds credentials made through the API.)
 */
import { createHash } from 'node:crypto';
import type { KubernetesObject, V1Secret } from '@kubernetes/client-node';
import {
  API_GROUP,
  credentialBody,
  deadlines,
  errorMessage,
  mcpCredentialSpecSchema,
  PunkError,
  subjects,
  type CredentialBody,
  type McpCredentialSpec,
} from '@punk/lib/controller';
import { setFinalizers } from './apply.js';
import { operatorPrincipal, type ReconcileContext } from './context.js';
import { API_VERSION_NAME } from './kube.js';
import { conditionsOf, degraded, fieldPath, healthy, setConditions, writeStatus, type ConditionDecision } from './status.js';

/** The finalizer that holds a deleted McpCredential until the vault has forgotten it. */
export const VAULT_FINALIZER = 'mcp.punk.dev/vault';

/** Deadline of one admin request to the gateway from a reconcile, in milliseconds. */
const GATEWAY_TIMEOUT_MS = Math.min(deadlines.gatewayAdminMs, 15_000);

/** What `credentials.get` answers, the fields the status shows. */
interface CredentialInfo {
  keys?: string[];
  expiresAt?: string;
  lastRefreshAt?: string;
  refreshError?: string;
}

/**
 * The credential body of McpCredential `name` from its spec and its Secret's decoded data: the Secret's keys
 * (only `secretRef.keys` when given), through lib's `credentialBody` (the oauth2 settings of the spec win).
 * @throws PunkError `KeyMissing` naming `spec.secretRef.keys[i]` when the Secret lacks a listed key.
 */
export function secretCredentialBody(
  name: string,
  spec: McpCredentialSpec,
  secretRef: NonNullable<McpCredentialSpec['secretRef']>,
  secretData: Record<string, string>,
): CredentialBody {
  const data: Record<string, string> = {};
  if (secretRef.keys) {
    secretRef.keys.forEach((key, i) => {
      if (secretData[key] === undefined)
        throw new PunkError('KeyMissing', `spec.secretRef.keys[${i}]: Secret ${secretRef.name} has no key ${key}`, {
          field: `spec.secretRef.keys[${i}]`,
        });
      data[key] = secretData[key];
    });
  } else Object.assign(data, secretData);
  return credentialBody(name, spec, data);
}

/**
 * `sourceChecksum` of an apply: SHA-256 (hex) of what the body was made from, named without its values: the
 * McpCredential's uid and generation (its spec holds no secret) and the Secret's uid and resourceVersion. A
 * change of either re-applies, an unchanged one lets the gateway keep a token it refreshed since; the gateway's
 * database stores this checksum, so it must not be a hash of the secret values (a low-entropy value could be
 * found by trying candidates against it).
 */
export function credentialChecksum(credential: { uid?: string | undefined; generation?: number | undefined }, secret: V1Secret): string {
  const source = {
    credential: [credential.uid ?? '', credential.generation ?? 0],
    secret: [secret.metadata?.uid ?? '', secret.metadata?.resourceVersion ?? ''],
  };
  return createHash('sha256').update(JSON.stringify(source)).digest('hex');
}

/**
 * Checks an oauth2 credential `body` as the gateway will (it needs `access_token`, or `refresh_token` with
 * `token_url`; `client_secret` needs `client_id`; RFC 6749 §6 and §2.3.1), so the error names the McpCredential's
 * own field or Secret key rather than the gateway's `data.<key>`.
 * @throws PunkError `InvalidSpec` naming `spec.oauth2.tokenUrl`, `spec.oauth2.clientId` or the Secret's keys.
 */
export function checkOAuth2Body(spec: McpCredentialSpec, body: CredentialBody): void {
  if (body.type !== 'oauth2') return;
  const secret = spec.secretRef!.name;
  const data = body.data;
  if (data.refresh_token !== undefined && data.token_url === undefined)
    throw new PunkError(
      'InvalidSpec',
      `spec.oauth2.tokenUrl: is required with a refresh_token (the endpoint that refreshes it); set it, or key token_url in Secret ${secret}`,
      { field: 'spec.oauth2.tokenUrl' },
    );
  if (data.access_token === undefined && data.refresh_token === undefined)
    throw new PunkError(
      'InvalidSpec',
      `spec.secretRef.name: Secret ${secret} needs key access_token or refresh_token for an oauth2 credential`,
      { field: 'spec.secretRef.name' },
    );
  if (data.client_secret !== undefined && data.client_id === undefined)
    throw new PunkError(
      'InvalidSpec',
      `spec.oauth2.clientId: is required with key client_secret of Secret ${secret} (RFC 6749 §2.3.1); set it, or key client_id in the Secret`,
      { field: 'spec.oauth2.clientId' },
    );
}

/** Where each body key the spec may set comes from (the others are keys of the Secret). */
const SPEC_KEYS: Record<string, string> = {
  token_url: 'spec.oauth2.tokenUrl',
  client_id: 'spec.oauth2.clientId',
  scope: 'spec.oauth2.scopes',
};

/**
 * A gateway validation message (`data.<key>: problem`) in the McpCredential's terms: `spec.oauth2.tokenUrl: …` for
 * a key the spec set, else `Secret <name> key <key>: …`. Other messages are returned as they are.
 */
export function credentialFieldMessage(spec: McpCredentialSpec, message: string): string {
  const match = /^data\.([^:]+): ([\s\S]*)$/.exec(message);
  if (!match) return message;
  const [, key, problem] = match as unknown as [string, string, string];
  const fromSpec = spec.type === 'oauth2' && SPEC_KEYS[key] !== undefined && specSets(spec, key);
  const named = fromSpec ? SPEC_KEYS[key]! : `Secret ${spec.secretRef!.name} key ${key}`;
  return `${named}: ${problem.replace(/\bdata\.([A-Za-z0-9._-]+)/g, (_, k: string) => (spec.type === 'oauth2' && specSets(spec, k) ? SPEC_KEYS[k]! : `key ${k}`))}`;
}

function specSets(spec: McpCredentialSpec, key: string): boolean {
  const o = spec.oauth2;
  return (
    (key === 'token_url' && o?.tokenUrl !== undefined) ||
    (key === 'client_id' && o?.clientId !== undefined) ||
    (key === 'scope' && o?.scopes !== undefined)
  );
}

/** Codes of a bus request that got no answer: the gateway is down or unreachable, nothing is known of the vault. */
function gatewayUnavailable(error: unknown): boolean {
  return error instanceof PunkError && ['BusTimeout', 'BusNoResponders', 'BusUnavailable'].includes(error.code);
}

/** A Secret's `data`, decoded from base64 (as UTF-8 text). */
export function secretValues(secret: V1Secret): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(secret.data ?? {})) out[key] = Buffer.from(value, 'base64').toString('utf8');
  return out;
}

type CredentialObject = KubernetesObject & { spec?: unknown; status?: Record<string, unknown> };

/** How long a deleted McpCredential waits for the gateway to remove its vault copy before its finalizer is released. */
export const DEFAULT_FINALIZER_TIMEOUT_MS = 5 * 60_000;

/** Reconciles McpCredential objects into the gateway's vault. */
export class McpCredentialReconciler {
  /** @param finalizerTimeoutMs the bounded wait of the finalizer, from `metadata.deletionTimestamp` (milliseconds). */
  constructor(
    private readonly context: ReconcileContext,
    private readonly finalizerTimeoutMs = DEFAULT_FINALIZER_TIMEOUT_MS,
  ) {}

  /**
   * Brings the vault's credential `namespace/name` and the object's status in line with the object.
   * @throws when the gateway or the API server failed; the queue retries (status names the failure first).
   */
  async reconcile(namespace: string, name: string): Promise<void> {
    const object = this.context.caches.McpCredential.get(name, namespace) as CredentialObject | undefined;
    if (!object) return;
    const meta = object.metadata!;
    const finalizers = meta.finalizers ?? [];
    const generation = meta.generation ?? 0;
    const subject = {
      kind: 'McpCredential' as const,
      metadata: { name, namespace, uid: meta.uid, resourceVersion: meta.resourceVersion },
      status: object.status,
    };
    const write = (decisions: ConditionDecision[], extra: Record<string, unknown>) =>
      writeStatus(this.context.clients, this.context.recorder, subject, {
        observedGeneration: generation,
        conditions: setConditions(conditionsOf(object), decisions, this.context.now(), generation),
        ...extra,
      });
    const kept = pick(object.status, ['keys', 'expiresAt', 'lastRefreshTime', 'refreshHealth']);

    if (meta.deletionTimestamp) {
      if (!finalizers.includes(VAULT_FINALIZER)) return;
      try {
        await this.deleteFromVault(namespace, name);
      } catch (error) {
        // The object stays (finalizer) until the vault forgot it or the wait is over; say so rather than look Stored.
        const deadline = new Date(new Date(meta.deletionTimestamp).getTime() + this.finalizerTimeoutMs);
        if (this.context.now() >= deadline) {
          const note = `finalizer ${VAULT_FINALIZER} released after waiting ${Math.round(this.finalizerTimeoutMs / 1000)} s for the gateway (${errorMessage(error)}): the vault may still hold credential ${name} of tenant ${namespace}; delete it through the admin API (DELETE /api/v1/credentials/${name})`;
          this.context.log.warn({ credential: `${namespace}/${name}` }, note);
          await this.context.recorder.record(
            { apiVersion: `${API_GROUP}/${API_VERSION_NAME}`, kind: 'McpCredential', metadata: subject.metadata },
            'Warning',
            'FinalizerTimedOut',
            'Delete',
            note,
          );
          await setFinalizers(
            this.context.clients,
            'McpCredential',
            namespace,
            name,
            meta.resourceVersion!,
            finalizers.filter((f) => f !== VAULT_FINALIZER),
          );
          return;
        }
        const waiting = `finalizer ${VAULT_FINALIZER} waits until ${deadline.toISOString()} at most, then releases the object`;
        const message = gatewayUnavailable(error)
          ? `the McpCredential is being deleted; its copy in the gateway's vault is removed once the gateway answers (${errorMessage(error)}); ${waiting}`
          : `the McpCredential is being deleted; the gateway did not remove its copy from the vault: ${errorMessage(error)}; ${waiting}`;
        await write(degraded(gatewayUnavailable(error) ? 'GatewayUnavailable' : 'DeleteFailed', message), { ...kept, lastError: message });
        throw error;
      }
      await setFinalizers(
        this.context.clients,
        'McpCredential',
        namespace,
        name,
        meta.resourceVersion!,
        finalizers.filter((f) => f !== VAULT_FINALIZER),
      );
      return;
    }
    if (!finalizers.includes(VAULT_FINALIZER)) {
      // Added before anything reaches the vault, so no credential exists there without it.
      await setFinalizers(this.context.clients, 'McpCredential', namespace, name, meta.resourceVersion!, [...finalizers, VAULT_FINALIZER]);
      return; // the update event brings the object back with its new resourceVersion
    }
    const parsed = mcpCredentialSpecSchema.safeParse(object.spec);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const message = `spec.${fieldPath(issue.path)}: ${issue.message}`;
      await write(degraded('InvalidSpec', message), { ...kept, lastError: message });
      return;
    }
    const spec = parsed.data;
    if (!spec.secretRef) {
      const message =
        'spec.values: values from environment variables and files are read by punk up only; in a cluster name a Secret with spec.secretRef';
      await write(degraded('InvalidSpec', message), { ...kept, lastError: message });
      return;
    }
    const secretRef = spec.secretRef;
    const secret = this.context.caches.Secret.get(secretRef.name, namespace) as V1Secret | undefined;
    if (!secret) {
      // A deleted Secret is a revoked credential: the vault must stop serving it, and the status stops listing keys.
      const message = `spec.secretRef.name: Secret ${secretRef.name} not found in namespace ${namespace}; the credential was removed from the gateway's vault (the Secret's return applies it again)`;
      // Written only once credentials.delete succeeded: a later reconcile (a resync) need not ask again.
      const removed =
        object.status?.keys === undefined &&
        conditionsOf(object).some((c) => c.type === 'Degraded' && c.reason === 'SecretMissing' && c.message === message);
      if (!removed) {
        try {
          await this.deleteFromVault(namespace, name);
        } catch (error) {
          const waiting = `spec.secretRef.name: Secret ${secretRef.name} not found in namespace ${namespace}; the credential is removed from the gateway's vault once the gateway answers (${errorMessage(error)})`;
          await write(degraded('SecretMissing', waiting), { ...kept, lastError: waiting }); // the vault still holds the keys
          throw error;
        }
      }
      await write(degraded('SecretMissing', message), { lastError: message });
      return;
    }
    let body: CredentialBody;
    try {
      body = secretCredentialBody(name, spec, secretRef, secretValues(secret));
      checkOAuth2Body(spec, body);
    } catch (error) {
      if (!(error instanceof PunkError)) throw error;
      await write(degraded(error.code, error.message), { ...kept, lastError: error.message });
      return;
    }
    let info: CredentialInfo;
    try {
      await this.context.bus.request(
        subjects.gatewayAdmin,
        {
          op: 'credentials.apply',
          tenant: namespace,
          principal: operatorPrincipal(namespace),
          body,
          sourceChecksum: credentialChecksum(meta, secret),
        },
        { timeoutMs: GATEWAY_TIMEOUT_MS },
      );
      const reply = (await this.context.bus.request(
        subjects.gatewayAdmin,
        { op: 'credentials.get', tenant: namespace, id: name },
        { timeoutMs: GATEWAY_TIMEOUT_MS },
      )) as { credential?: CredentialInfo };
      info = reply.credential ?? {};
    } catch (error) {
      if (error instanceof PunkError && error.code === 'InvalidCredential') {
        // The gateway refused the content: retrying sends the same; an edit of the Secret or the spec reconciles.
        const message = `the gateway refused the credential: ${credentialFieldMessage(spec, error.message)}`;
        await write(degraded('InvalidSpec', message), { ...kept, lastError: message });
        return;
      }
      const message = `the gateway did not store the credential: ${errorMessage(error)}`;
      await write(degraded(gatewayUnavailable(error) ? 'GatewayUnavailable' : 'ApplyFailed', message), { ...kept, lastError: message });
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
      refreshHealth === 'Failing'
        ? degraded('RefreshFailing', `the gateway's last token refresh failed: ${info.refreshError}`)
        : healthy('Stored', `the vault holds the keys of Secret ${secretRef.name}`);
    await write(decisions, status);
  }

  private async deleteFromVault(namespace: string, name: string): Promise<void> {
    try {
      await this.context.bus.request(
        subjects.gatewayAdmin,
        { op: 'credentials.delete', tenant: namespace, principal: operatorPrincipal(namespace), id: name },
        { timeoutMs: GATEWAY_TIMEOUT_MS },
      );
    } catch (error) {
      if (error instanceof PunkError && error.code === 'CredentialNotFound') return;
      throw error;
    }
  }
}

function pick(status: Record<string, unknown> | undefined, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.filter((k) => status?.[k] !== undefined).map((k) => [k, status![k]]));
}
