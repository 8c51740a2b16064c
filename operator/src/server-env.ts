/**
 * The environment of a server container from `spec.env`: literal values as they are (`$(VAR)` is expanded by
 * Kubernetes itself, from the variables listed before), `valueFrom.secretKeyRef` as a Kubernetes secretKeyRef,
 * `valueFrom.credentialRef` as a secretKeyRef to the Secret behind the McpCredential.
 */
import type { V1EnvVar, V1Secret } from '@kubernetes/client-node';
import type { McpServer } from '@punk/lib/controller';
import { SpecError } from './spec-error.js';

/**
 * Resolves an McpCredential of the server's namespace, by name, to its Secret: `secretName` (the credential's
 * `spec.secretRef.name`) and `keys` (its `spec.secretRef.keys`, when it lists them); undefined when there is no
 * such McpCredential.
 */
export type CredentialSecrets = (name: string) => { secretName: string; keys?: string[] } | undefined;

/** The key of an McpCredential used when `credentialRef.key` is absent and the credential does not list exactly one key. */
export const DEFAULT_CREDENTIAL_KEY = 'value';

/**
 * `spec.env` as Kubernetes env vars, in order. A `credentialRef` without a key uses the credential's only listed
 * key, else `value`.
 * @throws SpecError naming `spec.env[i].name` for a name listed twice (server-side apply keys env by name);
 *   SpecError `CredentialMissing` naming `spec.env[i].valueFrom.credentialRef.name` for an unknown McpCredential,
 *   or `.key` for a key the credential does not list.
 */
export function serverEnv(server: McpServer, credentialSecrets: CredentialSecrets): V1EnvVar[] {
  const seen = new Map<string, number>();
  return server.spec.env.map((entry, i): V1EnvVar => {
    const first = seen.get(entry.name);
    if (first !== undefined)
      throw new SpecError(`spec.env[${i}].name`, `${entry.name} is already set by spec.env[${first}]; list each variable once`);
    seen.set(entry.name, i);
    if (entry.value !== undefined) return { name: entry.name, value: entry.value };
    const secretKeyRef = entry.valueFrom?.secretKeyRef;
    if (secretKeyRef) return { name: entry.name, valueFrom: { secretKeyRef: { name: secretKeyRef.name, key: secretKeyRef.key } } };
    const ref = entry.valueFrom!.credentialRef!;
    return {
      name: entry.name,
      valueFrom: { secretKeyRef: credentialKeyRef(ref, credentialSecrets, `spec.env[${i}].valueFrom.credentialRef`) },
    };
  });
}

function credentialKeyRef(
  ref: { name: string; key?: string },
  credentialSecrets: CredentialSecrets,
  field: string,
): { name: string; key: string } {
  const credential = credentialSecrets(ref.name);
  if (!credential) throw new SpecError(`${field}.name`, `no McpCredential ${ref.name} in this namespace`, 'CredentialMissing');
  if (ref.key !== undefined && credential.keys !== undefined && !credential.keys.includes(ref.key)) {
    throw new SpecError(
      `${field}.key`,
      `McpCredential ${ref.name} has no key ${ref.key} (it lists ${credential.keys.join(', ')})`,
      'CredentialMissing',
    );
  }
  const key = ref.key ?? (credential.keys?.length === 1 ? credential.keys[0]! : DEFAULT_CREDENTIAL_KEY);
  return { name: credential.secretName, key };
}

/**
 * The names of the Secrets the server's pod reads, sorted, each once: the Secrets whose existence the reconciler
 * checks and whose {@link secretChecksum} the pod template carries. They are those of `spec.env` (`secretKeyRef`s,
 * and the Secrets of its `credentialRef`s that resolve), of `spec.sandbox.volumes`, and of `spec.podTemplate`
 * (secret volumes, projected secret sources, and in any container `env[].valueFrom.secretKeyRef` and
 * `envFrom[].secretRef`). A reference marked `optional: true` is left out: the pod starts without that Secret.
 */
export function referencedSecretNames(server: McpServer, credentialSecrets: CredentialSecrets): string[] {
  const names = new Set<string>();
  for (const entry of server.spec.env) {
    if (entry.valueFrom?.secretKeyRef) names.add(entry.valueFrom.secretKeyRef.name);
    const credential = entry.valueFrom?.credentialRef && credentialSecrets(entry.valueFrom.credentialRef.name);
    if (credential) names.add(credential.secretName);
  }
  for (const volume of server.spec.sandbox?.volumes ?? []) volumeSecretNames(volume, names);
  const podSpec = asObject(asObject(server.spec.podTemplate)?.spec);
  if (podSpec) {
    for (const volume of asList(podSpec.volumes)) volumeSecretNames(volume, names);
    for (const list of ['containers', 'initContainers', 'ephemeralContainers']) {
      for (const container of asList(podSpec[list]).map(asObject)) {
        for (const env of asList(container?.env)) addRequired(asObject(asObject(asObject(env)?.valueFrom)?.secretKeyRef), 'name', names);
        for (const from of asList(container?.envFrom)) addRequired(asObject(asObject(from)?.secretRef), 'name', names);
      }
    }
  }
  return [...names].sort();
}

type Json = Record<string, unknown>;

function asObject(value: unknown): Json | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
}

function asList(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** Adds `ref[key]` when it is a name and the reference is not optional. */
function addRequired(ref: Json | undefined, key: string, names: Set<string>): void {
  if (ref && typeof ref[key] === 'string' && ref[key] !== '' && ref.optional !== true) names.add(ref[key]);
}

/** The Secrets of a pod volume: a `secret` volume's secretName, a `projected` volume's secret sources. */
function volumeSecretNames(volume: unknown, names: Set<string>): void {
  const object = asObject(volume);
  addRequired(asObject(object?.secret), 'secretName', names);
  for (const source of asList(asObject(object?.projected)?.sources)) addRequired(asObject(asObject(source)?.secret), 'name', names);
}

/**
 * Checks that each Secret key `spec.env` reads exists in its Secret (`secretKeyRef`, and the key a `credentialRef`
 * resolves to in the Secret behind the McpCredential), so a missing key is reported on the McpServer instead of as
 * the kubelet's CreateContainerConfigError. `secrets` are the Secrets the server references, by name (each exists).
 * @throws SpecError `SecretKeyMissing` naming `spec.env[i].valueFrom.secretKeyRef.key` (or `.credentialRef.key`)
 *   and the keys the Secret has.
 */
export function checkSecretKeys(server: McpServer, credentialSecrets: CredentialSecrets, secrets: ReadonlyMap<string, V1Secret>): void {
  const env = serverEnv(server, credentialSecrets);
  server.spec.env.forEach((entry, i) => {
    const ref = env[i]?.valueFrom?.secretKeyRef;
    const secret = ref?.name !== undefined ? secrets.get(ref.name) : undefined;
    if (!ref || !secret || Object.hasOwn(secret.data ?? {}, ref.key)) return;
    const has = Object.keys(secret.data ?? {}).sort();
    const keys = has.length > 0 ? `it has ${has.join(', ')}` : 'it has no keys';
    if (entry.valueFrom?.secretKeyRef)
      throw new SpecError(
        `spec.env[${i}].valueFrom.secretKeyRef.key`,
        `Secret ${ref.name} has no key ${ref.key} (${keys})`,
        'SecretKeyMissing',
      );
    throw new SpecError(
      `spec.env[${i}].valueFrom.credentialRef.key`,
      `Secret ${ref.name} behind McpCredential ${entry.valueFrom!.credentialRef!.name} has no key ${ref.key} (${keys})`,
      'SecretKeyMissing',
    );
  });
}
