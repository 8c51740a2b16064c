/**
 * The bus handler of `punk.gateway.call`: catalog listings, and tools/call,
 * resources/read and prompts/get relayed to the upstream after a policy
 * decision (decisions.ts: in process, or by governance when it needs shared
 * state), each recorded on the ledger before the reply is sent.
 */
import { callBearerIdentity, withCallBearer, type CallBearer } from './call-bearer.js';
import type { Connections } from './connections.js';
import {
  appendLedgerEvent,
  errorMessage,
  gatewayRequestSchema,
  DEFAULT_MAX_PAYLOAD_BYTES,
  oversizedBy,
  receivedMessage,
  payloadTooLarge,
  PunkError,
  subjects,
  type Bus,
  type CatalogReply,
  type GatewayRequest,
  type GovernanceCheck,
  type GovernanceDecision,
  type LedgerEvent,
  type Logger,
  type Principal,
  type BusMessageInfo,
  type ServerCatalog,
  WORKFLOW_SERVER,
} from '@punk/lib';
import { traceUpstreamCall } from '@punk/lib';
import { releaseApproval, seekApproval } from './approvals.js';
import { queueShareOf } from './call-queue.js';
import { awaitingReviewMessage, declaredLevelOf, denialOf, isToolVisible } from './catalog.js';
import { busClientLink, type CallCancellations, type ClientLink, type PendingRequests } from './client-channel.js';
import type { CallDecider, CallDecision } from './decisions.js';
import { callEvent, summarizeResult, type CallContext } from './events.js';
import { runWithInputRequired } from './input-required.js';
import { observeUpstreamCall } from './metrics.js';
import { inputModeOf } from './upstream-input.js';
import type { CallOutcome, Upstream } from './upstream.js';
import type { ServedWorkflows } from './workflows/served.js';

/** How the relay finds servers. */
export interface Registry {
  /** The upstream of a tenant's server, or undefined; with `sessionId`, the client session's own upstream when this replica holds one (`per-client`). */
  find(tenant: string, server: string, sessionId?: string): Upstream | undefined;
  /** Catalog entries of every server of a tenant. */
  catalog(tenant: string): ServerCatalog[];
}

// ---- tool-definition pinning (pinning/tool-pinning.ts): calls to a tool whose changed definition awaits acceptance
/** Which tools must not be called until an admin accepts their changed definition (`ToolPinning` implements it). */
export interface PinningCheck {
  /** True when calls to `tool` of `server` in `tenant` are refused; answered from memory (no I/O on the call path). */
  isApprovalRequired(tenant: string, server: string, tool: string): boolean;
  /** True when `tool` is hidden until an admin accepts its changed definition; answered from memory. */
  isHidden(tenant: string, server: string, tool: string): boolean;
}

/** The refusal of a call to a tool whose changed definition has not been accepted, in the shape of a policy refusal. */
function pinningRefusal(tool: string, server: string): string {
  return (
    `tool ${tool} on server ${server} was not run: its definition changed since it was pinned and requires an approval: ` +
    `an admin must accept the new definition (POST /api/v1/mcp/servers/${encodeURIComponent(server)}/tools/${encodeURIComponent(tool)}/accept)`
  );
}
// ---- end of tool-definition pinning

/** An MCP tool result that reports a failure to the model. */
export function toolError(text: string): Record<string, unknown> {
  return { content: [{ type: 'text', text }], isError: true };
}

/**
 * The relay's handler of `punk.gateway.call`; called in process (a workflow node's call) it takes a `signal` whose
 * abort cancels the call upstream, as a client's cancellation does.
 */
export type RelayHandler = (data: unknown, info: BusMessageInfo, signal?: AbortSignal) => Promise<unknown>;

type CallRequest = Exclude<GatewayRequest, { method: 'catalog/list' | 'resources/subscribe' | 'completion/complete' | 'logging/setLevel' }>;

/**
 * Creates the handler of `subjects.gatewayCall`.
 * Errors (as PunkError): `InvalidMessage`, `ServerNotFound`, `ToolNotFound`,
 * `PolicyDenied` (resources, prompts), `ServerUnavailable`, `UpstreamTimeout`,
 * `UpstreamError` (details `{ mcpCode, data }`), and the ledger's append errors.
 * `resources/subscribe` answers `{}` once this replica's upstream connection is subscribed;
 * `completion/complete` answers the upstream's result; `logging/setLevel` answers `{}` (upstream.ts).
 * A call whose channel has era `2026` may answer an `input_required` result instead (input-required.ts).
 * A call with a channel is cancelled upstream when its front says so on `punk.call.<callId>.cancel` (before the call
 * came here too: client-channel.ts); a call so cancelled, at whatever stage, answers PunkError `Cancelled` once its
 * ledger records are in, whatever it came to, so the front knows to send its client no response (MCP 2025-11-25
 * basic/utilities/cancellation).
 * With `pinning`, a tools/call to a tool whose changed definition awaits an admin's acceptance answers a tool error
 * (the shape of an approval_required refusal) after the governance decision, without reaching the upstream.
 * Both checks (tool served, no approval pending) are made again right before the request goes out, after any
 * (re)connect inside the call (idle reconnect, 401 renewal) that listed the tools anew; a refusal there ends the
 * same way, on the ledger, without the request. A tools/call that consumed an approval and ended before any request
 * went out (unavailable, busy, circuit open, refused) gives the approval back for the next call (approvals.ts).
 */
export function createRelay(deps: {
  bus: Bus;
  log: Logger;
  registry: Registry;
  pending: PendingRequests;
  decider: CallDecider;
  /** This replica's cancellation subscription (one for every call). */
  cancellations: CallCancellations;
  pinning?: PinningCheck;
  /** Largest result relayed (`PUNK_MAX_RESULT_BYTES`, default 32 MiB): a larger one is a tool error or a `PayloadTooLarge` error. */
  maxResultBytes?: number;
  /**
   * The tenants' workflows (workflows/served.ts): their catalog entry joins `catalog/list`, and a tools/call of server
   * `WORKFLOW_SERVER` runs one.
   */
  workflows?: Pick<ServedWorkflows, 'catalogEntry' | 'callTool'>;
  /** Per-user connections (`spec.auth.perUser`): the bearer of each call to such a server. */
  connections?: Pick<Connections, 'callBearer'>;
}): RelayHandler {
  const { bus, log, registry, pending, decider, pinning, cancellations } = deps;
  const maxResultBytes = deps.maxResultBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
  return async (data, info, signal) => {
    const request = receivedMessage(gatewayRequestSchema, subjects.gatewayCall, data, info.local);
    if (request.method === 'catalog/list') {
      const reply = listCatalog(registry, request.tenant, request.server);
      // The workflows' entry (each checked against the catalog) joins only the tenant's whole list.
      const entry = request.server === undefined ? deps.workflows?.catalogEntry(request.tenant) : undefined;
      return entry ? { servers: [...reply.servers, entry] } : reply;
    }
    if (request.method === 'tools/call' && request.server === WORKFLOW_SERVER && deps.workflows) {
      // The client's cancellation of the call cancels the run.
      const cancel = request.channel ? cancellations.watch(request.channel.callId) : undefined;
      return deps.workflows.callTool(request, cancel?.signal).finally(() => cancel?.close());
    }
    const upstream = registry.find(request.tenant, request.server, 'sessionId' in request ? request.sessionId : undefined);
    if (!upstream)
      throw new PunkError('ServerNotFound', `server ${request.server} is not registered in tenant ${request.tenant}`, {
        server: request.server,
      });
    if (request.method === 'resources/subscribe') {
      await upstream.subscribe(request.uri);
      return {};
    }
    if (request.method === 'completion/complete') {
      return upstream.complete({ ref: request.ref, argument: request.argument, ...(request.context && { context: request.context }) });
    }
    if (request.method === 'logging/setLevel') {
      await upstream.setLogLevel(request.level);
      return {};
    }
    const tokenExchange = upstream.server.spec.auth?.tokenExchange;
    if (tokenExchange && !request.exchangedToken) {
      // Fails closed: a call that did not come through mcp-front's exchange (a workflow run's) never goes as Punk.
      throw new PunkError(
        'OAuthTokenRequired',
        `server "${request.server}" is called as its caller (spec.auth.tokenExchange, audience ${tokenExchange.audience}), and this ${request.method} carries no token exchanged for its caller ${request.principal.subject} (only a client's call through mcp-front, signed in with an OAuth token, does; a workflow run's does not)`,
        { server: request.server, subject: request.principal.subject },
      );
    }
    // The caller's own identity upstream: its exchanged token, or its per-user connection (connections.ts).
    const bearer: CallBearer | undefined = request.exchangedToken
      ? { accessToken: request.exchangedToken.accessToken, identity: `exchanged token for subject ${request.exchangedToken.subject}` }
      : upstream.server.spec.auth?.perUser
        ? await perUserBearer(deps.connections, request.tenant, request.principal, request.server)
        : undefined;
    const context: CallContext = {
      tenant: request.tenant,
      server: request.server,
      runId: request.runId,
      principal: request.principal,
      sessionId: request.sessionId,
    };
    const cancel = request.channel ? cancellations.watch(request.channel.callId, signal) : signal && { signal, close: () => undefined };
    // The decisions' audit records go on the ledger alongside the rest of the call; the call's answer waits for them.
    const audits: CallDecision[] = [];
    const decide: Decide = async (check) => {
      const audit = await decider.decide(check);
      audits.push(audit);
      return audit;
    };
    const run = (link: ClientLink | undefined): Promise<Record<string, unknown>> => {
      switch (request.method) {
        case 'tools/call': {
          // approvals.ts: an approval is spent by a request that reached the upstream; the call's ending gives it back otherwise.
          const use: ApprovalUse = { id: undefined, reached: false };
          return callTool(bus, log, decide, upstream, request, context, link, cancel?.signal, pinning, maxResultBytes, use).finally(() =>
            use.id !== undefined && !use.reached
              ? releaseApproval(bus, log, { tenant: request.tenant, id: use.id, runId: context.runId })
              : undefined,
          );
        }
        case 'resources/read':
          return relayOther(bus, decide, upstream, request, context, 'resource', request.uri, link, cancel?.signal, maxResultBytes);
        case 'prompts/get':
          return relayOther(bus, decide, upstream, request, context, 'prompt', request.name, link, cancel?.signal, maxResultBytes);
      }
    };
    // The call may outlive this reply (input_required): stop listening for its cancellation when it ends.
    const dispatch = (link: ClientLink | undefined) =>
      afterAudits(
        audits,
        withCallBearer(bearer, () => run(link)),
      )
        .then((result) => {
          if (cancel?.signal.aborted)
            throw new PunkError('Cancelled', `the client cancelled ${request.method} on server ${request.server}`, {
              server: request.server,
            });
          return result;
        })
        .finally(() => cancel?.close());
    try {
      // A 2026-07-28 client gets the upstream's requests as input_required results (input-required.ts).
      if (request.channel?.era === '2026')
        return await runWithInputRequired({ bus, log, pending }, request.channel, request.principal, dispatch);
      const link =
        request.channel && request.sessionId !== undefined
          ? busClientLink({ bus, log, pending }, request.sessionId, request.channel)
          : undefined;
      return await dispatch(link);
    } catch (error) {
      if (!(error instanceof PunkError)) log.error({ err: errorMessage(error), server: upstream.key }, 'relay failed');
      throw error;
    }
  };
}

function listCatalog(registry: Registry, tenant: string, server: string | undefined): CatalogReply {
  const servers = registry.catalog(tenant);
  if (server === undefined) return { servers };
  const one = servers.find((s) => s.name === server);
  if (!one) throw new PunkError('ServerNotFound', `server ${server} is not registered in tenant ${tenant}`, { server });
  return { servers: [one] };
}

/** The approval a tools/call consumed (its `id`), and whether a request of the call reached the upstream, which spends it. */
interface ApprovalUse {
  id: string | undefined;
  reached: boolean;
}

async function callTool(
  bus: Bus,
  log: Logger,
  decide: Decide,
  upstream: Upstream,
  request: Extract<CallRequest, { method: 'tools/call' }>,
  context: CallContext,
  link: ClientLink | undefined,
  signal: AbortSignal | undefined,
  pinning: PinningCheck | undefined,
  maxResultBytes: number,
  use: ApprovalUse,
): Promise<Record<string, unknown>> {
  const name = request.name;
  // When the front stops waiting for this reply (an approval wait ends before it).
  const deadline = request.deadline && {
    at: Date.now() + request.deadline.waitMs,
    ms: request.deadline.ms,
    source: request.deadline.source,
  };
  const notServed = () =>
    new PunkError('ToolNotFound', `tool ${name} is not served by server ${request.server}`, { tool: name, server: request.server });
  // A listed tool the manifest denies, or one hidden by pinning, answers why (a tool error), not that it is unknown.
  const known = upstream.knownTool(name);
  const denial = known === undefined ? undefined : denialOf(upstream.server, name);
  if (denial !== undefined) return toolError(denial);
  const hidden = () => pinning?.isHidden(request.tenant, request.server, name) === true;
  if (known === undefined && !hidden()) throw notServed();
  const declaredLevel = declaredLevelOf(upstream.server, name, typeof known === 'object' ? known : undefined);
  const audit = await ask(decide, request, context, 'tool', name, declaredLevel);
  const { decision } = audit;
  if (decision.decision === 'approval_required') {
    // approvals.ts: an approval of this exact call is consumed, or asked for, or waited for, or the call fails closed.
    const token = request._meta?.['progressToken'];
    const approval = await seekApproval(bus, log, {
      tenant: request.tenant,
      principal: request.principal,
      server: request.server,
      tool: name,
      arguments: request.arguments,
      runId: context.runId,
      sessionId: context.sessionId,
      decision,
      link,
      progressToken: typeof token === 'string' || typeof token === 'number' ? token : undefined,
      signal,
      deadline,
    });
    if (!approval.approved) return toolError(approval.message);
    use.id = approval.approval.id;
  } else if (decision.decision !== 'allow') return toolError(refusal(`tool ${name}`, request.server, decision));
  if (hidden() || pinning?.isApprovalRequired(request.tenant, request.server, name)) {
    // Fails closed like an approval_required decision for an unattended caller; the attempt is on the ledger.
    const message = hidden() ? awaitingReviewMessage(name, request.server) : pinningRefusal(name, request.server);
    await completedUncalled(
      bus,
      audit,
      callEvent('tool.completed', context, { name, decisionId: decision.decisionId, upstreamCalled: false, isError: true, error: message }),
    );
    return toolError(message);
  }
  if (!upstream.accepting) {
    // The attempt is on the ledger too: the decision above, and this outcome without an upstream call.
    const message = `server ${request.server} is unavailable (${upstream.state}${upstream.error ? `: ${upstream.error}` : ''})`;
    await completedUncalled(
      bus,
      audit,
      callEvent('tool.completed', context, { name, decisionId: decision.decisionId, upstreamCalled: false, isError: true, error: message }),
    );
    return toolError(message);
  }
  const started = Date.now();
  const called = callEvent('tool.called', context, {
    name,
    arguments: request.arguments ?? {},
    decisionId: decision.decisionId,
    sideEffectLevel: decision.sideEffectLevel,
    ...(use.id !== undefined && { approvalId: use.id }),
    ...(audit.folded && { decision: audit.folded }),
    ...upstreamIdentityOf(),
  });
  const appendCalled = () => {
    const append = settle(appendLedgerEvent(bus, called));
    audit.carry(append);
    return append;
  };
  // The checks above again, right before the request goes out: a (re)connect inside the call lists the tools anew and
  // the pinning review may have hidden the tool or made it wait for an approval. `tool.called` is appended (alongside
  // the request) once a request is admitted.
  let refusedAs: 'not-served' | 'pinned' | 'hidden' | undefined;
  let appended: Promise<PromiseSettledResult<void>> | undefined;
  const admit = (): string | undefined => {
    const now = upstream.knownTool(name);
    if (hidden()) refusedAs = 'hidden';
    else if (!isToolVisible(upstream.server, name) || now === undefined) refusedAs = 'not-served';
    else if (pinning?.isApprovalRequired(request.tenant, request.server, name)) refusedAs = 'pinned';
    if (refusedAs === 'not-served') return notServed().message;
    if (refusedAs === 'hidden') return awaitingReviewMessage(name, request.server);
    if (refusedAs === 'pinned') return pinningRefusal(name, request.server);
    appended ??= appendCalled();
    use.reached = true;
    return undefined;
  };
  const outcome = await settle(
    observeUpstreamCall(
      upstream,
      'tools/call',
      name,
      traceUpstreamCall('tools/call', { name }, upstream.key, request._meta, (meta) =>
        upstream.callTool(name, request.arguments, meta, link, signal, inputModeOf(request), admit, queueShareOf(request.principal)),
      ),
    ),
  );
  if (outcome.status === 'fulfilled' && !outcome.value.ok && outcome.value.kind === 'refused') {
    const sent = appended !== undefined;
    const { message } = outcome.value;
    // Before any request: as the refusals above. After a request was sent (refused with HTTP 401): its completion.
    const data = sent
      ? { name, calledEventId: called.id, durationMs: Date.now() - started }
      : { name, decisionId: decision.decisionId, upstreamCalled: false };
    const wasAppended = sent ? await appended! : undefined;
    const completed = callEvent('tool.completed', context, { ...data, isError: true, error: message });
    if (sent) await appendLedgerEvent(bus, completed);
    else await completedUncalled(bus, audit, completed);
    if (wasAppended?.status === 'rejected') throw wasAppended.reason;
    if (refusedAs === 'not-served') throw notServed();
    return toolError(message);
  }
  // A call that ended before any request was admitted (unavailable, busy, circuit open) is recorded as called, as before.
  const calledAppend = await (appended ?? appendCalled());
  const result = outcomeOf(outcome, (failure) => toolError(failure.message));
  const tooLarge = oversizedResult(result, maxResultBytes, `the result of tool ${name} on server ${request.server}`);
  const completed = callEvent('tool.completed', context, {
    name,
    calledEventId: called.id,
    durationMs: Date.now() - started,
    ...(tooLarge
      ? { isError: true, error: tooLarge.message }
      : result.ok
        ? { isError: result.value.isError === true, result: summarizeResult(result.value, result.redact) }
        : { isError: true, error: result.error }),
  });
  await appendLedgerEvent(bus, completed);
  if (calledAppend.status === 'rejected') throw calledAppend.reason;
  if (tooLarge) return toolError(tooLarge.message);
  // A result too large even to read (past twice the limit, upstream.ts) is a tool error too, as one past the limit.
  if (!result.ok && result.thrown instanceof PunkError && result.thrown.code === 'PayloadTooLarge') return toolError(result.error);
  if (!result.ok) throw result.thrown;
  return result.value;
}

/** The bearer of a call to a server with `spec.auth.perUser`; fails closed without the connections. */
function perUserBearer(
  connections: Pick<Connections, 'callBearer'> | undefined,
  tenant: string,
  principal: Principal,
  server: string,
): Promise<CallBearer> {
  if (!connections)
    throw new PunkError(
      'CredentialsUnavailable',
      `server "${server}" is called with per-user connections, which this gateway does not serve`,
      {
        server,
      },
    );
  return connections.callBearer(tenant, principal, server);
}

/**
 * Which identity reached the upstream, for `tool.called` (`data.upstreamIdentity`): the call's bearer names its
 * subject or principal, never the token; absent when the call goes with the connection's own headers.
 */
function upstreamIdentityOf(): { upstreamIdentity?: string } {
  const identity = callBearerIdentity();
  return identity === undefined ? {} : { upstreamIdentity: identity };
}

/**
 * `call`'s outcome once the audit records of its decisions are in the stream too, so that neither a result nor a
 * refusal is answered before them; a failed append fails the call (the call's own error wins when both fail).
 */
async function afterAudits<T>(audits: CallDecision[], call: Promise<T>): Promise<T> {
  const [outcome] = await Promise.allSettled([call]);
  const recorded = await Promise.allSettled(audits.map((audit) => audit.recorded()));
  if (outcome.status === 'rejected') throw outcome.reason;
  const failed = recorded.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  return outcome.value;
}

/** A promise's settlement, as `Promise.allSettled` gives it (a rejection is handled at once, never unhandled). */
function settle<T>(promise: Promise<T>): Promise<PromiseSettledResult<T>> {
  return promise.then(
    (value) => ({ status: 'fulfilled', value }),
    (reason: unknown) => ({ status: 'rejected', reason }),
  );
}

async function relayOther(
  bus: Bus,
  decide: Decide,
  upstream: Upstream,
  request: Extract<CallRequest, { method: 'resources/read' | 'prompts/get' }>,
  context: CallContext,
  kind: 'resource' | 'prompt',
  target: string,
  link: ClientLink | undefined,
  signal: AbortSignal | undefined,
  maxResultBytes: number,
): Promise<Record<string, unknown>> {
  const what = kind === 'resource' ? `resource ${target}` : `prompt ${target}`;
  if (!upstream.accepting) {
    throw new PunkError(
      'ServerUnavailable',
      `server ${request.server} is unavailable (${upstream.state}${upstream.error ? `: ${upstream.error}` : ''})`,
      { server: request.server },
    );
  }
  const audit = await ask(decide, request, context, kind, target, undefined);
  const { decision } = audit;
  if (decision.decision !== 'allow') {
    throw new PunkError('PolicyDenied', refusal(what, request.server, decision), {
      rule: decision.rule,
      decision: decision.decision,
      decisionId: decision.decisionId,
    });
  }
  const started = Date.now();
  const [calledType, completedType] =
    kind === 'resource' ? (['resource.read', 'resource.completed'] as const) : (['prompt.got', 'prompt.completed'] as const);
  const called = callEvent(calledType, context, {
    ...(kind === 'resource' ? { uri: target } : { name: target, arguments: (request as { arguments?: unknown }).arguments ?? {} }),
    decisionId: decision.decisionId,
    sideEffectLevel: decision.sideEffectLevel,
    ...(audit.folded && { decision: audit.folded }),
  });
  const calledAppend = appendLedgerEvent(bus, called);
  audit.carry(calledAppend);
  const call =
    kind === 'resource'
      ? traceUpstreamCall('resources/read', { uri: target }, upstream.key, request._meta, (meta) =>
          upstream.readResource(target, meta, link, signal, inputModeOf(request), queueShareOf(request.principal)),
        )
      : traceUpstreamCall('prompts/get', { name: target }, upstream.key, request._meta, (meta) =>
          upstream.getPrompt(
            target,
            (request as { arguments?: Record<string, string> }).arguments,
            meta,
            link,
            signal,
            inputModeOf(request),
            queueShareOf(request.principal),
          ),
        );
  const [appended, outcome] = await Promise.allSettled([calledAppend, observeUpstreamCall(upstream, request.method, undefined, call)]);
  const result = outcomeOf(outcome, (failure) => {
    const code = failure.kind === 'timeout' ? 'UpstreamTimeout' : failure.kind === 'cancelled' ? 'Cancelled' : 'ServerUnavailable';
    throw new PunkError(code, failure.message, { server: request.server });
  });
  const tooLarge = oversizedResult(result, maxResultBytes, `the result of ${what} on server ${request.server}`);
  const completed = callEvent(completedType, context, {
    ...(kind === 'resource' ? { uri: target } : { name: target }),
    calledEventId: called.id,
    durationMs: Date.now() - started,
    ...(tooLarge
      ? { isError: true, error: tooLarge.message }
      : result.ok
        ? { isError: false, result: summarizeResult(result.value, result.redact) }
        : { isError: true, error: result.error }),
  });
  await appendLedgerEvent(bus, completed);
  if (appended.status === 'rejected') throw appended.reason;
  if (tooLarge) throw tooLarge;
  if (!result.ok) throw result.thrown;
  return result.value;
}

type Settled =
  | { ok: true; value: Record<string, unknown>; bytes?: number; redact?: (text: string) => string }
  | { ok: false; error: string; thrown: unknown };

/**
 * Folds a call outcome into a value (the upstream result with its connection's redaction, or what `onFailure`
 * returns) or an error to throw after the ledger append.
 */
function outcomeOf(
  outcome: PromiseSettledResult<CallOutcome>,
  onFailure: (failure: Extract<CallOutcome, { ok: false }>) => Record<string, unknown>,
): Settled {
  if (outcome.status === 'rejected') return { ok: false, error: errorMessage(outcome.reason), thrown: outcome.reason };
  if (outcome.value.ok) {
    const { result, bytes, redact } = outcome.value;
    return { ok: true, value: result, redact, ...(bytes !== undefined && { bytes }) };
  }
  try {
    return { ok: true, value: onFailure(outcome.value) };
  } catch (error) {
    return { ok: false, error: errorMessage(error), thrown: error };
  }
}

/**
 * The refusal (`PayloadTooLarge`, naming the size, the limit and `PUNK_MAX_RESULT_BYTES`) of a result the bus could
 * not carry back, or undefined when it fits: checked before the ledger records the outcome, so a result that never
 * reaches its client is recorded as the failure it is.
 */
function oversizedResult(result: Settled, limit: number, what: string): PunkError | undefined {
  // The answer as the upstream sent it is at least as long as the result's JSON: when it fits, the result does.
  const bytes = result.ok && !(result.bytes !== undefined && result.bytes <= limit) ? oversizedBy(result.value, limit) : undefined;
  return bytes === undefined ? undefined : payloadTooLarge(what, bytes, limit);
}

/** Decides one use of this call: in process, or through governance (decisions.ts); its audit record is awaited by the call. */
type Decide = (check: GovernanceCheck) => Promise<CallDecision>;

/**
 * Appends the completion of a use that never went out (`upstreamCalled: false`), after its decision's own record:
 * no first event carried the decision, so it is on the ledger before the outcome it led to.
 */
async function completedUncalled(bus: Bus, audit: CallDecision, completed: LedgerEvent): Promise<void> {
  await audit.recorded();
  await appendLedgerEvent(bus, completed);
}

function ask(
  decide: Decide,
  request: CallRequest,
  context: CallContext,
  kind: 'tool' | 'resource' | 'prompt',
  target: string,
  declaredLevel: number | undefined,
): Promise<CallDecision> {
  return decide({
    tenant: request.tenant,
    principal: request.principal,
    server: request.server,
    kind,
    target,
    ...(declaredLevel !== undefined && { declaredLevel }),
    runId: context.runId,
    ...(context.sessionId !== undefined && { sessionId: context.sessionId }),
  });
}

/** The tool error text of a use `what` (`tool echo`, `workflow summarize`) of `server` that `decision` refuses, naming its rule. */
export function refusal(what: string, server: string, decision: GovernanceDecision): string {
  const verdict =
    decision.decision === 'approval_required'
      ? 'requires an approval, which only tool calls can get (docs/governance.md "Approvals")'
      : 'is denied';
  return `${what} on server ${server} was not run: ${decision.action} ${verdict} by policy rule ${decision.rule} (${decision.reason})`;
}
