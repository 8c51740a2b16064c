/** Real MCP clients of both protocol eras, connected to a running Punk. */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

/** The protocol eras a test client can speak. */
export type Era = '2025-11-25' | '2026-07-28';

/**
 * Connects the SDK's `Client` over Streamable HTTP: the default 2025
 * `initialize` handshake for `2025-11-25`, or pinned to `2026-07-28`
 * (stateless, `server/discover`). `headers` go on every request (`Authorization: Bearer …`).
 */
export async function connectClient(url: string, era: Era, headers?: Record<string, string>): Promise<Client> {
  const client =
    era === '2026-07-28'
      ? new Client({ name: 'punk-e2e', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } })
      : new Client({ name: 'punk-e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), headers ? { requestInit: { headers } } : {}));
  return client;
}

/** Lists every tool across all pages. */
export async function listAllTools(client: Client): Promise<Array<{ name: string; inputSchema?: unknown }>> {
  const tools: Array<{ name: string }> = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}

/** The text parts of a tool result, joined. */
export function textOf(result: { content?: unknown }): string {
  const content = (result.content ?? []) as Array<{ type: string; text?: string }>;
  return content
    .filter((part) => part.type === 'text')
    .map((part) => part.text ?? '')
    .join('\n');
}
