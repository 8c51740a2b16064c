/**
 * The tenants' workflows as the gateway serves them (docs/workflows.md "Serving"): from the watch of bucket
 * `PUNK_MCP_WORKFLOWS`, each checked against this replica's catalog of the tenant (ready, or its errors); the ready
 * ones listed to the fronts as the tools of one catalog entry, server {@link WORKFLOW_SERVER} (so `/mcp` names each
 * `punk_workflow__<name>`, docs/endpoint.md), whose calls the relay hands here (trigger `mcp`); and the workflows
 * API (`workflows.list`, `workflows.get`, `workflows.run`, trigger `api`, `workflows.cancel`) of `punk.gateway.admin`.
 * A run's trigger is decided by policy as a tool call of server {@link WORKFLOW_SERVER} is (the workflow's name the
 * tool, level 0: the trigger has no effect of its own, each node's call is decided at its level); a run is cancelled
 * on `punk.call.<runId>.cancel`, which every replica watches, so a cancellation reaches the replica running it.
 */
import { randomUUID } from 'node:crypto';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import {
  classify,
  errorMessage,
  formatWorkflowError,
  namespacedName,
  PunkError,
  subjects,
  validateWorkflowCatalog,
  workflowCatalogOf,
  workflowRunBodySchema,
  type GatewayAdminRequest,
  type Logger,
  type McpWorkflow,
  type Principal,
  type ServerCatalog,
  type SideEffectLevel,
  type TenantWorkflows,
  type WorkflowDetail,
  type WorkflowRunReply,
  type WorkflowView,
  WORKFLOW_SERVER,
} from '@punk/lib';
import type { CallCancellations } from '../client-channel.js';
import type { CallDecider } from '../decisions.js';
import { refusal } from '../relay.js';
import { agentOf, runWorkflow, type RunDeps, type RunOutcome, type ToolCallRequest } from './engine.js';
import type { RunTable } from './run-table.js';

/** The workflows API operations of `punk.gateway.admin`. */
export type WorkflowAdminRequest = Extract<
  GatewayAdminRequest,
  { op: 'workflows.list' | 'workflows.get' | 'workflows.run' | 'workflows.cancel' }
>;

/** Longest a `workflows.cancel` waits for the run to stop, in milliseconds (then it answers `running`). */
const CANCEL_WAIT_MS = 10_000;

/** What the served workflows need. */
export interface ServedWorkflowsDeps extends RunDeps {
  log: Logger;
  workflows: TenantWorkflows;
  /** This replica's catalog of a tenant's servers. */
  catalog(tenant: string): ServerCatalog[];
  runs: RunTable;
  /** Decides a run's trigger. */
  decider: CallDecider;
  /** This replica's watch of `punk.call.<id>.cancel`: a run is cancelled by its run id. */
  cancellations: CallCancellations;
}

/** The workflows of every tenant, served. */
export interface ServedWorkflows {
  /** The catalog entry of the tenant's ready workflows (server {@link WORKFLOW_SERVER}); undefined when none is ready. */
  catalogEntry(tenant: string): ServerCatalog | undefined;
  /**
   * A `tools/call` of a workflow tool (server {@link WORKFLOW_SERVER}): runs it (trigger `mcp`) and answers its MCP
   * result; `signal` (the client's cancellation of the call) aborting cancels the run.
   */
  callTool(request: ToolCallRequest, signal: AbortSignal | undefined): Promise<Record<string, unknown>>;
  /** Answers one workflows API operation. */
  admin(request: WorkflowAdminRequest): Promise<unknown>;
}

/**
 * The side-effect level and read-only flag of a workflow, from its tool_call nodes as this catalog classifies them.
 * A node whose tool the catalog does not list (its server missing or not started, or the tool unknown: the workflow
 * is not ready) has no level Punk can know, a manifest's declared one included: the workflow's level is then
 * `null` (unknown), and it is not read-only. A tool awaiting review (hidden by pinning) is classified from its name
 * and the manifest's declared level, as the run's call is.
 */
function levelsOf(
  workflow: McpWorkflow,
  servers: ServerCatalog[],
  declaredLevel: RunDeps['declaredLevel'],
): { sideEffectLevel: SideEffectLevel | null; readOnly: boolean } {
  const levels: SideEffectLevel[] = [];
  for (const node of workflow.spec.nodes) {
    if (node.kind !== 'tool_call') continue;
    const { server: name, tool } = node.config;
    const server = servers.find((s) => s.name === name);
    const known =
      server !== undefined &&
      (server.tools.some((t) => t.name === tool) || server.withheldTools.some((t) => t.name === tool && t.reason === 'awaiting-review'));
    if (!known) return { sideEffectLevel: null, readOnly: false };
    const declared = server.sideEffectLevels[tool] ?? declaredLevel(server.namespace, name, tool);
    levels.push(classify({ kind: 'tool', server: name, target: tool, declaredLevel: declared }).level);
  }
  const sideEffectLevel = Math.max(0, ...levels) as SideEffectLevel;
  return { sideEffectLevel, readOnly: sideEffectLevel <= 1 };
}

/** Serves the workflows of `deps.workflows`. */
export function serveWorkflows(deps: ServedWorkflowsDeps): ServedWorkflows {
  const ajv = new Ajv2020({ allErrors: false, strict: false, validateFormats: false });
  const validators = new WeakMap<McpWorkflow, ValidateFunction>();

  const viewOf = (workflow: McpWorkflow): WorkflowView => {
    const tenant = workflow.metadata.namespace!;
    const servers = deps.catalog(tenant);
    const errors = validateWorkflowCatalog(workflow, workflowCatalogOf(servers, tenant)).map(formatWorkflowError);
    return {
      name: workflow.metadata.name,
      namespace: tenant,
      description: workflow.spec.description,
      tool: namespacedName(WORKFLOW_SERVER, workflow.metadata.name),
      inputSchema: workflow.spec.input,
      ...levelsOf(workflow, servers, (namespace, server, tool) => deps.declaredLevel(namespace, server, tool)),
      ready: errors.length === 0,
      errors,
    };
  };

  const find = (tenant: string, name: string): McpWorkflow => {
    const workflow = deps.workflows.get(tenant, name);
    if (!workflow) throw new PunkError('WorkflowNotFound', `tenant ${tenant} has no workflow named ${name}`, { workflow: name });
    return workflow;
  };

  /** Checks the arguments against the workflow's input schema. @throws PunkError `InvalidArguments` naming the field. */
  const checkArguments = (workflow: McpWorkflow, args: Record<string, unknown>) => {
    let validate = validators.get(workflow);
    if (!validate) {
      try {
        validate = ajv.compile(workflow.spec.input);
      } catch (error) {
        throw new PunkError(
          'WorkflowNotReady',
          `workflow ${workflow.metadata.name} is not ready: spec.input is not a JSON Schema Punk can compile: ${errorMessage(error)}`,
          { field: 'spec.input' },
        );
      }
      validators.set(workflow, validate);
    }
    if (validate(args)) return;
    const issue = validate.errors?.[0];
    const field = issue ? `arguments${issue.instancePath.replaceAll('/', '.')}` : 'arguments';
    throw new PunkError(
      'InvalidArguments',
      `${field}: ${issue?.message ?? 'do not match the input schema'} (workflow ${workflow.metadata.name})`,
      {
        field,
      },
    );
  };

  /**
   * The policy decision on `caller` starting `workflow` (on the ledger in run `runId` before this resolves), as a
   * tool call of server {@link WORKFLOW_SERVER} named as the workflow, at level 0, by the agent acting for the caller.
   * @throws PunkError `PolicyDenied` naming the rule when it is not allowed (an approval_required decision too: an
   *   approval node of the workflow is the way to ask for one); governance's errors.
   */
  const decideTrigger = async (workflow: McpWorkflow, caller: Principal, runId: string): Promise<void> => {
    const tenant = workflow.metadata.namespace!;
    const name = workflow.metadata.name;
    const audit = await deps.decider.decide({
      tenant,
      // The run's principal, as on every event of the run: a rule naming the caller (or its groups) matches it.
      principal: agentOf(caller),
      server: WORKFLOW_SERVER,
      kind: 'tool',
      target: name,
      declaredLevel: 0,
      runId,
    });
    await audit.recorded();
    const { decision } = audit;
    if (decision.decision !== 'allow')
      throw new PunkError('PolicyDenied', refusal(`workflow ${name}`, WORKFLOW_SERVER, decision), { rule: decision.rule });
  };

  /**
   * Starts a run of a ready workflow; resolves once it is recorded as running, with its outcome's promise.
   * `signal` aborting (the client's cancellation of its call) cancels it, as `punk.call.<runId>.cancel` does.
   * @throws PunkError `WorkflowNotReady` naming its errors (or a `spec.input` Ajv cannot compile), `InvalidArguments`,
   *   `PolicyDenied` (the trigger).
   */
  const start = async (
    workflow: McpWorkflow,
    caller: Principal,
    trigger: 'mcp' | 'api',
    args: Record<string, unknown>,
    runId: string,
    signal?: AbortSignal,
  ): Promise<{ outcome: Promise<RunOutcome> }> => {
    const view = viewOf(workflow);
    if (!view.ready)
      throw new PunkError('WorkflowNotReady', `workflow ${view.name} is not ready: ${view.errors.join('; ')}`, { errors: view.errors });
    checkArguments(workflow, args);
    await decideTrigger(workflow, caller, runId);
    const tenant = workflow.metadata.namespace!;
    const cancel = deps.cancellations.watch(runId, signal);
    try {
      await deps.runs.add({ tenant, runId, workflow: view.name, principal: agentOf(caller) });
    } catch (error) {
      cancel.close();
      throw error;
    }
    const outcome = runWorkflow(deps, {
      workflow,
      caller,
      trigger,
      arguments: args,
      runId,
      tool: view.tool,
      signal: cancel.signal,
    })
      .then(
        async (ended) => {
          await deps.runs.end(tenant, runId, ended.state);
          return ended;
        },
        async (error: unknown) => {
          await deps.runs.end(tenant, runId, 'failed');
          throw error;
        },
      )
      .finally(() => cancel.close());
    // The API may answer before the run ends: its end is logged here when it fails unexpectedly (a ledger append).
    outcome.catch((error: unknown) =>
      deps.log.error({ runId, workflow: view.name, err: error }, 'workflow run stopped without its end on the ledger'),
    );
    return { outcome };
  };

  /**
   * Cancels a running run on whichever replica runs it and waits (up to {@link CANCEL_WAIT_MS}) for it to stop.
   * @throws PunkError `WorkflowRunNotFound`, `WorkflowRunNotRunning` naming the state it ended in.
   */
  const cancelRun = async (request: Extract<WorkflowAdminRequest, { op: 'workflows.cancel' }>): Promise<WorkflowRunReply> => {
    const { tenant, name, runId } = request;
    const notRunning = (state: string) =>
      new PunkError(
        'WorkflowRunNotRunning',
        `run ${runId} of workflow ${name} is ${state}, not running: only a running run can be cancelled`,
        { runId, state },
      );
    const row = await deps.runs.find(tenant, runId);
    if (row?.workflow !== name)
      throw new PunkError(
        'WorkflowRunNotFound',
        `workflow ${name} of tenant ${tenant} has no run ${runId} (a run is known here while it runs and for a day after it ends; every run is on the ledger: GET /api/v1/runs/${runId})`,
        { runId },
      );
    if (row.state !== 'running') throw notRunning(row.state);
    const by = request.principal.subject;
    await deps.bus.publish(subjects.callCancel(runId), { reason: `cancelled by ${by} through the API` });
    const until = Date.now() + CANCEL_WAIT_MS;
    for (;;) {
      const now = await deps.runs.find(tenant, runId);
      if (now?.state === 'cancelled') return { runId, state: 'cancelled' };
      if (now && now.state !== 'running') throw notRunning(now.state);
      if (Date.now() >= until) return { runId, state: 'running' };
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  return {
    catalogEntry(tenant) {
      // A ready workflow's tools are all in the catalog, so its level is known.
      const ready = deps.workflows
        .of(tenant)
        .map(viewOf)
        .flatMap((view) => (view.ready && view.sideEffectLevel !== null ? [{ ...view, sideEffectLevel: view.sideEffectLevel }] : []));
      if (ready.length === 0) return undefined;
      return {
        name: WORKFLOW_SERVER,
        namespace: tenant,
        state: 'ready',
        capabilities: { tools: { listChanged: true } },
        tools: ready.map((view) => ({
          name: view.name,
          ...(view.description !== '' && { description: view.description }),
          inputSchema: view.inputSchema,
          annotations: { title: `workflow ${view.name}`, readOnlyHint: view.readOnly, destructiveHint: view.sideEffectLevel >= 4 },
        })),
        resources: [],
        resourceTemplates: [],
        prompts: [],
        sideEffectLevels: Object.fromEntries(ready.map((view) => [view.name, view.sideEffectLevel])),
        withheldTools: [],
        // The front waits for the whole run: its limit, and a little for the answer.
        timeoutMs: deps.limits.maxRunMs + 5_000,
      };
    },

    async callTool(request, signal) {
      const workflow = deps.workflows.get(request.tenant, request.name);
      if (!workflow)
        throw new PunkError('ToolNotFound', `tool ${request.name} is not served by server ${WORKFLOW_SERVER}: no such workflow`, {
          tool: request.name,
          server: WORKFLOW_SERVER,
        });
      let outcome: RunOutcome;
      try {
        outcome = await (await start(workflow, request.principal, 'mcp', request.arguments ?? {}, request.runId, signal)).outcome;
      } catch (error) {
        if (
          error instanceof PunkError &&
          (error.code === 'WorkflowNotReady' || error.code === 'InvalidArguments' || error.code === 'PolicyDenied')
        )
          return { content: [{ type: 'text', text: error.message }], isError: true };
        throw error;
      }
      if (outcome.state !== 'completed')
        return {
          content: [
            { type: 'text', text: `workflow ${workflow.metadata.name} ${outcome.state} (run ${request.runId}): ${outcome.error.message}` },
          ],
          isError: true,
        };
      const { result } = outcome;
      return {
        content: [{ type: 'text', text: typeof result === 'string' ? result : JSON.stringify(result ?? null) }],
        ...(typeof result === 'object' && result !== null && !Array.isArray(result) && { structuredContent: result }),
      };
    },

    async admin(request) {
      switch (request.op) {
        case 'workflows.list':
          return { workflows: deps.workflows.of(request.tenant).map(viewOf) };
        case 'workflows.get': {
          const workflow = find(request.tenant, request.name);
          const detail: WorkflowDetail = { ...viewOf(workflow), spec: workflow.spec as unknown as Record<string, unknown> };
          return { workflow: detail };
        }
        case 'workflows.run': {
          const workflow = find(request.tenant, request.name);
          const parsed = workflowRunBodySchema.safeParse(request.body);
          if (!parsed.success) {
            const issue = parsed.error.issues[0]!;
            const field = ['body', ...issue.path.map(String)].join('.');
            throw new PunkError('InvalidRequest', `${field}: ${issue.message}`, { field });
          }
          const runId = randomUUID();
          const { outcome } = await start(workflow, request.principal, 'api', parsed.data.arguments, runId);
          let timer: NodeJS.Timeout | undefined;
          const waited = await Promise.race([
            outcome.catch((error: unknown): RunOutcome => ({ state: 'failed', error: { code: 'WorkflowFailed', message: String(error) } })),
            new Promise<undefined>((resolve) => {
              timer = setTimeout(() => resolve(undefined), parsed.data.waitSeconds * 1000);
            }),
          ]);
          clearTimeout(timer);
          const reply: WorkflowRunReply =
            waited === undefined
              ? { runId, state: 'running' }
              : waited.state === 'completed'
                ? { runId, state: 'completed', result: waited.result ?? null }
                : { runId, state: waited.state, error: waited.error };
          return reply;
        }
        case 'workflows.cancel':
          return cancelRun(request);
      }
    },
  };
}
