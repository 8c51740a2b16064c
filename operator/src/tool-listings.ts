/**
 * The tools of each McpServer as the gateway last listed them to this operator (`servers.tools`), with their
 * `inputSchema`: the McpServer reconciler records each listing, the McpWorkflow reconciler checks the workflows'
 * arguments against it. An McpServer's status keeps only the tools' names and levels (a status the size of every
 * schema would be too large for the object), so the schemas live here, in memory, for as long as this process
 * leads; a new leader lists every server again at its first resync. A listing that changes (or goes) calls
 * `onChange`, so the workflows using the server are reconciled again.
 */
import { isDeepStrictEqual } from 'node:util';
import type { CatalogTool } from '@punk/lib/controller';

/** Tools and schemas of the McpServers, by `namespace/name`. */
export class ToolListings {
  private readonly byServer = new Map<string, ReadonlyMap<string, CatalogTool>>();

  /** @param onChange called with the McpServer whose listing changed or was forgotten. */
  constructor(private readonly onChange: (namespace: string, name: string) => void) {}

  /** Records the tools the gateway listed for McpServer `namespace/name` (objects with `name` and `inputSchema`). */
  set(namespace: string, name: string, tools: ReadonlyArray<{ name: string; inputSchema?: unknown }>): void {
    const listing = new Map<string, CatalogTool>(
      tools.map((tool) => [tool.name, isObject(tool.inputSchema) ? { inputSchema: tool.inputSchema } : {}]),
    );
    const key = `${namespace}/${name}`;
    if (isDeepStrictEqual(this.byServer.get(key), listing)) return;
    this.byServer.set(key, listing);
    this.onChange(namespace, name);
  }

  /** Forgets McpServer `namespace/name` (it was deleted). */
  delete(namespace: string, name: string): void {
    if (this.byServer.delete(`${namespace}/${name}`)) this.onChange(namespace, name);
  }

  /** The tools of McpServer `namespace/name` by name, or undefined when this process has not listed them. */
  get(namespace: string, name: string): ReadonlyMap<string, CatalogTool> | undefined {
    return this.byServer.get(`${namespace}/${name}`);
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
