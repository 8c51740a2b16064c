/**
 * The McpPolicy custom resource (group `mcp.punk.dev`, version `v1alpha1`): ordered governance rules and
 * rate limits for the tenant of its namespace. Governance evaluates every McpPolicy of a tenant by
 * ascending `spec.priority` (then name), each policy's rules in order, first match wins; then the
 * built-in default rules (levels 0-3 allowed, level 4 approval_required).
 */
import { z } from 'zod';
import { conditionSchema, customResourceSchema, dnsLabel, durationSchema } from './mcpserver.js';

const level = z.number().int().min(0).max(4);

/** What a rule or rate limit matches; an absent field matches everything. */
const policyMatchShape = {
  principals: z.array(z.string().min(1)).optional().describe('Principal subjects (user or client ids); any when absent.'),
  groups: z.array(z.string().min(1)).optional().describe('Principal groups: matches a principal in any of them; any when absent.'),
  servers: z.array(dnsLabel).optional().describe('McpServer names of this namespace; any when absent.'),
  tools: z.array(z.string().min(1)).optional().describe('Tool names (resource URIs, prompt names); any when absent.'),
};

/** Who decides the uses a rule makes `approval_required`, and how long a request lives and a call waits. */
const approvalSchema = z
  .object({
    approvers: z
      .object({
        subjects: z.array(z.string().min(1)).optional().describe('Principal subjects that may approve or deny.'),
        groups: z.array(z.string().min(1)).optional().describe('Principal groups whose members may approve or deny.'),
      })
      .strict()
      .optional()
      .describe('Who may decide; when absent (or both lists empty), holders of the admin scope.'),
    timeout: durationSchema
      .default('15m')
      .describe('How long a request stays open, and an approval stays usable, before it expires (default 15m).'),
    wait: durationSchema
      .default('0s')
      .describe(
        "How long an interactive call waits for a decision made elsewhere before it fails closed (default 0s: at once); the wait ends 6s before the call's deadline.",
      ),
    allowSelf: z.boolean().default(false).describe('Whether the caller may approve its own call (an admin in Claude Code); default false.'),
  })
  .strict();

const policyRuleSchema = z
  .object({
    name: dnsLabel.describe('Name of the rule, reported in every decision it takes as <policy>/<rule>.'),
    ...policyMatchShape,
    sideEffectLevels: z
      .object({ min: level.optional().describe('Inclusive lower bound.'), max: level.optional().describe('Inclusive upper bound.') })
      .strict()
      .optional()
      .describe(
        'Side-effect levels matched (0 none, 1 read, 2 reversible write, 3 write or send, 4 destructive or payment); all when absent.',
      ),
    decision: z.enum(['allow', 'deny', 'approval_required']).describe('What happens to a use the rule matches.'),
    reason: z.string().max(1024).optional().describe('A sentence for people, reported with the decision.'),
    approval: approvalSchema
      .optional()
      .describe('For decision approval_required: who decides, the expiry and the wait (defaults: admins, 15m, 0s).'),
  })
  .strict()
  .refine((r) => r.approval === undefined || r.decision === 'approval_required', {
    path: ['approval'],
    message: 'only a rule with decision approval_required takes an approval',
  })
  .refine(
    (r) =>
      r.sideEffectLevels?.min === undefined || r.sideEffectLevels.max === undefined || r.sideEffectLevels.min <= r.sideEffectLevels.max,
    {
      path: ['sideEffectLevels'],
      message: 'min must not be greater than max',
    },
  );

const rateLimitSchema = z
  .object({
    name: dnsLabel.describe('Name of the limit, reported when it refuses a use.'),
    ...policyMatchShape,
    requests: z.number().int().min(1).describe('Most uses allowed per window, per principal.'),
    per: durationSchema.describe('Length of the window.'),
  })
  .strict();

/** The `spec` of an McpPolicy. */
export const mcpPolicySpecSchema = z
  .object({
    priority: z.number().int().min(0).max(1000).default(100).describe("Order among the tenant's policies: lower first; ties by name."),
    rules: z.array(policyRuleSchema).default([]).describe('Ordered rules: the first that matches decides.'),
    rateLimits: z.array(rateLimitSchema).default([]).describe('Rate limits per principal; a use over any limit that matches it is denied.'),
  })
  .strict()
  .superRefine((spec, ctx) => {
    for (const [list, items] of [
      ['rules', spec.rules],
      ['rateLimits', spec.rateLimits],
    ] as const) {
      const seen = new Set<string>();
      items.forEach((item, i) => {
        if (seen.has(item.name)) ctx.addIssue({ code: 'custom', path: [list, i, 'name'], message: `duplicate name ${item.name}` });
        seen.add(item.name);
      });
    }
  });
export type McpPolicySpec = z.infer<typeof mcpPolicySpecSchema>;

/** The `status` of an McpPolicy, written by the operator. */
export const mcpPolicyStatusSchema = z
  .object({
    observedGeneration: z.number().int().min(0).optional().describe('metadata.generation of the spec this status was computed from.'),
    conditions: z
      .array(conditionSchema)
      .optional()
      .describe('Conditions Ready (the policy is published to bucket PUNK_MCP_POLICIES for governance) and Degraded.'),
    ruleCount: z.number().int().min(0).optional().describe('Number of rules published.'),
  })
  .strict();
export type McpPolicyStatus = z.infer<typeof mcpPolicyStatusSchema>;

/** A whole McpPolicy object. */
export const mcpPolicySchema = customResourceSchema('McpPolicy', mcpPolicySpecSchema);
export type McpPolicy = z.infer<typeof mcpPolicySchema>;
