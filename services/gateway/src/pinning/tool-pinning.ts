/**
 * Tool-definition pinning ("rug-pull" protection): the first listing of a tool pins its definition; a later
 * listing that differs is recorded once on the ledger (`tool.definition_changed`) and handled by the server's
 * policy until an admin accepts the new definition.
 */
import {
  appendLedgerEvent,
  errorMessage,
  PunkError,
  type Bus,
  type Logger,
  type McpServer,
  type Principal,
  type Queryable,
} from '@punk/lib';
import type { McpItem } from '../catalog.js';
import { diffDefinitions, type DefinitionDiff } from './diff.js';
import { definitionAcceptedEvent, definitionChangedEvent } from './events.js';
import { pinnedDefinition, toolFingerprint, type PinnedDefinition } from './fingerprint.js';
import { PinStore, SERVE_POLICY_PINNER, type PinningPolicy, type PinRow } from './store.js';

export type { PinningPolicy } from './store.js';

/** Options of {@link ToolPinning}. */
export interface ToolPinningOptions {
  /** The gateway database (schema `gateway`, migrated). */
  db: Queryable;
  log: Logger;
  /** Where the ledger events are appended. */
  bus: Bus;
  /** The policy of servers whose manifest sets no `spec.tools.pinning` (`PUNK_TOOL_PINNING`, default `hide`). */
  policy: PinningPolicy;
  /**
   * Called after a review changed which tools of a server this replica withholds (hidden, or waiting for an
   * approval), e.g. a test connection found a changed definition: the caller tells the other replicas and the fronts.
   */
  onWithheldChanged?: (tenant: string, server: string) => void;
}

/**
 * The pin state of a tool: `pinned` (the pinned definition is the last one recorded), `changed-hidden` (a changed
 * definition is hidden until accepted), `changed-approval` (a changed definition is served, each call refused
 * until it is accepted).
 */
export type PinStatus = 'pinned' | 'changed-hidden' | 'changed-approval';

/** One tool's pin, as the registry API's tools view shows it. */
export interface ToolPin {
  tool: string;
  /** SHA-256 (hex) of the pinned definition. */
  fingerprint: string;
  /** RFC 3339 time the definition was pinned. */
  pinnedAt: string;
  /** `first-listing`, `serve-policy`, or the subject of the admin who accepted it. */
  pinnedBy: string;
  status: PinStatus;
  /** Fingerprint of the changed definition waiting for acceptance. */
  pendingFingerprint?: string;
  /** RFC 3339 time the change was recorded. */
  changedAt?: string;
  /** What changed from the pinned definition to the pending one. */
  diff?: DefinitionDiff;
}

/** The answer of {@link ToolPinning.accept}: the tool and its newly pinned fingerprint. */
export interface AcceptedTool {
  tool: string;
  fingerprint: string;
}

/** Most attempts of {@link ToolPinning.accept} when other replicas change the pin between its read and its write. */
const ACCEPT_ATTEMPTS = 3;

/** The listed tool, with what is pinned of it. */
interface Listed {
  item: McpItem;
  name: string;
  fingerprint: string;
  definition: PinnedDefinition;
}

/**
 * Pins tool definitions per (tenant, server, tool) in `gateway.tool_pins` and applies the pinning policy to each
 * listing. A tool is trusted on first sight (a tool that appears in a later listing is pinned as listed, like the
 * first listing's); only a change from a pin is held back. Several replicas may share the table: first pins and recorded changes are race-free. Which tools are
 * hidden or need an approval per call is kept in memory from this replica's last review of each server (a test
 * connection's too) or its last {@link refresh} (another replica's review), so the call path asks no database.
 */
export class ToolPinning {
  private readonly store: PinStore;
  /** `<tenant>/<server>` to the tools served under policy `approval` with a changed definition, to their listed fingerprint. */
  private readonly approvals = new Map<string, Map<string, string>>();
  /** `<tenant>/<server>` to the tools hidden under policy `hide` with a changed definition, to their listed fingerprint. */
  private readonly hidden = new Map<string, Map<string, string>>();
  /** `<tenant>/<server>` to the review in progress: reviews of one server run one at a time, in the order of their listings. */
  private readonly reviewing = new Map<string, Promise<McpItem[]>>();

  constructor(private readonly options: ToolPinningOptions) {
    this.store = new PinStore(options.db);
  }

  /** The policy of a server: its `spec.tools.pinning`, else the gateway's default. */
  policyOf(server: McpServer): PinningPolicy {
    return server.spec.tools?.pinning ?? this.options.policy;
  }

  /**
   * Reviews a listing of a server's tools (the tools as the upstream listed them) and answers the tools to serve.
   * A tool seen for the first time is pinned. A tool whose definition differs from its pin is recorded once per new
   * definition (a `tool.definition_changed` ledger event and a warning), then by policy: `serve` pins the new
   * definition and serves it; `hide` leaves it out until accepted; `approval` serves it and marks it so that
   * {@link isApprovalRequired} holds until accepted. A tool listed again as pinned drops its pending change.
   * Reviews of one server on this replica run one at a time, in the order they were asked for.
   * @throws PunkError `DatabaseUnavailable`, the ledger's append errors (nothing is then recorded as seen, so the
   *   next listing records the change again), `InvalidToolDefinition` for a tool without a name.
   */
  async review(server: McpServer, tools: McpItem[]): Promise<McpItem[]> {
    const key = `${server.metadata.namespace ?? 'default'}/${server.metadata.name}`;
    const run = (this.reviewing.get(key) ?? Promise.resolve([])).catch(() => []).then(() => this.reviewNow(server, tools));
    this.reviewing.set(key, run);
    try {
      return await run;
    } finally {
      if (this.reviewing.get(key) === run) this.reviewing.delete(key);
    }
  }

  /** Whether calls to this tool are refused until an admin accepts its changed definition (from this replica's last review; no I/O). */
  isApprovalRequired(tenant: string, server: string, tool: string): boolean {
    return this.approvals.get(`${tenant}/${server}`)?.has(tool) ?? false;
  }

  /** Whether this tool is hidden until an admin accepts its changed definition (from this replica's last review or refresh; no I/O). */
  isHidden(tenant: string, server: string, tool: string): boolean {
    return this.hidden.get(`${tenant}/${server}`)?.has(tool) ?? false;
  }

  /** The tools of a server hidden until an admin accepts their changed definition (as {@link isHidden}). */
  hiddenTools(tenant: string, server: string): string[] {
    return [...(this.hidden.get(`${tenant}/${server}`)?.keys() ?? [])];
  }

  /** The tools of a server whose changed definition awaits an admin's review, hidden or served under approval (no I/O), sorted. */
  pendingReviews(tenant: string, server: string): string[] {
    const key = `${tenant}/${server}`;
    return [...(this.hidden.get(key)?.keys() ?? []), ...(this.approvals.get(key)?.keys() ?? [])].sort();
  }

  /**
   * Reads which tools of a server wait for an admin's review from the database (another replica's review recorded a
   * change): answers whether what this replica withholds changed.
   * @throws PunkError `DatabaseUnavailable`.
   */
  async refresh(tenant: string, server: string): Promise<boolean> {
    const hidden = new Map<string, string>();
    const approvals = new Map<string, string>();
    for (const row of await this.store.list(tenant, server)) {
      if (row.pendingFingerprint === null) continue;
      if (row.pendingPolicy === 'hide') hidden.set(row.tool, row.pendingFingerprint);
      else if (row.pendingPolicy === 'approval') approvals.set(row.tool, row.pendingFingerprint);
    }
    return this.withhold(`${tenant}/${server}`, hidden, approvals);
  }

  /**
   * Pins a tool's pending (changed) definition on behalf of an admin and records `tool.definition_accepted`. The
   * tool is served as pinned from the next review of its server's listing on each replica (this replica stops
   * requiring approval at once when the accepted definition is the one it last listed).
   * With `expected`, the fingerprint of the definition the admin reviewed, the accept holds only if that is still
   * the pending one (a definition that changed again meanwhile is not accepted unseen).
   * @throws PunkError `ToolNotFound` when the tool has no pin, `ToolNotPending` when it has no changed definition
   *   waiting, `ToolDefinitionMismatch` when the pending one is not `expected`, `Conflict` when other replicas kept
   *   changing the pin, `DatabaseUnavailable`, or the ledger's append error (the acceptance is then undone).
   */
  async accept(tenant: string, server: string, tool: string, principal: Principal, expected?: string): Promise<AcceptedTool> {
    for (let attempt = 1; attempt <= ACCEPT_ATTEMPTS; attempt++) {
      const pin = await this.store.get(tenant, server, tool);
      if (!pin) {
        throw new PunkError(
          'ToolNotFound',
          `tool ${tool} of server ${server} has no pinned definition in tenant ${tenant}: the gateway has never listed it`,
          { tool, server },
        );
      }
      if (pin.pendingFingerprint === null || pin.pendingDefinition === null) {
        throw new PunkError(
          'ToolNotPending',
          `tool ${tool} of server ${server} has no changed definition waiting to be accepted: its pinned definition (fingerprint ${pin.fingerprint}) is the one last listed`,
          { tool, server, fingerprint: pin.fingerprint },
        );
      }
      const fingerprint = pin.pendingFingerprint;
      if (expected !== undefined && expected !== fingerprint) {
        throw new PunkError(
          'ToolDefinitionMismatch',
          `tool ${tool} of server ${server} changed again: the definition waiting now has fingerprint ${fingerprint}, not the reviewed ${expected}; review it (GET /api/v1/mcp/servers/${server}/tools) and accept that one`,
          { tool, server, fingerprint, expected },
        );
      }
      if (!(await this.store.repin(pin, { fingerprint, definition: pin.pendingDefinition }, principal.subject))) continue;
      try {
        await appendLedgerEvent(this.options.bus, definitionAcceptedEvent(tenant, server, tool, fingerprint, pin.fingerprint, principal));
      } catch (error) {
        await this.store
          .restore(pin)
          .catch((undo: unknown) =>
            this.options.log.error(
              { tenant, server, tool, err: errorMessage(undo) },
              'could not undo an acceptance whose ledger event failed',
            ),
          );
        throw error;
      }
      const approvals = this.approvals.get(`${tenant}/${server}`);
      if (approvals?.get(tool) === fingerprint) approvals.delete(tool);
      const hidden = this.hidden.get(`${tenant}/${server}`);
      if (hidden?.get(tool) === fingerprint) hidden.delete(tool);
      this.options.log.info(
        { tenant, server, tool, fingerprint, previousFingerprint: pin.fingerprint, by: principal.subject },
        `the changed definition of tool ${tool} of server ${tenant}/${server} was accepted`,
      );
      return { tool, fingerprint };
    }
    throw new PunkError('Conflict', `the pin of tool ${tool} of server ${server} kept changing while it was being accepted; try again`, {
      tool,
      server,
    });
  }

  /**
   * The pin of every tool of a server ever listed, by tool name (tools no longer listed keep their pins).
   * @throws PunkError `DatabaseUnavailable`.
   */
  async pins(tenant: string, server: string): Promise<ToolPin[]> {
    const rows = await this.store.list(tenant, server);
    return rows.map((row) => ({
      tool: row.tool,
      fingerprint: row.fingerprint,
      pinnedAt: row.pinnedAt.toISOString(),
      pinnedBy: row.pinnedBy,
      status: row.pendingPolicy === null ? 'pinned' : row.pendingPolicy === 'hide' ? 'changed-hidden' : 'changed-approval',
      ...(row.pendingFingerprint !== null && { pendingFingerprint: row.pendingFingerprint }),
      ...(row.changedAt !== null && { changedAt: row.changedAt.toISOString() }),
      ...(row.pendingDefinition !== null && { diff: diffDefinitions(row.definition, row.pendingDefinition) }),
    }));
  }

  /**
   * Forgets the pins of a server (its registration was deleted): a server registered later under the same name
   * is pinned afresh on its first listing. Returns how many pins were deleted.
   * @throws PunkError `DatabaseUnavailable`.
   */
  async forget(tenant: string, server: string): Promise<number> {
    this.approvals.delete(`${tenant}/${server}`);
    this.hidden.delete(`${tenant}/${server}`);
    return this.store.deleteServer(tenant, server);
  }

  /** One review of {@link review}, with no other review of the server in progress on this replica. */
  private async reviewNow(server: McpServer, tools: McpItem[]): Promise<McpItem[]> {
    const tenant = server.metadata.namespace ?? 'default';
    const name = server.metadata.name;
    const policy = this.policyOf(server);
    const listed: Listed[] = tools.map((item) => {
      const definition = pinnedDefinition(item);
      return { item, name: definition.name, definition, fingerprint: toolFingerprint(item) };
    });
    let pins = new Map((await this.store.list(tenant, name)).map((row) => [row.tool, row]));
    const unseen = listed.filter((entry) => !pins.has(entry.name));
    if (unseen.length > 0) {
      const pinned = await this.store.pinFirst(
        tenant,
        name,
        unseen.map(({ name: tool, fingerprint, definition }) => ({ tool, fingerprint, definition })),
      );
      if (pinned.length > 0)
        this.options.log.info(
          { tenant, server: name, tools: pinned },
          `pinned the definitions of ${pinned.length} tools of server ${tenant}/${name} on first listing`,
        );
      pins = new Map((await this.store.list(tenant, name)).map((row) => [row.tool, row]));
    }
    const served: McpItem[] = [];
    const approvals = new Map<string, string>();
    const hidden = new Map<string, string>();
    for (const entry of listed) {
      const pin = pins.get(entry.name);
      // A pin deleted between the insert and the read (the server was deregistered meanwhile): nothing to vouch for it.
      if (!pin) continue;
      const outcome = await this.reconcile(pin, entry, policy);
      if (outcome === 'hide') {
        hidden.set(entry.name, entry.fingerprint);
        continue;
      }
      if (outcome === 'approval') approvals.set(entry.name, entry.fingerprint);
      served.push(entry.item);
    }
    if (this.withhold(`${tenant}/${name}`, hidden, approvals)) this.options.onWithheldChanged?.(tenant, name);
    return served;
  }

  /** Sets what this replica withholds of a server; answers whether the tools withheld changed. */
  private withhold(key: string, hidden: Map<string, string>, approvals: Map<string, string>): boolean {
    const changed = !sameTools(this.hidden.get(key), hidden) || !sameTools(this.approvals.get(key), approvals);
    this.hidden.set(key, hidden);
    this.approvals.set(key, approvals);
    return changed;
  }

  /** Applies the policy to one listed tool against its pin; answers how to serve it. */
  private async reconcile(pin: PinRow, listed: Listed, policy: PinningPolicy): Promise<'serve' | 'hide' | 'approval'> {
    const { tenant, server, tool } = pin;
    if (listed.fingerprint === pin.fingerprint) {
      if (pin.pendingFingerprint !== null && (await this.store.clearPending(pin))) {
        this.options.log.info(
          { tenant, server, tool, fingerprint: pin.fingerprint },
          `tool ${tool} of server ${tenant}/${server} is listed with its pinned definition again`,
        );
      }
      return 'serve';
    }
    // A change not yet recorded: on the ledger first, so a failure leaves it to be recorded by the next listing.
    if (pin.pendingFingerprint !== listed.fingerprint) {
      const diff = diffDefinitions(pin.definition, listed.definition);
      await appendLedgerEvent(
        this.options.bus,
        definitionChangedEvent({
          tenant,
          server,
          tool,
          previousFingerprint: pin.fingerprint,
          fingerprint: listed.fingerprint,
          diff,
          policy,
          revision: pin.revision,
        }),
      );
      this.options.log.warn(
        {
          tenant,
          server,
          tool,
          previousFingerprint: pin.fingerprint,
          fingerprint: listed.fingerprint,
          changes: diff.changes.map((change) => change.path),
          policy,
        },
        `the definition of tool ${tool} of server ${tenant}/${server} changed from the pinned one; policy ${policy}: ${POLICY_EFFECT[policy]}`,
      );
      if (policy === 'serve') await this.store.repin(pin, listed, SERVE_POLICY_PINNER);
      else await this.store.setPending(pin, listed, policy);
    } else if (policy === 'serve') {
      // Recorded earlier under another policy, now served: the new definition becomes the pin.
      await this.store.repin(pin, listed, SERVE_POLICY_PINNER);
    } else if (pin.pendingPolicy !== policy) {
      await this.store.setPendingPolicy(pin, policy);
    }
    return policy;
  }
}

/** Whether two maps of tool to fingerprint hold the same entries (absent counts as empty). */
function sameTools(a: Map<string, string> | undefined, b: Map<string, string>): boolean {
  if ((a?.size ?? 0) !== b.size) return false;
  for (const [tool, fingerprint] of b) if (a?.get(tool) !== fingerprint) return false;
  return true;
}

const POLICY_EFFECT: Record<PinningPolicy, string> = {
  serve: 'the new definition is pinned and served',
  hide: 'the tool is hidden until an admin accepts the new definition',
  approval: 'each call is refused until an admin accepts the new definition',
};
