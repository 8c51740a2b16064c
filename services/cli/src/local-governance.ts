/**
 * McpPolicy, McpWorkflow and McpCredential documents of `punk up`'s manifests directory, served as a cluster's operator
 * serves them: each policy published to bucket `PUNK_MCP_POLICIES` with lib's `publishPolicy` and each workflow to
 * bucket `PUNK_MCP_WORKFLOWS` with `publishWorkflow` (the operator's own path),
 * each credential stored in the gateway's vault with `credentials.apply` on `punk.gateway.admin` (the operator's
 * request, through lib's `credentialBody`). There are no Secrets on a laptop: a credential's values come from the
 * environment variables and files its `spec.values` names, and `spec.secretRef` is refused with that fix.
 *
 * The directory is watched (`fs.watch`, debounced): a changed document is applied again, a removed one is withdrawn
 * (its policy or workflow from its bucket, its credential from the vault). McpServer documents are served live too,
 * through `applyServers`: an added server starts, a changed one restarts, a removed one stops. Every document
 * loaded gets one line, every broken one a line naming its file, document and field, and the others keep loading. A
 * policy or server whose file has errors is kept as last loaded, as the operator keeps an invalid policy's last valid
 * generation: dropping a policy could widen access, and stopping a server for a typo elsewhere in its file would cut
 * its clients off.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { dirname, relative, resolve, sep } from 'node:path';
import { watch, type FSWatcher } from 'chokidar';
import {
  buckets,
  credentialBody,
  errorMessage,
  formatManifestError,
  kvKey,
  loadManifestDirectory,
  publishPolicy,
  publishWorkflow,
  PunkError,
  subjects,
  withdrawPolicy,
  withdrawWorkflow,
  type Bus,
  type KvBucketConfig,
  type KvStore,
  type LoadedDocument,
  type LoadedServer,
  type Logger,
  type ManifestError,
  type ManifestLoadResult,
  type McpCredential,
  type McpPolicy,
  type McpServer,
  type McpWorkflow,
  type WorkflowError,
  workflowManifestError,
} from '@punk/lib';

/** Time from the last change seen in the directory to the reload, in milliseconds (an editor's save is several events). */
export const RELOAD_DEBOUNCE_MS = 250;

/** The principal `punk up` applies credentials as (the operator's are `system:punk-operator`). */
function localPrincipal(tenant: string): { subject: string; tenant: string; groups: string[] } {
  return { subject: 'system:punk-up', tenant, groups: [] };
}

/** The policies and credentials of a manifests directory, kept applied. */
export interface LocalGovernance {
  /**
   * Publishes the policies and workflows of `loaded` (buckets `PUNK_MCP_POLICIES`, `PUNK_MCP_WORKFLOWS`); call before
   * the deciding services start, so they start with them.
   */
  publishPolicies(loaded: ManifestLoadResult): Promise<void>;
  /**
   * Applies the credentials of `loaded` to the vault (the gateway must serve `punk.gateway.admin`), then watches the
   * directory. Resolves with the credentials' errors, each logged as a manifest error, for the ready banner's count.
   */
  start(loaded: ManifestLoadResult): Promise<ManifestError[]>;
  /** Reads the directory again and applies what changed; resolves when done (the watch calls it). */
  reload(): Promise<void>;
  /** Stops watching. */
  stop(): Promise<void>;
}

/** What {@link localGovernance} needs. */
export interface LocalGovernanceOptions {
  bus: Bus;
  manifestDir: string;
  tenant: string;
  log: Logger;
  /**
   * The problems of a workflow against the servers' tools of its namespace (lib's `validateWorkflowCatalog`), for
   * the workflows a reload adds or changes; `punk up` checks those of the start itself once the servers started.
   */
  checkWorkflow?: (workflow: McpWorkflow) => WorkflowError[];
  /**
   * Serves the McpServers of the directory after a reload changed them (`punk up`: the gateway's `setServers`, then
   * their first start; `punk cluster`: bucket `PUNK_MCP_SERVERS` and its own HTTP server processes), before the
   * workflows of that reload are published and checked.
   */
  applyServers: (servers: McpServer[]) => Promise<void>;
}

/** The documents of a load in `manifestDir`, for `punk up`. */
export function localGovernance(options: LocalGovernanceOptions): LocalGovernance {
  const { bus, manifestDir, tenant, log } = options;
  /** Published policies by bucket key, with the file they came from. */
  const policies = new Map<string, LoadedDocument<McpPolicy>>();
  /** Published workflows by bucket key, with the file they came from. */
  const workflows = new Map<string, LoadedDocument<McpWorkflow>>();
  /** Applied credentials by `tenant/name`: the checksum of what was applied and the file it came from. */
  const credentials = new Map<string, { checksum: string; file: string }>();
  /** Keys the checksums of one run: equal values apply once per run, and no stored checksum reveals a value. */
  const checksumKey = randomBytes(32);
  let watcher: FSWatcher | undefined;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  /** Served McpServers by `tenant/name`, with the file they came from. */
  const servers = new Map<string, LoadedServer>();

  const report = (error: ManifestError) => log.error({ manifestError: error }, `manifest error: ${formatManifestError(error)}`);
  const where = (entry: LoadedDocument<unknown>) => `${entry.file} (document ${entry.document})`;

  /**
   * Keeps bucket `config` in line with the documents of one kind: each entry published (`publish` writes only a
   * change), each one gone withdrawn, unless its file has errors: then it is kept as last loaded. Returns the
   * entries published (new or changed).
   */
  const syncBucket = async <T extends { metadata: { name: string; namespace?: string | undefined } }>(
    kind: string,
    config: KvBucketConfig,
    entries: LoadedDocument<T>[],
    published: Map<string, LoadedDocument<T>>,
    loaded: ManifestLoadResult,
    actions: {
      publish(bucket: KvStore, object: T): Promise<boolean>;
      withdraw(bucket: KvStore, namespace: string, name: string): Promise<void>;
      summary(object: T): string;
    },
  ) => {
    const bucket = await bus.keyValue(config);
    const broken = new Set(loaded.errors.map((e) => e.file));
    const seen = new Set<string>();
    const changed: LoadedDocument<T>[] = [];
    for (const entry of entries) {
      const { name, namespace } = entry.object.metadata;
      const key = kvKey(namespace!, name);
      seen.add(key);
      if (await actions.publish(bucket, entry.object)) {
        log.info(
          { file: entry.file, document: entry.document, kind, tenant: namespace, name },
          `loaded ${kind} ${namespace}/${name} from ${where(entry)}: ${actions.summary(entry.object)}`,
        );
        changed.push(entry);
      }
      published.set(key, entry);
    }
    for (const [key, entry] of published) {
      if (seen.has(key)) continue;
      const { name, namespace } = entry.object.metadata;
      if (broken.has(entry.file)) {
        log.warn(
          { file: entry.file, kind, tenant: namespace, name },
          `${kind} ${namespace}/${name} kept as last loaded: ${entry.file} has errors (above)`,
        );
        continue;
      }
      await actions.withdraw(bucket, namespace!, name);
      published.delete(key);
      log.info({ file: entry.file, kind, tenant: namespace, name }, `removed ${kind} ${namespace}/${name}: its document is gone`);
    }
    return changed;
  };

  /** Publishes the policies of `loaded`. */
  const publishPolicies = async (loaded: ManifestLoadResult) => {
    await syncBucket('McpPolicy', buckets.mcpPolicies, loaded.policies, policies, loaded, {
      publish: publishPolicy,
      withdraw: withdrawPolicy,
      summary: (policy) =>
        `${policy.spec.rules.length} rules, ${policy.spec.rateLimits.length} rate limits, priority ${policy.spec.priority}`,
    });
  };

  /** Publishes the workflows of `loaded`; returns the workflows published (new or changed). */
  const publishWorkflows = (loaded: ManifestLoadResult) =>
    syncBucket(
      'McpWorkflow',
      buckets.mcpWorkflows,
      loaded.workflows.map(({ workflow, file, document }) => ({ object: workflow, file, document })),
      workflows,
      loaded,
      {
        publish: publishWorkflow,
        withdraw: withdrawWorkflow,
        summary: (workflow) => `${workflow.spec.nodes.length} nodes, start ${workflow.spec.start}`,
      },
    );

  /**
   * Takes the McpServers of `loaded` into {@link servers}: each one added or changed gets a line, each one gone is
   * removed unless its file has errors (then kept as last loaded). Returns whether the served set changed.
   */
  const syncServers = (loaded: ManifestLoadResult): boolean => {
    const broken = new Set(loaded.errors.map((e) => e.file));
    const seen = new Set<string>();
    let changed = false;
    for (const entry of loaded.servers) {
      const { name, namespace } = entry.server.metadata;
      const key = `${namespace}/${name}`;
      seen.add(key);
      const previous = servers.get(key);
      servers.set(key, entry);
      if (previous && JSON.stringify(previous.server) === JSON.stringify(entry.server)) continue;
      changed = true;
      log.info(
        { file: entry.file, document: entry.document, kind: 'McpServer', tenant: namespace, name },
        `${previous ? 'changed' : 'loaded'} McpServer ${key} from ${entry.file} (document ${entry.document}): ${previous ? 'restarting it' : 'starting it'}`,
      );
    }
    for (const [key, entry] of [...servers]) {
      if (seen.has(key)) continue;
      const { name, namespace } = entry.server.metadata;
      if (broken.has(entry.file)) {
        log.warn(
          { file: entry.file, kind: 'McpServer', tenant: namespace, name },
          `McpServer ${key} kept as last loaded: ${entry.file} has errors (above)`,
        );
        continue;
      }
      servers.delete(key);
      changed = true;
      log.info(
        { file: entry.file, kind: 'McpServer', tenant: namespace, name },
        `removed McpServer ${key}: its document is gone; stopping it`,
      );
    }
    return changed;
  };

  /** The values of a credential document, read from the environment and files it names. */
  const valuesOf = async (entry: LoadedDocument<McpCredential>): Promise<Record<string, string>> => {
    const spec = entry.object.spec;
    const fail = (field: string, message: string): never => {
      throw new PunkError('InvalidSpec', message, { field });
    };
    if (!spec.values)
      fail(
        'spec.secretRef',
        'punk up has no Kubernetes Secrets: give the values as spec.values, each { key, valueFrom: { env: NAME } } or { key, valueFrom: { file: path } }',
      );
    const values: Record<string, string> = {};
    for (const [i, { key, valueFrom }] of spec.values!.entries()) {
      if (valueFrom.env !== undefined) {
        const value = process.env[valueFrom.env];
        if (value === undefined) fail(`spec.values.${i}.valueFrom.env`, `environment variable ${valueFrom.env} is not set (key ${key})`);
        values[key] = value!;
      } else {
        const path = resolve(dirname(resolve(entry.file)), valueFrom.file!);
        const text = await readFile(path, 'utf8').catch((error: unknown) =>
          fail(`spec.values.${i}.valueFrom.file`, `cannot read ${path} (key ${key}): ${errorMessage(error)}`),
        );
        values[key] = text.replace(/\r?\n$/, '');
      }
    }
    return values;
  };

  /** Applies the credentials of `loaded`, withdraws those gone; returns the errors it reported. */
  const applyCredentials = async (loaded: ManifestLoadResult): Promise<ManifestError[]> => {
    const errors: ManifestError[] = [];
    const broken = new Set(loaded.errors.map((e) => e.file));
    const seen = new Set<string>();
    for (const entry of loaded.credentials) {
      const { name, namespace } = entry.object.metadata;
      const id = `${namespace}/${name}`;
      seen.add(id);
      try {
        const body = credentialBody(name, entry.object.spec, await valuesOf(entry));
        const checksum = createHmac('sha256', checksumKey).update(JSON.stringify(body)).digest('hex');
        if (credentials.get(id)?.checksum === checksum) continue;
        await bus.request(
          subjects.gatewayAdmin,
          { op: 'credentials.apply', tenant: namespace, principal: localPrincipal(namespace!), body, sourceChecksum: checksum },
          { timeoutMs: 15_000 },
        );
        credentials.set(id, { checksum, file: entry.file });
        log.info(
          { file: entry.file, document: entry.document, kind: 'McpCredential', tenant: namespace, name },
          `loaded McpCredential ${id} from ${where(entry)}: ${entry.object.spec.type}, keys ${Object.keys(body.data).sort().join(', ')}`,
        );
      } catch (error) {
        const field = error instanceof PunkError && typeof error.details?.field === 'string' ? error.details.field : 'spec.values';
        const message =
          error instanceof PunkError && error.code === 'InvalidCredential'
            ? `the gateway refused the credential: ${error.message}`
            : errorMessage(error);
        const problem = { file: entry.file, document: entry.document, field, message: `McpCredential ${id}: ${message}` };
        report(problem);
        errors.push(problem);
      }
    }
    for (const [id, applied] of [...credentials]) {
      if (seen.has(id)) continue;
      const [namespace, name] = id.split('/') as [string, string];
      if (broken.has(applied.file)) continue; // its document may be the broken one: kept until it is gone for certain
      try {
        await bus.request(
          subjects.gatewayAdmin,
          { op: 'credentials.delete', tenant: namespace, principal: localPrincipal(namespace), id: name },
          { timeoutMs: 15_000 },
        );
      } catch (error) {
        if (!(error instanceof PunkError && error.code === 'CredentialNotFound')) {
          log.error(
            { kind: 'McpCredential', tenant: namespace, name, err: error },
            `McpCredential ${id} could not be removed from the vault: ${errorMessage(error)}`,
          );
          continue;
        }
      }
      credentials.delete(id);
      log.info({ kind: 'McpCredential', tenant: namespace, name }, `removed McpCredential ${id}: its document is gone`);
    }
    return errors;
  };

  const reloadNow = async () => {
    let loaded: ManifestLoadResult;
    try {
      loaded = await loadManifestDirectory(manifestDir, tenant);
    } catch (error) {
      log.error({ err: error }, `cannot read the manifest directory ${manifestDir}: ${errorMessage(error)}; nothing was reloaded`);
      return;
    }
    for (const error of loaded.errors) report(error);
    // Policies and credentials before the servers that may need them, the servers before the workflows that call them.
    await publishPolicies(loaded);
    await applyCredentials(loaded);
    if (syncServers(loaded)) await options.applyServers([...servers.values()].map((entry) => entry.server));
    // A workflow added or changed is checked against the servers' tools, as at start: its problems name its document.
    for (const entry of await publishWorkflows(loaded))
      for (const error of options.checkWorkflow?.(entry.object) ?? []) report(workflowManifestError(entry, error));
  };

  const reload = () => {
    running = running
      .then(reloadNow)
      .catch((error: unknown) => log.error({ err: error }, `manifest reload failed: ${errorMessage(error)}`));
    return running;
  };

  return {
    async publishPolicies(loaded) {
      await publishPolicies(loaded);
      await publishWorkflows(loaded);
    },
    async start(loaded) {
      for (const entry of loaded.servers) servers.set(`${entry.server.metadata.namespace}/${entry.server.metadata.name}`, entry);
      const errors = await applyCredentials(loaded);
      // Dot directories hold state (the servers' `.punk/`, an embedded database written on every call), not
      // documents: they are not watched at all. Any other change may be a document or a value file.
      const inDotDirectory = (path: string) =>
        relative(manifestDir, path)
          .split(sep)
          .some((part) => part.startsWith('.') && part !== '..');
      watcher = watch(manifestDir, { ignoreInitial: true, ignored: inDotDirectory });
      watcher.on('all', () => {
        clearTimeout(timer);
        timer = setTimeout(() => void reload(), RELOAD_DEBOUNCE_MS);
      });
      watcher.on('error', (error) =>
        log.error({ err: error }, `watching ${manifestDir} failed: ${errorMessage(error)}; changes are no longer reloaded`),
      );
      // A change made once start resolves is seen: the first scan of the tree is done.
      await new Promise<void>((ready) => watcher!.once('ready', ready));
      return errors;
    },
    reload,
    async stop() {
      clearTimeout(timer);
      await watcher?.close();
      await running;
    },
  };
}
