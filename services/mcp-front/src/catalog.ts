/**
 * The tenant's catalog as mcp-front sees it: the gateway's `catalog/list`
 * reply, cached in memory and refreshed when a `punk.registry.changed`
 * broadcast for the tenant arrives (design: "front and gateway keep catalogs
 * in memory, refreshed by broadcasts"). Views per endpoint are memoised per
 * catalog generation.
 */
import {
  catalogReplySchema,
  deadlines,
  errorMessage,
  parseMessage,
  PunkError,
  registryChangedSchema,
  requestGateway,
  subjects,
  type Bus,
  type BusSubscription,
  type Logger,
  type RegistryChanged,
  type ServerCatalog,
} from '@punk/lib';
import { buildView, scopeKey, type CatalogView, type Scope } from './aggregate.js';

/** Called after the catalog was refreshed because of a registry change. */
export type CatalogChangeListener = (change: RegistryChanged) => void;

/** Cached catalog of one tenant. */
export class TenantCatalog {
  private servers: ServerCatalog[] | undefined;
  private inflight: Promise<ServerCatalog[]> | undefined;
  private generation = 0;
  private readonly views = new Map<string, CatalogView>();
  private readonly listeners = new Set<CatalogChangeListener>();
  private subscription: BusSubscription | undefined;

  constructor(
    private readonly bus: Bus,
    private readonly log: Logger,
    private readonly tenant: string,
  ) {}

  /** Subscribes to `punk.registry.changed`; call once before serving. */
  async start(): Promise<void> {
    this.subscription = await this.bus.subscribe(subjects.registryChanged, async (data) => {
      const change = parseMessage(registryChangedSchema, subjects.registryChanged, data);
      if (change.tenant !== this.tenant) return;
      this.invalidate();
      try {
        await this.servers_();
      } catch (error) {
        // No gateway up yet (a cluster starting, its gateways after its fronts): the next listing fetches it again.
        const level = error instanceof PunkError && error.code === 'BusNoResponders' ? 'debug' : 'warn';
        this.log[level]({ err: errorMessage(error), server: change.server }, 'catalog refresh after registry change failed');
      }
      for (const listener of this.listeners) {
        try {
          listener(change);
        } catch (error) {
          this.log.warn({ err: errorMessage(error) }, 'catalog change listener failed');
        }
      }
    });
  }

  /** Drops the cached catalog: the next read asks the gateway again. */
  invalidate(): void {
    this.generation++;
    this.servers = undefined;
    this.inflight = undefined;
    this.views.clear();
  }

  /**
   * The view of one endpoint over the current catalog.
   * @throws PunkError from the bus (`BusTimeout`, `BusNoResponders`) or `InvalidMessage` when the gateway's reply is malformed.
   */
  async view(scope: Scope): Promise<CatalogView> {
    const key = scopeKey(scope);
    const servers = await this.servers_();
    const cached = this.views.get(key);
    if (cached) return cached;
    const view = buildView(servers, scope);
    if (this.servers === servers) {
      this.views.set(key, view);
      // Once per catalog and endpoint: the names no client of this endpoint can see.
      for (const conflict of [...view.tools.conflicts, ...view.prompts.conflicts])
        this.log.warn({ endpoint: key, server: conflict.server, name: conflict.name }, `not exposed on this endpoint: ${conflict.reason}`);
    }
    return view;
  }

  /** Every server of the tenant, from the cache or the gateway (same errors as `view`). */
  async listServers(): Promise<ServerCatalog[]> {
    return this.servers_();
  }

  /** Registers a listener for registry changes; returns its removal. */
  onChange(listener: CatalogChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Stops listening to the bus. */
  async close(): Promise<void> {
    this.listeners.clear();
    await this.subscription?.unsubscribe();
    this.subscription = undefined;
  }

  private async servers_(): Promise<ServerCatalog[]> {
    if (this.servers) return this.servers;
    if (this.inflight) return this.inflight;
    const generation = this.generation;
    const fetch = (async () => {
      const reply = await requestGateway(this.bus, { method: 'catalog/list', tenant: this.tenant }, deadlines.catalogMs);
      const { servers } = parseMessage(catalogReplySchema, subjects.gatewayCall, reply);
      if (generation === this.generation) this.servers = servers;
      return servers;
    })();
    this.inflight = fetch;
    try {
      return await fetch;
    } finally {
      if (this.inflight === fetch) this.inflight = undefined;
    }
  }
}
