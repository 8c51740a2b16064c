/**
 * The McpWorkflow custom resource (group `mcp.punk.dev`, version `v1alpha1`): a graph of nodes (`tool_call`,
 * `branch`, `approval`, `output`) over the expression IR of `expressions.ts`, started at `spec.start`. The graph checks
 * (unknown ids, cycles, unreachable nodes) are `validateWorkflowGraph` in `workflow-graph.ts`; the checks against
 * the tenant's tool catalog are `validateWorkflowCatalog` there.
 *
 * A Kubernetes structural schema has no unions and no recursion, so expressions and node configs are declared to
 * the CRD as free-form objects (`x-kubernetes-preserve-unknown-fields`) and checked by zod here, field by field.
 */
import { z } from 'zod';
import { conditionSchema, customResourceSchema, dnsLabel } from './mcpserver.js';
import { expressionSchema, type Expression } from './expressions.js';

/** Most nodes a workflow declares (a bound the CRD needs to keep its CEL rules within the API server's cost budget). */
export const MAX_WORKFLOW_NODES = 200;

/** A node id: a DNS-1035 label, so it reads well in errors and ledger events. */
const nodeId = dnsLabel.describe('Id of a node, unique in the workflow: lower-case letters, digits and -.');

/** An expression in the CRD: a free-form object, checked by {@link expressionSchema}. */
const expressionField = z
  .record(z.string(), z.unknown())
  .pipe(expressionSchema as z.ZodType<Expression, Record<string, unknown>>)
  .describe('An expression of the IR: {kind: literal|template|ref|object|eq|ne|lt|le|gt|ge|and|or|not|exists, ...}.');

/** Config of a `tool_call` node: the tool of an McpServer of the namespace, its arguments and where the result goes. */
export const toolCallConfigSchema = z
  .object({
    server: dnsLabel.describe('Name of the McpServer (of the same namespace) serving the tool.'),
    tool: z.string().min(1).max(128).describe("The tool's name on that server, as the server names it."),
    args: z.record(z.string(), expressionField).default({}).describe('Argument name to expression.'),
    saveAs: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an identifier: letters, digits and _, not starting with a digit')
      .optional()
      .describe("Key of vars the result is saved under (structured content, else JSON-parsed text, else the text); default the node's id."),
  })
  .strict();
export type ToolCallConfig = z.infer<typeof toolCallConfigSchema>;

/** Config of a `branch` node: cases tried in order, the first whose `when` is true decides; else the node's `next`. */
export const branchConfigSchema = z
  .object({
    cases: z
      .array(
        z
          .object({
            when: expressionSchema.describe('A condition: the case is taken when it evaluates to true.'),
            next: nodeId.describe('Node run when the condition is true.'),
          })
          .strict(),
      )
      .min(1)
      .describe('Conditions tried in order.'),
  })
  .strict();
export type BranchConfig = z.infer<typeof branchConfigSchema>;

/** Config of an `output` node: the expression whose value is the run's result; the run ends there. */
export const outputConfigSchema = z.object({ value: expressionSchema.describe("The run's result.") }).strict();
export type OutputConfig = z.infer<typeof outputConfigSchema>;

/**
 * Config of an `approval` node: the run asks for a human approval through the approvals API (docs/governance.md);
 * unattended, it fails closed there unless the approval is already granted.
 */
export const approvalConfigSchema = z
  .object({ message: z.string().max(1024).optional().describe('What the approver is asked; default: approve the run of the workflow.') })
  .strict();
export type ApprovalConfig = z.infer<typeof approvalConfigSchema>;

/** Kinds of nodes. */
export const workflowNodeKindSchema = z.enum(['tool_call', 'branch', 'approval', 'output']);
export type WorkflowNodeKind = z.infer<typeof workflowNodeKindSchema>;

const configSchemas = {
  tool_call: toolCallConfigSchema,
  branch: branchConfigSchema,
  approval: approvalConfigSchema,
  output: outputConfigSchema,
} as const;

/** A node as parsed: its config checked against the schema of its kind. */
export type WorkflowNode =
  | { id: string; kind: 'tool_call'; next?: string; config: ToolCallConfig }
  | { id: string; kind: 'branch'; next?: string; config: BranchConfig }
  | { id: string; kind: 'approval'; next?: string; config: ApprovalConfig }
  | { id: string; kind: 'output'; next?: undefined; config: OutputConfig };

const nodeSchema = z
  .object({
    id: nodeId,
    kind: workflowNodeKindSchema.describe(
      'tool_call (call a tool), branch (choose the next node), approval (a human approval) or output (end with a result).',
    ),
    next: nodeId.optional().describe('Node run after this one (for a branch: when no case matches); the run ends when absent.'),
    config: z
      .record(z.string(), z.unknown())
      .default({})
      .describe(
        'Settings of the node, by kind: tool_call {server, tool, args, saveAs}, branch {cases}, approval {message}, output {value}.',
      ),
  })
  .strict()
  .transform((node, ctx): WorkflowNode => {
    if (node.kind === 'output' && node.next !== undefined)
      ctx.addIssue({ code: 'custom', path: ['next'], message: 'an output node ends the run: remove next' });
    const parsed = configSchemas[node.kind].safeParse(node.config);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) ctx.addIssue({ ...issue, path: ['config', ...issue.path] } as z.core.$ZodRawIssue);
      return z.NEVER;
    }
    return { ...node, config: parsed.data } as WorkflowNode;
  });

/** The `spec` of an McpWorkflow. */
export const mcpWorkflowSpecSchema = z
  .object({
    description: z.string().max(4096).default('').describe('What the workflow does, shown as the description of its tool.'),
    input: z
      .record(z.string(), z.unknown())
      .default({ type: 'object' })
      .describe("JSON Schema of the workflow's arguments (type object), its tool's inputSchema."),
    start: nodeId.describe('Id of the first node.'),
    nodes: z.array(nodeSchema).min(1).max(MAX_WORKFLOW_NODES).describe('The nodes of the graph.'),
    output: expressionField
      .optional()
      .describe('Result of a run that ends on a node without next (not an output node); default: vars, the saved results.'),
  })
  .strict()
  .superRefine((spec, ctx) => {
    if (spec.input.type !== 'object')
      ctx.addIssue({
        code: 'custom',
        path: ['input', 'type'],
        message: 'the input schema must be of type object (the arguments of a tool)',
      });
  });
export type McpWorkflowSpec = z.infer<typeof mcpWorkflowSpecSchema>;

/** The `status` of an McpWorkflow, written by the operator. */
export const mcpWorkflowStatusSchema = z
  .object({
    observedGeneration: z.number().int().min(0).optional().describe('metadata.generation of the spec this status was computed from.'),
    conditions: z.array(conditionSchema).optional().describe('Condition Ready (valid against the catalog and served) and its reason.'),
  })
  .strict();
export type McpWorkflowStatus = z.infer<typeof mcpWorkflowStatusSchema>;

/** A whole McpWorkflow object. */
export const mcpWorkflowSchema = customResourceSchema('McpWorkflow', mcpWorkflowSpecSchema);
export type McpWorkflow = z.infer<typeof mcpWorkflowSchema>;
export type { Expression };
