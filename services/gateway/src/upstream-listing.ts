/**
 * The listings of one upstream connection (tools, resources, resource templates, prompts) and its resource
 * subscriptions, in either protocol era.
 */
import type { Client } from '@modelcontextprotocol/client';
import { errorMessage, type Logger } from '@punk/lib';
import type { Listings, McpItem } from './catalog.js';

/** How {@link listServer} lists. */
export interface ListingOptions {
  /** `<namespace>/<name>` of the server, for the log. */
  key: string;
  log: Logger;
  /** Deadline of each list request, in milliseconds. */
  timeoutMs: number;
  /** `text` with the connection's secret values hidden. */
  hide: (text: string) => string;
  /** Reviews the tools listing before it is served (UpstreamOptions.reviewTools); what it returns is kept. */
  review: (tools: McpItem[]) => Promise<McpItem[]>;
}

/** Lists every page of every capability the server advertises; a failed list is logged and left empty. */
export async function listServer(client: Client, options: ListingOptions): Promise<Listings> {
  const caps = client.getServerCapabilities() ?? {};
  const timeout = options.timeoutMs;
  const attempt = async <T>(what: string, enabled: boolean, run: () => Promise<T[]>): Promise<McpItem[]> => {
    if (!enabled) return [];
    try {
      return (await run()) as McpItem[];
    } catch (error) {
      options.log.warn({ server: options.key, err: options.hide(errorMessage(error)) }, `listing ${what} failed`);
      return [];
    }
  };
  const [listedTools, resources, resourceTemplates, prompts] = await Promise.all([
    attempt('tools', !!caps.tools, async () => (await client.listTools(undefined, { timeout, cacheMode: 'refresh' })).tools),
    attempt(
      'resources',
      !!caps.resources,
      async () => (await client.listResources(undefined, { timeout, cacheMode: 'refresh' })).resources,
    ),
    attempt(
      'resource templates',
      !!caps.resources,
      async () => (await client.listResourceTemplates(undefined, { timeout, cacheMode: 'refresh' })).resourceTemplates,
    ),
    attempt('prompts', !!caps.prompts, async () => (await client.listPrompts(undefined, { timeout, cacheMode: 'refresh' })).prompts),
  ]);
  const tools = caps.tools ? await options.review(listedTools) : listedTools;
  return { tools, resources, resourceTemplates, prompts };
}

/**
 * Subscribes `client` to updates of `uri`: `resources/subscribe` on a 2025-era connection (MCP 2025-11-25
 * server/resources "Subscriptions"); on a 2026-07-28 connection, which has no such method, a
 * `subscriptions/listen` stream filtered to that URI (MCP 2026-07-28 basic/utilities/subscriptions), open for the
 * connection's lifetime. Either way `notifications/resources/updated` reaches the client's handler.
 * @throws what the SDK throws when the upstream refuses or does not answer within `timeoutMs`.
 */
export async function subscribeOn(client: Client, uri: string, timeoutMs: number): Promise<void> {
  if (client.getProtocolEra() === 'modern') await client.listen({ resourceSubscriptions: [uri] }, { timeout: timeoutMs });
  else await client.subscribeResource({ uri }, { timeout: timeoutMs });
}
