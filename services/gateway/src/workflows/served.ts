/**
 * The tenants' workflows as the gateway serves them (docs/workflows.md "Serving"): from the watch of bucket
 * `PUNK_MCP_WORKFLOWS`, each checked against this replica's catalog of the tenant (ready, or its errors); the ready
 * ones listed to the fronts as the tools of one catalog entry, server {@link WORKFLOW_SERVER} (so `/mcp` names each
 * `punk_workflow__<name>`, docs/endpoint.md), whose calls the relay hands here (trigger `mcp`); and the workflows
 * API (`workflows.list`, `workflows.get`, `workflows.run`, trigger `api`) of `punk.gateway.admin`.
 */
import { randomUUID } from 'node:crypto';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import {
  classify,
  errorMessage,
  formatWorkflowError,
  namespacedName,
  PunkError,
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
import { agentOf, runWorkflow, type RunDeps, type RunOutcome, type ToolCallRequest } from './engine.js';
import type { RunTable } from './run-table.js';

/** The workflows API operations of `punk.gateway.admin`. */
export type WorkflowAdminRequest = Extract<GatewayAdminRequest, { op: 'workflows.list' | 'workflows.get' | 'workflows.run' }>;

/** What the served workflows need. */
export interface ServedWorkflowsDeps extends RunDeps {
  log: Logger;
  workflows: TenantWorkflows;
  /** This replica's catalog of a tenant's servers. */
  catalog(tenant: string): ServerCatalog[];
  runs: RunTable;
}

/** The workflows of every tenant, served. */
export interface ServedWorkflows {
  /** The catalog entry of the tenant's ready workflows (server {@link WORKFLOW_SERVER}); undefined when none is ready. */
  catalogEntry(tenant: string): ServerCatalog | undefined;
  /** A `tools/call` of a workflow tool (server {@link WORKFLOW_SERVER}): runs it (trigger `mcp`) and answers its MCP result. */
  callTool(request: ToolCallRequest): Promise<Record<string, unknown>>;
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
   * Starts a run of a ready workflow; resolves once it is recorded as running, with its outcome's promise.
   * @throws PunkError `WorkflowNotReady` naming its errors (or a `spec.input` Ajv cannot compile), `InvalidArguments`.
   */
  const start = async (
    workflow: McpWorkflow,
    caller: Principal,
    trigger: 'mcp' | 'api',
    args: Record<string, unknown>,
    runId: string,
  ): Promise<{ outcome: Promise<RunOutcome> }> => {
    const view = viewOf(workflow);
    if (!view.ready)
      throw new PunkError('WorkflowNotReady', `workflow ${view.name} is not ready: ${view.errors.join('; ')}`, { errors: view.errors });
    checkArguments(workflow, args);
    const tenant = workflow.metadata.namespace!;
    await deps.runs.add({ tenant, runId, workflow: view.name, principal: agentOf(caller) });
    const outcome = runWorkflow(deps, { workflow, caller, trigger, arguments: args, runId, tool: view.tool }).finally(() =>
      deps.runs.remove(tenant, runId),
    );
    // The API may answer before the run ends: its end is logged here when it fails unexpectedly (a ledger append).
    outcome.catch((error: unknown) =>
      deps.log.error({ runId, workflow: view.name, err: error }, 'workflow run stopped without its end on the ledger'),
    );
    return { outcome };
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

    async callTool(request) {
      const workflow = deps.workflows.get(request.tenant, request.name);
      if (!workflow)
        throw new PunkError('ToolNotFound', `tool ${request.name} is not served by server ${WORKFLOW_SERVER}: no such workflow`, {
          tool: request.name,
          server: WORKFLOW_SERVER,
        });
      let outcome: RunOutcome;
      try {
        outcome = await (await start(workflow, request.principal, 'mcp', request.arguments ?? {}, request.runId)).outcome;
      } catch (error) {
        if (error instanceof PunkError && (error.code === 'WorkflowNotReady' || error.code === 'InvalidArguments'))
          return { content: [{ type: 'text', text: error.message }], isError: true };
        throw error;
      }
      if (outcome.state === 'failed')
        return {
          content: [{ type: 'text', text: `workflow ${workflow.metadata.name} failed (run ${request.runId}): ${outcome.error.message}` }],
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
                : { runId, state: 'failed', error: waited.error };
          return reply;
        }
      }
    },
  };
}
