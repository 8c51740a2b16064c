/** The command line of `punk-bridge serve` as the operator writes it into a server pod's container. */

/** The port the bridge listens on in a server pod. */
export const BRIDGE_PORT = 8080;
/** The path of the bridge's MCP endpoint. */
export const BRIDGE_PATH = '/mcp';

/**
 * The arguments after the bridge binary that serve `command` (the stdio MCP server and its arguments):
 * `['serve', '--port', '8080', '--path', '/mcp', ...limits, '--', ...command]`.
 * @param options.maxSessions - `--max-sessions` (the bridge's default 16 when absent)
 * @param options.sessionIdleTimeout - `--session-idle-timeout`, a duration such as `10m` (default 10m when absent)
 * @throws Error when `command` is empty (there is nothing to serve).
 */
export function serveArgs(command: readonly string[], options: { port?: number; path?: string; maxSessions?: number; sessionIdleTimeout?: string } = {}): string[] {
  if (command.length === 0) throw new Error('serveArgs: command is empty: name the stdio MCP server to run');
  return [
    'serve',
    '--port',
    String(options.port ?? BRIDGE_PORT),
    '--path',
    options.path ?? BRIDGE_PATH,
    ...(options.maxSessions !== undefined ? ['--max-sessions', String(options.maxSessions)] : []),
    ...(options.sessionIdleTimeout !== undefined ? ['--session-idle-timeout', options.sessionIdleTimeout] : []),
    '--',
    ...command,
  ];
}
