/**
 * What a principal's lists show: the tools, prompts and resources governance would let it use. One
 * `punk.governance.filter` request per list evaluates the tenant's policy for every item (with the level
 * the manifest declares, as the gateway's check does); items denied are left out, so a client never sees a
 * tool it may not call (calling it anyway is refused by the gateway's own check). Items needing an approval
 * stay listed: the call asks for it.
 */
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { errorMessage, requestFilter, type Bus, type GovernanceFilter, type Principal } from '@punk/lib';
import type { CatalogView, PromptRoute, ToolRoute } from '../aggregate.js';

type Use = GovernanceFilter['items'][number];
/** A listed resource and the server that owns it. */
type ResourceEntry = CatalogView['resources'] extends Map<string, infer V> ? V : never;

/**
 * The items `principal` may use, in their order.
 * @throws ProtocolError -32603 naming `method` when governance cannot be asked (fail closed).
 */
async function permitted<T>(
  bus: Bus,
  tenant: string,
  principal: Principal,
  method: string,
  items: T[],
  useOf: (item: T) => Use,
): Promise<T[]> {
  if (items.length === 0) return items;
  let decisions;
  try {
    ({ decisions } = await requestFilter(bus, { tenant, principal, items: items.map(useOf) }));
  } catch (error) {
    throw new ProtocolError(
      ProtocolErrorCode.InternalError,
      `${method}: governance could not say what ${principal.subject} may use: ${errorMessage(error)}`,
    );
  }
  return items.filter((_, i) => decisions[i] !== 'deny');
}

/** The (exposed name, route) pairs of the tools `principal` may call, in the view's order. */
export function permittedTools(bus: Bus, tenant: string, principal: Principal, view: CatalogView): Promise<Array<[string, ToolRoute]>> {
  const declared = new Map(view.servers.map((s) => [s.name, s.sideEffectLevels]));
  return permitted(bus, tenant, principal, 'tools/list', [...view.tools.entries()], ([, route]) => {
    const level = declared.get(route.server)?.[route.name];
    return { kind: 'tool', server: route.server, target: route.name, ...(level !== undefined && { declaredLevel: level }) };
  });
}

/** The (exposed name, route) pairs of the prompts `principal` may get, in the view's order. */
export function permittedPrompts(bus: Bus, tenant: string, principal: Principal, view: CatalogView): Promise<Array<[string, PromptRoute]>> {
  return permitted(bus, tenant, principal, 'prompts/list', [...view.prompts.entries()], ([, route]) => ({
    kind: 'prompt',
    server: route.server,
    target: route.name,
  }));
}

/** The (URI, listing) pairs of the resources `principal` may read, in the view's order. */
export function permittedResources(
  bus: Bus,
  tenant: string,
  principal: Principal,
  view: CatalogView,
): Promise<Array<[string, ResourceEntry]>> {
  return permitted(bus, tenant, principal, 'resources/list', [...view.resources.entries()], ([uri, { server }]) => ({
    kind: 'resource',
    server,
    target: uri,
  }));
}
