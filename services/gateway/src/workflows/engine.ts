/**
 * Runs one McpWorkflow (docs/workflows.md "Runs"): node after node from `spec.start`, each tool_call node's call
 * handed to the relay as a client's `tools/call` is (so governance, classification, pinning and the ledger treat it
 * the same), as the agent `workflow-engine` acting for the caller. Every step is on the run's ledger, in order:
 * `workflow.started`, per node `node.started` and `node.completed`, then `workflow.completed`, `workflow.failed` or
 * `workflow.cancelled`.
 * A tool error (a failing tool, a server down, a denied call, an approval not granted) fails the run closed at
 * that node: an unattended run never waits for a human. A cancellation (the run's `signal`) stops it before its next
 * node and cancels the node in flight (its upstream call too), ending it with `workflow.cancelled`.
 */
import { randomUUID } from 'node:crypto';
import {
  appendLedgerEvent,
  classify,
  DEFAULT_APPROVAL,
  errorMessage,
  evaluateExpression,
  oversizedBy,
  PunkError,
  WORKFLOW_ENGINE_SUBJECT,
  WORKFLOW_SERVER,
  type Bus,
  type Expression,
  type ExpressionEnvironment,
  type GatewayRequest,
  type LedgerEvent,
  type LedgerEventType,
  type Logger,
  type McpWorkflow,
  type Principal,
  type SideEffectLevel,
  type WorkflowNode,
} from '@punk/lib';
import { seekApproval } from '../approvals.js';

/** Bounds of one run. */
export interface WorkflowLimits {
  /** Most nodes a run executes. */
  maxNodes: number;
  /** Longest a run may take, in milliseconds. */
  maxRunMs: number;
  /** Largest saved result, and largest result of the run, as JSON in UTF-8 bytes. */
  maxResultBytes: number;
}

/** The limits of a gateway that sets none. */
export const DEFAULT_WORKFLOW_LIMITS: WorkflowLimits = { maxNodes: 200, maxRunMs: 5 * 60_000, maxResultBytes: 1024 * 1024 };

/** A tools/call request as the relay takes it. */
export type ToolCallRequest = Extract<GatewayRequest, { method: 'tools/call' }>;

/** What a run needs from the gateway. */
export interface RunDeps {
  bus: Bus;
  log: Logger;
  /**
   * The relay: answers one tools/call as it answers a client's (a tool error for a refusal), or throws a PunkError;
   * `signal` aborting cancels the call upstream.
   */
  callTool(request: ToolCallRequest, signal: AbortSignal | undefined): Promise<Record<string, unknown>>;
  /** The side-effect level the gateway declares for a tool (its manifest's override, an openapi method), if any. */
  declaredLevel(tenant: string, server: string, tool: string): SideEffectLevel | undefined;
  limits: WorkflowLimits;
}

/** One run to make. */
export interface RunRequest {
  workflow: McpWorkflow;
  /** Who triggered it. */
  caller: Principal;
  trigger: 'mcp' | 'api';
  arguments: Record<string, unknown>;
  runId: string;
  /** The workflow's tool name on `/mcp`. */
  tool: string;
  /** Aborts to cancel the run; its reason (a sentence naming who cancelled and how) goes on `workflow.cancelled`. */
  signal?: AbortSignal;
}

/** Why a run failed: a PunkError code, a sentence, and the node. */
export interface RunError {
  code: string;
  message: string;
  node?: string;
}

/** How a run ended. */
export type RunOutcome = { state: 'completed'; result: unknown } | { state: 'failed' | 'cancelled'; error: RunError };

/** The principal of a run's calls: the agent `workflow-engine` of the caller's tenant, acting for the caller. */
export function agentOf(caller: Principal): Principal {
  return {
    subject: WORKFLOW_ENGINE_SUBJECT,
    tenant: caller.tenant,
    groups: [],
    actingFor: { subject: caller.actingFor?.subject ?? caller.subject, groups: caller.actingFor?.groups ?? caller.groups },
  };
}

/** A failure at a node, carried to the run's end; `facts` go on its `node.completed` (a tool_call's server, tool, level). */
class NodeFailure extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly facts: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** The text of an MCP result's text content items, joined. */
function textOf(result: Record<string, unknown>): string {
  const content = Array.isArray(result.content) ? (result.content as Array<{ type?: unknown; text?: unknown }>) : [];
  return content
    .filter((item) => item.type === 'text' && typeof item.text === 'string')
    .map((item) => item.text as string)
    .join('\n');
}

/** What a tool result saves under `saveAs`: its structured content, else its text parsed as JSON, else the text. */
export function savedValueOf(result: Record<string, unknown>): unknown {
  if (result.structuredContent !== undefined) return result.structuredContent;
  const text = textOf(result);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * Runs `run` to its end; never throws for what happens in the run (a failure is the outcome, on the ledger).
 * @throws PunkError from the ledger when an event cannot be appended (the run stops: no step without its record).
 */
export async function runWorkflow(deps: RunDeps, run: RunRequest): Promise<RunOutcome> {
  const { workflow, runId } = run;
  const tenant = workflow.metadata.namespace!;
  const name = workflow.metadata.name;
  const principal = agentOf(run.caller);
  const { limits } = deps;
  const started = Date.now();
  const deadline = started + limits.maxRunMs;
  const event = (type: LedgerEventType, data: Record<string, unknown>, server?: string): LedgerEvent => ({
    id: randomUUID(),
    type,
    tenant,
    runId,
    occurredAt: new Date().toISOString(),
    source: 'gateway',
    principal,
    ...(server !== undefined && { server }),
    data: { workflow: name, ...data },
  });
  const append = (type: LedgerEventType, data: Record<string, unknown>, server?: string) =>
    appendLedgerEvent(deps.bus, event(type, data, server));
  const nodes = new Map(workflow.spec.nodes.map((node) => [node.id, node]));
  const env: ExpressionEnvironment = { input: run.arguments, vars: {} };
  const evaluate = (expression: Expression) => evaluateExpression(expression, env);
  const fitting = (value: unknown, what: string) => {
    const bytes = oversizedBy(value, limits.maxResultBytes);
    if (bytes !== undefined)
      throw new NodeFailure(
        'WorkflowLimit',
        `${what} is ${String(bytes)} bytes as JSON, above the limit of ${String(limits.maxResultBytes)} bytes (maxResultBytes)`,
      );
    return value;
  };
  const { signal } = run;
  const cancelled = () => new NodeFailure('WorkflowCancelled', `the run was cancelled: ${String(signal?.reason)}`);
  /** Ends the run as cancelled at node `nodeId` (the one in flight, or the next), `message` naming it and why. */
  const endCancelled = async (nodeId: string, message: string): Promise<RunOutcome> => {
    await append('workflow.cancelled', {
      durationMs: Date.now() - started,
      outcome: 'cancelled',
      node: nodeId,
      reason: String(signal?.reason),
    });
    return { state: 'cancelled', error: { code: 'WorkflowCancelled', message, node: nodeId } };
  };
  /** `promise`, or a failure once the run's time is up. */
  const inTime = async <T>(promise: Promise<T>): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new NodeFailure('WorkflowTimeout', `the run took longer than its limit of ${String(limits.maxRunMs)} ms (maxRunMs)`)),
        Math.max(0, deadline - Date.now()),
      );
    });
    try {
      return await Promise.race([promise, timeout]);
    } finally {
      clearTimeout(timer);
    }
  };

  /** Executes one node; returns the next node's id (undefined: the run ends) and what node.completed records. */
  const execute = async (node: WorkflowNode): Promise<{ next: string | undefined; data: Record<string, unknown>; output?: unknown }> => {
    switch (node.kind) {
      case 'tool_call': {
        const { server, tool } = node.config;
        const args = Object.fromEntries(Object.entries(node.config.args).map(([key, arg]) => [key, evaluate(arg)]));
        const level = classify({ kind: 'tool', server, target: tool, declaredLevel: deps.declaredLevel(tenant, server, tool) }).level;
        const facts = { server, tool, sideEffectLevel: level };
        let result: Record<string, unknown>;
        try {
          result = await inTime(
            deps.callTool({ method: 'tools/call', tenant, server, principal, runId, name: tool, arguments: args }, signal),
          );
        } catch (error) {
          if (error instanceof NodeFailure) throw new NodeFailure(error.code, error.message, facts);
          throw new NodeFailure(
            error instanceof PunkError ? error.code : 'ToolCallFailed',
            `tool ${tool} on server ${server}: ${errorMessage(error)}`,
            facts,
          );
        }
        if (result.isError === true) {
          const text = textOf(result) || '(no text)';
          // The gateway's own refusals (policy, approval) name the tool already and say it was not run.
          const own = text.startsWith(`tool ${tool} on server ${server} `) || text.startsWith(`tool ${tool} of server ${server} `);
          throw new NodeFailure('ToolError', own ? text : `tool ${tool} on server ${server} answered an error: ${text}`, facts);
        }
        env.vars[node.config.saveAs ?? node.id] = fitting(savedValueOf(result), `the result of node ${node.id}`);
        return { next: node.next, data: { ...facts, isError: false } };
      }
      case 'branch': {
        const taken = node.config.cases.findIndex((c) => {
          const value = evaluate(c.when);
          if (typeof value !== 'boolean')
            throw new PunkError('WorkflowExpression', `a branch condition must be true or false, not ${JSON.stringify(value)}`);
          return value;
        });
        return { next: taken === -1 ? node.next : node.config.cases[taken]!.next, data: { case: taken === -1 ? null : taken } };
      }
      case 'approval': {
        const approval = await inTime(
          seekApproval(deps.bus, deps.log, {
            tenant,
            principal,
            server: WORKFLOW_SERVER,
            tool: name,
            // The caller is in the digest: an approval lets that caller's run pass, not another's.
            arguments: { node: node.id, input: run.arguments, caller: principal.actingFor?.subject },
            runId,
            sessionId: undefined,
            decision: {
              decisionId: randomUUID(),
              decision: 'approval_required',
              sideEffectLevel: 0,
              levelSource: 'declared',
              action: `run:${WORKFLOW_SERVER}/${name}`,
              rule: `workflow/${name}/${node.id}`,
              reason: node.config.message ?? `approval node ${node.id} of workflow ${name}`,
              generation: 0,
              approval: DEFAULT_APPROVAL,
            },
            link: undefined,
            progressToken: undefined,
            signal,
          }),
        );
        if (!approval.approved) throw new NodeFailure('ApprovalRequired', approval.message);
        return { next: node.next, data: { approvalId: approval.approval.id } };
      }
      case 'output':
        return { next: undefined, data: {}, output: fitting(evaluate(node.config.value), 'the result of the run') };
    }
  };

  await append('workflow.started', { tool: run.tool, trigger: run.trigger, arguments: run.arguments });
  let count = 0;
  let current: string | undefined = workflow.spec.start;
  let result: unknown;
  let ended = false;
  while (current !== undefined) {
    const node = nodes.get(current)!;
    const nodeStarted = Date.now();
    try {
      count += 1;
      if (count > limits.maxNodes)
        throw new NodeFailure('WorkflowLimit', `the run reached its limit of ${String(limits.maxNodes)} nodes (maxNodes)`);
      if (Date.now() >= deadline)
        throw new NodeFailure('WorkflowTimeout', `the run took longer than its limit of ${String(limits.maxRunMs)} ms (maxRunMs)`);
      // Between nodes: the next one never starts.
      if (signal?.aborted) return await endCancelled(node.id, `node ${node.id}: ${cancelled().message}`);
      await append('node.started', { node: node.id, kind: node.kind });
      const step = await execute(node);
      await append(
        'node.completed',
        { node: node.id, kind: node.kind, durationMs: Date.now() - nodeStarted, next: step.next ?? null, ...step.data },
        node.kind === 'tool_call' ? node.config.server : undefined,
      );
      if (node.kind === 'output') {
        result = step.output;
        ended = true;
      }
      current = step.next;
    } catch (thrown) {
      // The node in flight when the run was cancelled is cancelled, whatever its call answered on the way out (a
      // cancelled upstream call answers an error).
      const error = signal?.aborted ? cancelled() : thrown;
      const code = error instanceof NodeFailure || error instanceof PunkError ? error.code : 'WorkflowFailed';
      if (!(error instanceof NodeFailure) && !(error instanceof PunkError))
        deps.log.error({ err: errorMessage(error), runId }, 'workflow run failed');
      const message = `node ${node.id}: ${errorMessage(error)}`;
      const facts = thrown instanceof NodeFailure ? thrown.facts : {};
      await append('node.completed', {
        node: node.id,
        kind: node.kind,
        durationMs: Date.now() - nodeStarted,
        isError: true,
        error: message,
        ...facts,
      });
      if (signal?.aborted) return await endCancelled(node.id, message);
      await append('workflow.failed', { durationMs: Date.now() - started, outcome: 'failed', node: node.id, code, error: message });
      return { state: 'failed', error: { code, message, node: node.id } };
    }
  }
  if (!ended) {
    try {
      result = fitting(workflow.spec.output ? evaluate(workflow.spec.output) : env.vars, 'the result of the run');
    } catch (error) {
      const code = error instanceof NodeFailure || error instanceof PunkError ? error.code : 'WorkflowFailed';
      const message = `spec.output: ${errorMessage(error)}`;
      await append('workflow.failed', { durationMs: Date.now() - started, outcome: 'failed', code, error: message });
      return { state: 'failed', error: { code, message } };
    }
  }
  await append('workflow.completed', { durationMs: Date.now() - started, outcome: 'ok', result: result ?? null });
  return { state: 'completed', result };
}
