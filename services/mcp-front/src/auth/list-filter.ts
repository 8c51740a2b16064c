/**
 * What a principal's lists show: the tools, prompts and resources policy would let it use. The tenant's compiled
 * McpPolicy objects (watched from bucket `PUNK_MCP_POLICIES`, as the gateway watches them to decide calls) are
 * evaluated in process for every item, with the level the manifest declares, by the same function the gateway's
 * decision uses (`filterDecisions` in @punk/lib): items denied are left out, so a client never sees a tool it may
 * not call (calling it anyway is refused by the gateway). Tools needing an approval stay listed (the call asks for
 * it), their description saying so. Rate limits count calls, not lists, so no list needs governance.
 */
import { filterDecisions, type GovernanceCheck, type Principal, type TenantPolicies } from '@punk/lib';
import type { CatalogView, PromptRoute, ToolRoute } from '../aggregate.js';

type Use = Pick<GovernanceCheck, 'server' | 'kind' | 'target' | 'declaredLevel'>;
/** A listed resource and the server that owns it. */
type ResourceEntry = CatalogView['resources'] extends Map<string, infer V> ? V : never;

/** What a tool's description ends with when every use of it by the caller needs an approval. */
export const APPROVAL_NOTE = 'Each call of this tool needs an approval (docs/governance.md "Approvals").';

/** The items `principal` may use, in their order; `needsApproval` rewrites those whose decision is `approval_required`. */
function permitted<T>(
  policies: TenantPolicies,
  tenant: string,
  principal: Principal,
  items: T[],
  useOf: (item: T) => Use,
  needsApproval: (item: T) => T = (item) => item,
): T[] {
  if (items.length === 0) return items;
  const decisions = filterDecisions({ principal, items: items.map(useOf) }, policies.of(tenant));
  return items.flatMap((item, i) => (decisions[i] === 'deny' ? [] : decisions[i] === 'approval_required' ? [needsApproval(item)] : [item]));
}

/** The (exposed name, route) pairs of the tools `principal` may call, in the view's order. */
export function permittedTools(
  policies: TenantPolicies,
  tenant: string,
  principal: Principal,
  view: CatalogView,
): Array<[string, ToolRoute]> {
  const declared = new Map(view.servers.map((s) => [s.name, s.sideEffectLevels]));
  return permitted(
    policies,
    tenant,
    principal,
    [...view.tools.entries()],
    ([, route]) => {
      const level = declared.get(route.server)?.[route.name];
      return { kind: 'tool', server: route.server, target: route.name, ...(level !== undefined && { declaredLevel: level }) };
    },
    ([name, route]) => {
      const description =
        typeof route.tool.description === 'string' && route.tool.description !== '' ? `${route.tool.description}\n\n` : '';
      return [name, { ...route, tool: { ...route.tool, description: `${description}${APPROVAL_NOTE}` } }];
    },
  );
}

/** The (exposed name, route) pairs of the prompts `principal` may get, in the view's order. */
export function permittedPrompts(
  policies: TenantPolicies,
  tenant: string,
  principal: Principal,
  view: CatalogView,
): Array<[string, PromptRoute]> {
  return permitted(policies, tenant, principal, [...view.prompts.entries()], ([, route]) => ({
    kind: 'prompt',
    server: route.server,
    target: route.name,
  }));
}

/** The (URI, listing) pairs of the resources `principal` may read, in the view's order. */
export function permittedResources(
  policies: TenantPolicies,
  tenant: string,
  principal: Principal,
  view: CatalogView,
): Array<[string, ResourceEntry]> {
  return permitted(policies, tenant, principal, [...view.resources.entries()], ([uri, { server }]) => ({
    kind: 'resource',
    server,
    target: uri,
  }));
}
