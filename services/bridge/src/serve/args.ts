/** The command line of `punk-bridge serve` as the operator writes it into a server pod's container. */

/** The port the bridge listens on in a server pod. */
export const BRIDGE_PORT = 8080;
/** The path of the bridge's MCP endpoint. */
export const BRIDGE_PATH = '/mcp';

/** Options of `punk-bridge serve`; each absent one is the bridge's default. */
export interface ServeOptions {
  /** `--port`, default {@link BRIDGE_PORT}. */
  port?: number;
  /** `--path`, default {@link BRIDGE_PATH}. */
  path?: string;
  /** `--max-sessions` (the bridge's default 16 when absent). */
  maxSessions?: number;
  /** `--session-idle-timeout`, a duration such as `10m` (default 10m when absent). */
  sessionIdleTimeout?: string;
}

/**
 * The arguments after the bridge binary up to the stdio server's command: `['serve', '--port', '8080', '--path',
 * '/mcp', ...limits, '--']`. For a container whose `command` ends here and whose `args` are the server's.
 */
export function serveFlags(options: ServeOptions = {}): string[] {
  return [
    'serve',
    '--port',
    String(options.port ?? BRIDGE_PORT),
    '--path',
    options.path ?? BRIDGE_PATH,
    ...(options.maxSessions !== undefined ? ['--max-sessions', String(options.maxSessions)] : []),
    ...(options.sessionIdleTimeout !== undefined ? ['--session-idle-timeout', options.sessionIdleTimeout] : []),
    '--',
  ];
}

/**
 * The arguments after the bridge binary that serve `command` (the stdio MCP server and its arguments):
 * {@link serveFlags} followed by `command`.
 * @throws Error when `command` is empty (there is nothing to serve).
 */
export function serveArgs(command: readonly string[], options: ServeOptions = {}): string[] {
  if (command.length === 0) throw new Error('serveArgs: command is empty: name the stdio MCP server to run');
  return [...serveFlags(options), ...command];
}
