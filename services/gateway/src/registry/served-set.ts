/**
 * The set of servers a gateway replica serves: the managed ones (manifests,
 * custom resources: the `servers` option and `setServers`) and the ones
 * registered through the registry API (every tenant's rows of
 * `gateway.registrations`). A managed server wins a name clash. Every replica
 * listens to `punk.registry.changed`: for an `added`, `updated` or `removed`
 * change another replica made, it reloads that registration from the database
 * and restarts, starts or stops its pooled connection.
 */
import { createHash } from 'node:crypto';
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

/**
 * The fingerprint of a managed server's definition: the SHA-256 (hex) of its spec. A stored last test counts
 * only for the definition it tested.
 */
function definitionOf(server: McpServer): string {
  return createHash('sha256').update(JSON.stringify(server.spec)).digest('hex');
}

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
  /**
   * The last tool listing of each managed server made on this replica, with the fingerprint of the definition
   * listed (their last tests are in the database; registrations keep both there).
   */
  private readonly managedListings = new Map<string, { definition: string; tools: McpItem[]; at: string }>();
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

  /**
   * The last test and listing of each managed server of `tenant`, by name: its last test from the database (kept
   * only while the server's definition is the one tested), with a newer listing made on this replica.
   * @throws PunkError `DatabaseUnavailable`.
   */
  async managedRecords(tenant: string): Promise<Map<string, ServerRecord>> {
    const tests = new Map((await this.options.store.managedTests(tenant)).map((test) => [test.name, test]));
    const records = new Map<string, ServerRecord>();
    for (const server of this.managedOf(tenant)) {
      const name = server.metadata.name;
      const definition = definitionOf(server);
      const test = tests.get(name);
      let record: ServerRecord = test?.definition === definition ? test.record : { status: 'unknown' };
      const listing = this.managedListings.get(serverKey(tenant, name));
      if (listing?.definition === definition && (record.listedAt === undefined || Date.parse(record.listedAt) <= Date.parse(listing.at)))
        record = { ...record, tools: listing.tools, listedAt: listing.at };
      records.set(name, record);
    }
    return records;
  }

  /**
   * The last test and listing of a managed server (see {@link managedRecords}); `unknown` before any test.
   * @throws PunkError `DatabaseUnavailable`.
   */
  async managedRecord(tenant: string, name: string): Promise<ServerRecord> {
    return (await this.managedRecords(tenant)).get(name) ?? { status: 'unknown' };
  }

  /**
   * Stores the outcome of a test of a managed server, with the fingerprint of its definition; a no-op when the
   * server is no longer managed.
   * @throws PunkError `DatabaseUnavailable`.
   */
  async recordManagedTest(tenant: string, name: string, outcome: TestOutcome): Promise<void> {
    const server = this.managedServer(tenant, name);
    if (server) await this.options.store.recordManagedTest(tenant, name, definitionOf(server), outcome);
  }

  /**
   * Records a tool listing of a served server (a pooled connection listed it, or a live listing of the tools API):
   * in the database for a registration, in memory for a managed server.
   * @throws PunkError `DatabaseUnavailable`.
   */
  async recordListing(tenant: string, name: string, tools: McpItem[], at: string): Promise<void> {
    const key = serverKey(tenant, name);
    const server = this.managed.get(key);
    if (server) {
      const previous = this.managedListings.get(key);
      // Listings can finish out of order: the newer one stays.
      if (previous === undefined || Date.parse(previous.at) <= Date.parse(at))
        this.managedListings.set(key, { definition: definitionOf(server), tools, at });
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
