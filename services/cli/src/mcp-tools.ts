/**
 * The platform's own tools that `punk mcp` serves (docs/punk-mcp.md): each one HTTP call or two to a deployment
 * through {@link PunkApi}, answering structured content and readable text. A refused key, a missing right or an
 * unreachable deployment is a tool error (`isError`) whose text names the scope needed or what to fix, never a crash.
 */
import { McpServer } from '@modelcontextprotocol/server';
import {
  approvalStateSchema,
  approvalViewSchema,
  runSummarySchema,
  verificationSchema,
  workflowRunReplySchema,
  workflowViewSchema,
} from '@punk/lib';
import { z } from 'zod';
import { describeVerification, explainRun } from './explain.js';
import { PunkApi, PunkApiError, type Approval } from './punk-api.js';

/** The names of the tools, in the order `--selfcheck` runs them. */
export const PLATFORM_TOOLS = [
  'punk_list_servers',
  'punk_search_tools',
  'punk_test_server',
  'punk_list_runs',
  'punk_explain_run',
  'punk_list_approvals',
  'punk_decide_approval',
  'punk_verify_ledger',
  'punk_list_workflows',
  'punk_run_workflow',
  'punk_cancel_workflow_run',
] as const;

type ToolResult = { content: Array<{ type: 'text'; text: string }>; structuredContent?: Record<string, unknown>; isError?: boolean };

/** A tool answer: `structured` as data, `text` for people. */
const answer = (structured: Record<string, unknown>, text: string): ToolResult => ({
  content: [{ type: 'text', text }],
  structuredContent: structured,
});

/** Runs `work`, turning a {@link PunkApiError} into a tool error with its message (which names the scope or the fix). */
async function guarded(work: () => Promise<ToolResult>): Promise<ToolResult> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof PunkApiError) return { content: [{ type: 'text', text: error.message }], isError: true };
    throw error;
  }
}

const serverSchema = z.object({
  name: z.string(),
  state: z.string().describe('`starting`, `ready`, `idle`, `failed`, `stopped`.'),
  toolCount: z.number().int(),
  lastError: z.string().optional(),
  managed: z.boolean(),
  type: z.string().optional(),
});
/** A run as the tools show it: the ledger's `RunSummary` without the tenant (the key's own). */
const runSchema = runSummarySchema.omit({ tenant: true });
const approvalSchema = z.object({
  id: z.string(),
  state: approvalStateSchema,
  server: z.string(),
  tool: z.string(),
  subject: z.string().describe('Who made the call.'),
  rule: z.string(),
  runId: z.string(),
  createdAt: z.string(),
  expiresAt: z.string(),
  decidedBy: z.string().optional(),
  reason: z.string().optional(),
  mayDecide: approvalViewSchema.shape.mayDecide,
  decideRefusal: approvalViewSchema.shape.decideRefusal,
});
/** What `punk_verify_ledger` answers: the API's verification without its sweep and chain-position details. */
const verifiedSchema = verificationSchema.pick({ ok: true, tenant: true, events: true, head: true, complete: true, checked: true });
/** An approval request as the tools show it (`approvalSchema`). */
function approvalView(a: Approval): z.infer<typeof approvalSchema> {
  return {
    id: a.id,
    state: a.state,
    server: a.server,
    tool: a.tool,
    subject: a.principal.subject,
    rule: a.rule,
    runId: a.runId,
    createdAt: a.createdAt,
    expiresAt: a.expiresAt,
    ...(a.decidedBy !== undefined && { decidedBy: a.decidedBy }),
    ...(a.reason !== undefined && { reason: a.reason }),
    mayDecide: a.mayDecide,
    ...(a.decideRefusal !== undefined && { decideRefusal: a.decideRefusal }),
  };
}

const eventSchema = z.object({
  seq: z.number().int().optional(),
  type: z.string(),
  at: z.string(),
  afterMs: z.number(),
  server: z.string().optional(),
  tool: z.string().optional(),
  subject: z.string().optional(),
  decision: z.string().optional(),
  rule: z.string().optional(),
  reason: z.string().optional(),
  approvalId: z.string().optional(),
  error: z.string().optional(),
  durationMs: z.number().optional(),
});

const read = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;

/** Words of `text`, lower case, for the tool search. */
const words = (text: string): string[] =>
  text
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);

/** An McpServer named `punk` with the platform's tools over `api`. */
export function platformServer(api: PunkApi, version: string): McpServer {
  const server = new McpServer({ name: 'punk', version }, { instructions: instructionsText });

  server.registerTool(
    'punk_list_servers',
    {
      title: 'List MCP servers',
      description: "The deployment's MCP servers with their state, tool count and last error.",
      inputSchema: z.object({}),
      outputSchema: z.object({ servers: z.array(serverSchema) }),
      annotations: read,
    },
    () =>
      guarded(async () => {
        const servers = (await api.servers()).map((s) => ({
          name: s.name,
          state: s.state,
          toolCount: s.toolCount,
          managed: s.managed,
          ...(s.lastError !== undefined && { lastError: s.lastError }),
          ...(s.type !== undefined && { type: s.type }),
        }));
        const lines = servers.map(
          (s) => `${s.name}: ${s.state}, ${String(s.toolCount)} tool(s)${s.lastError ? `; last error: ${s.lastError}` : ''}`,
        );
        return answer({ servers }, servers.length === 0 ? 'No servers.' : lines.join('\n'));
      }),
  );

  server.registerTool(
    'punk_search_tools',
    {
      title: 'Search tools',
      description:
        "Finds tools among every tool of the deployment's /mcp endpoint by words in their names and descriptions (best match first); call them there by the name given (<server>__<tool>).",
      inputSchema: z.object({
        query: z.string().min(1).describe('Words to look for, e.g. "read file" or "github issue".'),
        limit: z.number().int().min(1).max(100).default(20).describe('Most results (default 20).'),
      }),
      outputSchema: z.object({
        total: z.number().int().describe('Tools the deployment serves to this key.'),
        matches: z.array(z.object({ name: z.string(), description: z.string().optional(), score: z.number() })),
      }),
      annotations: read,
    },
    ({ query, limit }) =>
      guarded(async () => {
        const tools = await api.deploymentTools();
        const wanted = words(query);
        const matches = tools
          .map((tool) => {
            const name = words(tool.name);
            const rest = words(`${tool.title ?? ''} ${tool.description ?? ''}`);
            // A word in the name counts three times one in the description; partial words count too.
            const score = wanted.reduce(
              (sum, word) => sum + (name.some((w) => w.includes(word)) ? 3 : 0) + (rest.some((w) => w.includes(word)) ? 1 : 0),
              0,
            );
            return { name: tool.name, ...(tool.description !== undefined && { description: tool.description }), score };
          })
          .filter((m) => m.score > 0)
          .sort((a, b) => b.score - a.score || a.name.localeCompare(b.name))
          .slice(0, limit);
        const text =
          matches.length === 0
            ? `No tool of the ${String(tools.length)} matches "${query}".`
            : matches.map((m) => `${m.name}: ${m.description ?? ''}`).join('\n');
        return answer({ total: tools.length, matches }, text);
      }),
  );

  server.registerTool(
    'punk_test_server',
    {
      title: 'Test an MCP server',
      description: 'Connects to one server of the deployment (its credentials resolved) and lists its tools; records the outcome on it.',
      inputSchema: z.object({ name: z.string().min(1).describe('The server name, as punk_list_servers gives it.') }),
      outputSchema: z.object({
        ok: z.boolean(),
        toolCount: z.number().int(),
        latencyMs: z.number(),
        tools: z.array(z.string()),
        error: z.string().optional(),
      }),
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    ({ name }) =>
      guarded(async () => {
        const result = await api.testServer(name);
        const structured = {
          ok: result.ok,
          toolCount: result.toolCount,
          latencyMs: result.latencyMs,
          tools: result.tools.map((t) => t.name),
          ...(result.error !== undefined && { error: result.error }),
        };
        const text = result.ok
          ? `${name} answers: ${String(result.toolCount)} tool(s) in ${String(Math.round(result.latencyMs))} ms (${structured.tools.join(', ')}).`
          : `${name} failed its test: ${result.error ?? 'unknown error'}.`;
        return answer(structured, text);
      }),
  );

  server.registerTool(
    'punk_list_runs',
    {
      title: 'List runs',
      description:
        "The ledger's runs (one tool call, read, observed prompt or a server's lifecycle each), most recently active first, filtered by server, tool, subject, event type, outcome, trigger and time; for the next page, pass the answer's nextCursor as `cursor` (with the same filters).",
      inputSchema: z.object({
        limit: z.number().int().min(1).max(500).default(20).describe('Runs to list (default 20).'),
        cursor: z.string().describe("The next page: a previous answer's nextCursor (opaque).").optional(),
        before: z.string().describe('RFC 3339 time: only runs last active strictly before it.').optional(),
        server: z.string().min(1).describe('Only runs of this server.').optional(),
        tool: z.string().min(1).describe('Only runs of this tool (its name on its server, e.g. read_file).').optional(),
        subject: z.string().min(1).describe('Only runs of this caller (principal subject).').optional(),
        type: z
          .string()
          .min(1)
          .describe('Only runs holding an event of this type (tool.completed, approval.consumed, prompt.observed, …).')
          .optional(),
        outcome: z.string().min(1).describe('Only runs with this outcome (ok, error, denied, approval_required).').optional(),
        trigger: z
          .string()
          .min(1)
          .describe('Only runs started by this trigger (hook: a prompt posted by the Claude Code hook).')
          .optional(),
        since: z.string().describe('RFC 3339: only runs active at or after it.').optional(),
        until: z.string().describe('RFC 3339: only runs begun at or before it.').optional(),
      }),
      outputSchema: z.object({
        runs: z.array(runSchema),
        nextCursor: z.string().describe('The `cursor` of the next page; absent on the last page.').optional(),
      }),
      annotations: read,
    },
    (query) =>
      guarded(async () => {
        const page = await api.runs(query);
        const runs = page.runs.map(({ tenant: _tenant, ...run }) => run);
        const lines = runs.map((r) =>
          `${r.runId} ${r.lastAt} ${r.tool ? `${r.server ?? '?'}/${r.tool}` : (r.server ?? '')} ${r.outcome ?? ''} ${r.subject ?? ''}`.trimEnd(),
        );
        if (page.nextCursor !== undefined) lines.push(`More runs: cursor ${page.nextCursor}`);
        return answer(
          { runs, ...(page.nextCursor !== undefined && { nextCursor: page.nextCursor }) },
          runs.length === 0 ? 'No runs.' : lines.join('\n'),
        );
      }),
  );

  server.registerTool(
    'punk_explain_run',
    {
      title: 'Explain a run',
      description:
        'One run explained: its events in order with timings, each governance decision with its rule and reason, approvals, errors and the state of the integrity chain, as a narrative and as data.',
      inputSchema: z.object({ runId: z.string().min(1).describe('The run id, as punk_list_runs gives it.') }),
      outputSchema: z.object({
        runId: z.string(),
        server: z.string().optional(),
        tool: z.string().optional(),
        subject: z.string().optional(),
        outcome: z.string().optional(),
        startedAt: z.string(),
        endedAt: z.string(),
        durationMs: z.number(),
        events: z.array(eventSchema),
        decisions: z.array(z.object({ decision: z.string(), rule: z.string().optional(), reason: z.string().optional() })),
        approvals: z.array(z.string()),
        errors: z.array(z.string()),
        chain: z.object({ ok: z.boolean(), verifiedEvents: z.number().int(), complete: z.boolean().optional() }),
        narrative: z.string(),
      }),
      annotations: read,
    },
    ({ runId }) =>
      guarded(async () => {
        const [detail, chain] = await Promise.all([api.run(runId), api.verify()]);
        const explained = explainRun(detail, chain);
        return answer({ ...explained }, explained.narrative);
      }),
  );

  server.registerTool(
    'punk_list_approvals',
    {
      title: 'List approvals',
      description: 'Approval requests of tool calls that a policy holds for a decision (pending ones by default), newest first.',
      inputSchema: z.object({
        state: approvalStateSchema.default('pending').describe('Requests in this state.'),
      }),
      outputSchema: z.object({ approvals: z.array(approvalSchema) }),
      annotations: read,
    },
    ({ state }) =>
      guarded(async () => {
        const approvals = (await api.approvals(state)).map(approvalView);
        const lines = approvals.map(
          (a) =>
            `${a.id}: ${a.server}/${a.tool} by ${a.subject} (rule ${a.rule}), ${a.state} until ${a.expiresAt}${a.mayDecide ? '; you may decide it' : a.decideRefusal ? `; ${a.decideRefusal}` : ''}`,
        );
        return answer({ approvals }, approvals.length === 0 ? `No ${state} approvals.` : lines.join('\n'));
      }),
  );

  server.registerTool(
    'punk_decide_approval',
    {
      title: 'Approve or deny',
      description:
        'Approves or denies one pending approval request, with a reason; an approved call then runs once when retried. Only keys the rule names as approvers (or admins) may decide.',
      inputSchema: z.object({
        id: z.string().min(1).describe('The approval id, as punk_list_approvals gives it.'),
        decision: z.enum(['approve', 'deny']),
        reason: z.string().max(1000).describe('Why; kept on the request and the ledger.').optional(),
      }),
      outputSchema: approvalSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    ({ id, decision, reason }) =>
      guarded(async () => {
        const a = await api.decide(id, decision, reason);
        const structured = approvalView(a);
        return answer(structured, `Approval ${a.id} of ${a.server}/${a.tool} is now ${a.state}${a.reason ? ` (${a.reason})` : ''}.`);
      }),
  );

  server.registerTool(
    'punk_verify_ledger',
    {
      title: 'Verify the ledger',
      description:
        "Verifies the tenant's hash-chained ledger (SHA-256 per event) from its first event, and says where it breaks if it does.",
      inputSchema: z.object({}),
      outputSchema: verifiedSchema,
      annotations: read,
    },
    () =>
      guarded(async () => {
        const v = await api.verify();
        return answer(verifiedSchema.parse(v), `${describeVerification(v)}.`);
      }),
  );

  server.registerTool(
    'punk_list_workflows',
    {
      title: 'List workflows',
      description:
        "The tenant's workflows (McpWorkflow): what each does, its arguments (inputSchema), its highest side-effect level, and whether it is ready to run or what keeps it from being ready.",
      inputSchema: z.object({}),
      outputSchema: z.object({ workflows: z.array(workflowViewSchema) }),
      annotations: read,
    },
    () =>
      guarded(async () => {
        const workflows = await api.workflows();
        const lines = workflows.map(
          (w) =>
            `${w.name}: ${w.ready ? 'ready' : `not ready (${w.errors.join('; ')})`}, side-effect level ${w.sideEffectLevel === null ? 'unknown' : String(w.sideEffectLevel)}${w.description ? `; ${w.description}` : ''}`,
        );
        return answer({ workflows }, workflows.length === 0 ? 'No workflows.' : lines.join('\n'));
      }),
  );

  server.registerTool(
    'punk_run_workflow',
    {
      title: 'Run a workflow',
      description:
        'Runs one ready workflow with its arguments (as punk_list_workflows describes them) and answers its result once it ended; each of its tool calls is governed and on the ledger (a run with trigger mcp). A failed run is a tool error naming the run and the node that failed.',
      inputSchema: z.object({
        name: z.string().min(1).describe('The workflow name, as punk_list_workflows gives it.'),
        arguments: z.record(z.string(), z.unknown()).default({}).describe("The run's arguments (its inputSchema)."),
      }),
      outputSchema: z.object({
        workflow: z.string(),
        state: z.enum(['completed', 'failed']),
        result: z.unknown().optional().describe('What the workflow answered (its structured result, or its text).'),
        error: z.string().optional().describe('Why the run failed: its run id, node and reason.'),
      }),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    },
    ({ name, arguments: args }, ctx) =>
      guarded(async () => {
        // The client's cancellation of this call cancels the run.
        const ran = await api.runWorkflow(name, args, ctx.mcpReq.signal);
        const text = (ran.content as Array<{ type: string; text?: string }>).map((c) => c.text ?? '').join('\n');
        if (ran.isError === true) {
          const structured = { workflow: name, state: 'failed' as const, error: text };
          return { ...answer(structured, text), isError: true };
        }
        const result = ran.structuredContent ?? text;
        return answer({ workflow: name, state: 'completed' as const, result }, `Workflow ${name} completed: ${text}`);
      }),
  );

  server.registerTool(
    'punk_cancel_workflow_run',
    {
      title: 'Cancel a workflow run',
      description:
        'Cancels a running workflow run (its id from punk_list_runs or a run answer): it stops before its next node and the node in flight is cancelled, its tool call too; the run ends as cancelled on the ledger (workflow.cancelled). A run that already ended is a tool error naming its state.',
      inputSchema: z.object({
        name: z.string().min(1).describe('The workflow name, as punk_list_workflows gives it.'),
        runId: z.string().min(1).describe('The run id.'),
      }),
      outputSchema: workflowRunReplySchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    ({ name, runId }) =>
      guarded(async () => {
        const reply = await api.cancelWorkflowRun(name, runId);
        return answer(
          reply,
          reply.state === 'cancelled'
            ? `Run ${runId} of workflow ${name} is cancelled.`
            : `Run ${runId} of workflow ${name} is still stopping; its end will be on the ledger (punk_explain_run).`,
        );
      }),
  );

  return server;
}

const instructionsText =
  "Punk's platform tools: its MCP servers, a search over every tool it serves, the runs on its ledger and their explanation, approvals, ledger verification, and the workflows with a way to run one. Tool errors name the scope a key lacks.";
