/**
 * The command line of `punk-bridge`: its two commands (`serve`, `egress-proxy`), their flags, and the usage
 * error that names the flag that was wrong. Parsing is strict: an unknown flag, a missing value or a value of
 * the wrong shape is a {@link UsageError}, which `main` prints with the usage text and exits 2 on.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { EGRESS_PROXY_PORT, parseEgressRule, type EgressRule } from './egress/rules.js';
import { BRIDGE_PATH, BRIDGE_PORT } from './serve/args.js';

/** A bad command line: `message` names the flag (or argument) and what was wrong with it. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The usage text printed with `--help` and after a {@link UsageError}. */
export const USAGE = `Usage:
  punk-bridge serve [flags] -- <command> [args...]
      Serves the stdio MCP server <command> over MCP Streamable HTTP, one child process per session.
        --host HOST                    listen address (default 0.0.0.0)
        --port PORT                    listen port (default 8080; 0 picks a free one)
        --path PATH                    path of the MCP endpoint (default /mcp)
        --max-sessions N               most sessions (child processes) at once (default 16)
        --session-idle-timeout DUR     close a session and its child after this long without traffic (default 10m)
  punk-bridge egress-proxy [flags]
      An HTTP forward proxy (CONNECT and absolute-form requests) that lets through only the allowed destinations.
        --host HOST                    listen address (default 0.0.0.0)
        --port PORT                    listen port (default 3128; 0 picks a free one)
        --allow RULE                   an allowed destination, repeatable: host[:port[,port...]] (exact name,
                                       *.example.com for its subdomains, an IP, [v6]) or cidr[:port[,port...]]
        --idle-timeout DUR             close a tunnel or connection idle for this long (default 5m)
        --connect-timeout DUR          give up connecting to a destination after this long (default 10s)
        --max-connections N            most client connections at once; more are answered 503 (default 512)
  DUR is a whole number followed by ms, s, m or h (500ms, 30s, 10m, 1h).
`;

/** Options of `punk-bridge serve`. */
export interface ServeFlags {
  host: string;
  port: number;
  /** Path of the MCP endpoint, starting with `/`. */
  path: string;
  maxSessions: number;
  /** In milliseconds. */
  sessionIdleTimeoutMs: number;
  /** The stdio MCP server: executable and arguments (everything after `--`). */
  command: string;
  args: string[];
}

/** Options of `punk-bridge egress-proxy`. */
export interface EgressProxyFlags {
  host: string;
  port: number;
  rules: EgressRule[];
  /** In milliseconds. */
  idleTimeoutMs: number;
  /** In milliseconds. */
  connectTimeoutMs: number;
  maxConnections: number;
}

/** What the command line asks for. */
export type Command = { kind: 'help' } | ({ kind: 'serve' } & ServeFlags) | ({ kind: 'egress-proxy' } & EgressProxyFlags);

/** Converts a duration (`500ms`, `30s`, `10m`, `1h`) to milliseconds, or undefined when it is not one. */
export function parseDuration(value: string): number | undefined {
  const match = /^(\d+)(ms|s|m|h)$/.exec(value);
  if (!match) return undefined;
  return Number(match[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[match[2] as 'ms' | 's' | 'm' | 'h'];
}

function duration(flag: string, value: string): number {
  const ms = parseDuration(value);
  if (ms === undefined || ms <= 0)
    throw new UsageError(`--${flag} ${JSON.stringify(value)} must be a positive duration such as 500ms, 30s, 10m or 1h`);
  return ms;
}

function integer(flag: string, value: string, min: number, max: number): number {
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max)
    throw new UsageError(`--${flag} ${JSON.stringify(value)} must be a whole number from ${min} to ${max}`);
  return Number(value);
}

function host(value: string): string {
  if (value === '' || /\s/.test(value))
    throw new UsageError(`--host ${JSON.stringify(value)} must be an address or host name to listen on`);
  return value;
}

/** Runs node's strict parser, turning its errors into usage errors (its messages name the flag). */
function parse<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

function parseServe(argv: string[]): Command {
  const split = argv.indexOf('--');
  const own = split === -1 ? argv : argv.slice(0, split);
  const { values, positionals } = parse({
    args: own,
    allowPositionals: true,
    strict: true,
    options: {
      host: { type: 'string', default: '0.0.0.0' },
      port: { type: 'string', default: String(BRIDGE_PORT) },
      path: { type: 'string', default: BRIDGE_PATH },
      'max-sessions': { type: 'string', default: '16' },
      'session-idle-timeout': { type: 'string', default: '10m' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return { kind: 'help' };
  if (positionals.length > 0)
    throw new UsageError(`serve: unexpected argument ${JSON.stringify(positionals[0])}; put the server's command after --`);
  const child = split === -1 ? [] : argv.slice(split + 1);
  if (child.length === 0 || child[0] === '')
    throw new UsageError(
      'serve: the stdio MCP server to run is missing: give it after --, e.g. punk-bridge serve -- npx -y @modelcontextprotocol/server-memory',
    );
  const path = values.path;
  if (!/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/.test(path) || ['/healthz', '/readyz'].includes(path)) {
    throw new UsageError(`--path ${JSON.stringify(path)} must be an absolute URL path such as /mcp, other than /healthz and /readyz`);
  }
  return {
    kind: 'serve',
    host: host(values.host),
    port: integer('port', values.port, 0, 65535),
    path,
    maxSessions: integer('max-sessions', values['max-sessions'], 1, 100_000),
    sessionIdleTimeoutMs: duration('session-idle-timeout', values['session-idle-timeout']),
    command: child[0]!,
    args: child.slice(1),
  };
}

function parseEgressProxy(argv: string[]): Command {
  const { values, positionals } = parse({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      host: { type: 'string', default: '0.0.0.0' },
      port: { type: 'string', default: String(EGRESS_PROXY_PORT) },
      allow: { type: 'string', multiple: true, default: [] },
      'idle-timeout': { type: 'string', default: '5m' },
      'connect-timeout': { type: 'string', default: '10s' },
      'max-connections': { type: 'string', default: '512' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return { kind: 'help' };
  if (positionals.length > 0) throw new UsageError(`egress-proxy: unexpected argument ${JSON.stringify(positionals[0])}`);
  const rules = values.allow.map((text) => {
    try {
      return parseEgressRule(text);
    } catch (error) {
      throw new UsageError(`--allow ${(error as Error).message}`);
    }
  });
  return {
    kind: 'egress-proxy',
    host: host(values.host),
    port: integer('port', values.port, 0, 65535),
    rules,
    idleTimeoutMs: duration('idle-timeout', values['idle-timeout']),
    connectTimeoutMs: duration('connect-timeout', values['connect-timeout']),
    maxConnections: integer('max-connections', values['max-connections'], 1, 1_000_000),
  };
}

/**
 * Parses `punk-bridge`'s arguments (without node and the script).
 * @throws UsageError naming the flag or argument that was wrong.
 */
export function parseCommandLine(argv: string[]): Command {
  const [command, ...rest] = argv;
  if (command === undefined) throw new UsageError('a command is required: serve or egress-proxy');
  if (command === '--help' || command === '-h' || command === 'help') return { kind: 'help' };
  if (command === 'serve') return parseServe(rest);
  if (command === 'egress-proxy') return parseEgressProxy(rest);
  throw new UsageError(`unknown command ${JSON.stringify(command)}: expected serve or egress-proxy`);
}
