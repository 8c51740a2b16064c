/**
 * The set of servers a gateway replica serves: the managed ones (manifests,
 * custom resources: the `servers` option and `setServers`) and the ones
 * registered through the registry API (every tenant's rows of
 * `gateway.registrations`). A managed server wins a name clash. Every replica
 * listens to `punk.registry.changed`: for an `added`, `updated` or `removed`
 * change another replica made, it reloads that registration from the database
 * and restarts, starts or stops its pooled connection.
 */
import {
  errorMessage,
  ORIGIN_HEADER,
  parseMessage,
  registryChangedSchema,
  subjects,
  type Bus,
  type BusSubscription,
  type Logger,
  type McpServer,
} from '@punk/lib';
import type { McpItem } from '../catalog.js';
import { toMcpServer } from './registration.js';
import type { RegistrationStore, ServerRecord, StoredRegistration, TestOutcome } from './store.js';

/** `<tenant>/<name>`. */
export const serverKey = (tenant: string, name: string) => `${tenant}/${name}`;

/** What the served set needs from the gateway that runs the pooled connections. */
export interface ServedSetHost {
  /**
   * Serves exactly `servers`: starts the added ones, stops the removed ones, restarts the changed ones
   * (evicting their pooled connections). With `announce`, each of those changes is broadcast on
   * `punk.registry.changed` (with {@link ORIGIN_HEADER}).
   */
  serve(servers: McpServer[], announce: boolean): Promise<void>;
}

/** Options of a {@link ServedSet}. */
export interface ServedSetOptions {
  store: RegistrationStore;
  bus: Bus;
  log: Logger;
  /** This replica's name: it ignores the registry changes it published itself. */
  instanceId: string;
  /** Whether stdio registrations may run here (a child process on the gateway host): embedded mode only. */
  allowStdioRegistrations: boolean;
  host: ServedSetHost;
}

/** The served set of one gateway replica. */
export class ServedSet {
  private managed = new Map<string, McpServer>();
  private readonly registered = new Map<string, McpServer>();
  /** Why a stored registration is not served here, by key. */
  private readonly refused = new Map<string, string>();
  /** Last test and listing of managed servers (registrations keep theirs in the database). */
  private readonly managedRecords = new Map<string, ServerRecord>();
  private queue: Promise<void> = Promise.resolve();
  private subscription: BusSubscription | undefined;

  constructor(private readonly options: ServedSetOptions) {}

  /**
   * Loads every stored registration, serves them with `managed` and starts listening to registry changes.
   * @throws PunkError `DatabaseUnavailable`, or a bus error when the subscription cannot be made.
   */
  async start(managed: McpServer[]): Promise<void> {
    this.managed = new Map(managed.map((s) => [serverKey(s.metadata.namespace ?? 'default', s.metadata.name), s]));
    for (const stored of await this.options.store.list()) this.adopt(stored.tenant, stored.name, stored);
    this.subscription = await this.options.bus.subscribe(subjects.registryChanged, async (data, info) => {
      if (info.headers[ORIGIN_HEADER] === this.options.instanceId) return;
      const change = parseMessage(registryChangedSchema, subjects.registryChanged, data);
      if (change.change !== 'added' && change.change !== 'updated' && change.change !== 'removed') return;
      try {
        await this.reload(change.tenant, change.server, false);
      } catch (error) {
        this.options.log.warn(
          { server: serverKey(change.tenant, change.server), err: errorMessage(error) },
          'could not reload a registration another gateway replica changed',
        );
      }
    });
    await this.apply(true);
  }

  /** Stops listening to registry changes. */
  async stop(): Promise<void> {
    await this.subscription?.unsubscribe();
    this.subscription = undefined;
  }

  /** Replaces the managed servers (manifests, custom resources) and serves the result, announcing each change. */
  async setManaged(servers: McpServer[]): Promise<void> {
    this.managed = new Map(servers.map((s) => [serverKey(s.metadata.namespace ?? 'default', s.metadata.name), s]));
    await this.apply(true);
  }

  /** The managed server of that name, if any. */
  managedServer(tenant: string, name: string): McpServer | undefined {
    return this.managed.get(serverKey(tenant, name));
  }

  /** The managed servers of a tenant. */
  managedOf(tenant: string): McpServer[] {
    return [...this.managed.values()].filter((s) => (s.metadata.namespace ?? 'default') === tenant);
  }

  /** Why a stored registration is not served by this replica (stdio not allowed, invalid), if it is not. */
  refusal(tenant: string, name: string): string | undefined {
    return this.refused.get(serverKey(tenant, name));
  }

  /**
   * Reads the registration `name` of `tenant` again from the database and serves what it says now
   * (added, replaced or gone). `announce`: this replica made the change and broadcasts it.
   * @throws PunkError `DatabaseUnavailable`.
   */
  async reload(tenant: string, name: string, announce: boolean): Promise<void> {
    this.adopt(tenant, name, await this.options.store.get(tenant, name));
    await this.apply(announce);
  }

  /** The last test and listing of a managed server (kept in memory on this replica). */
  managedRecord(tenant: string, name: string): ServerRecord {
    return this.managedRecords.get(serverKey(tenant, name)) ?? { status: 'unknown' };
  }

  /** Records the outcome of a test of a managed server. */
  recordManagedTest(tenant: string, name: string, outcome: TestOutcome): void {
    const { lastError: _previousError, ...previous } = this.managedRecord(tenant, name);
    this.managedRecords.set(serverKey(tenant, name), {
      ...previous,
      status: outcome.ok ? 'ok' : 'error',
      toolCount: outcome.toolCount,
      latencyMs: outcome.latencyMs,
      testedAt: outcome.at,
      ...(outcome.error !== undefined && { lastError: outcome.error }),
      ...(outcome.ok && { tools: outcome.tools, listedAt: outcome.at }),
    });
  }

  /**
   * Records a tool listing of a served server (a pooled connection listed it, or a live listing of the
   * tools API): in the database for a registration, in memory for a managed server.
   * @throws PunkError `DatabaseUnavailable`.
   */
  async recordListing(tenant: string, name: string, tools: McpItem[], at: string): Promise<void> {
    const key = serverKey(tenant, name);
    if (this.managed.has(key)) {
      const previous = this.managedRecord(tenant, name);
      // Listings can finish out of order: the newer one stays.
      if (previous.listedAt === undefined || Date.parse(previous.listedAt) <= Date.parse(at))
        this.managedRecords.set(key, { ...previous, tools, listedAt: at });
    } else if (this.registered.has(key)) {
      await this.options.store.recordListing(tenant, name, tools, at);
    }
  }

  /** Takes a stored registration (or its absence) into the registered set, unless it cannot run here. */
  private adopt(tenant: string, name: string, stored: StoredRegistration | undefined): void {
    const key = serverKey(tenant, name);
    this.registered.delete(key);
    this.refused.delete(key);
    if (!stored) return;
    if (this.managed.has(key))
      this.options.log.warn(
        { server: key },
        `registration ${key} has the name of a managed server, which wins; the registration is not served`,
      );
    if (stored.body.type === 'stdio' && !this.options.allowStdioRegistrations) {
      this.refuse(key, 'stdio registrations run a child process on the gateway host and are allowed only in embedded mode (punk up)');
      return;
    }
    try {
      this.registered.set(key, toMcpServer(tenant, stored.body));
    } catch (error) {
      this.refuse(key, `the stored registration is not a valid McpServer: ${errorMessage(error)}`);
    }
  }

  private refuse(key: string, reason: string): void {
    this.refused.set(key, reason);
    this.options.log.warn({ server: key }, `registration ${key} is not served: ${reason}`);
  }

  /** Serves managed ∪ registered (managed wins a clash), one change at a time. */
  private apply(announce: boolean): Promise<void> {
    const run = this.queue.then(async () => {
      const served = new Map(this.managed);
      for (const [key, server] of this.registered) {
        if (!served.has(key)) served.set(key, server);
      }
      await this.options.host.serve([...served.values()], announce);
    });
    this.queue = run.catch(() => undefined);
    return run;
  }
}
