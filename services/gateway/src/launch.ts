/**
 * Turns an McpServer manifest into a local launch plan (embedded mode): the
 * command, arguments, scrubbed environment and working directory of the
 * child process that runs the server. The same manifest runs as a pod in the
 * cluster; here it runs as a child of the gateway.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { OWNER_ONLY_DIRECTORY_MODE, PunkError, transportOf, type McpServer } from '@punk/lib';
import { isCredentialReference } from './credentials/input.js';
import { resolveEnv, type Secrets } from './upstream-secrets.js';

/** How to start one server process. */
export interface LaunchPlan {
  command: string;
  args: string[];
  /** The whole environment of the child: nothing else of the gateway's environment reaches it. */
  env: Record<string, string>;
  /** The server's own working directory (`<workDir>/<namespace>/<name>`), also its HOME. */
  cwd: string;
  /**
   * Values that no log line or message may show (see `redact`): the `env` values resolved from credentials, and the
   * literal `spec.env` values of at least {@link MIN_LITERAL_SECRET_LENGTH} characters (a literal may be a secret too).
   */
  secrets: string[];
  /** Those of {@link secrets} resolved from the credentials vault: masked in everything that goes back to clients too. */
  vaultSecrets: string[];
}

/** Shortest literal `spec.env` value treated as a secret: shorter ones are flags and names (`1`, `debug`, `json`). */
export const MIN_LITERAL_SECRET_LENGTH = 8;

/** Options of {@link planLaunch}. */
export interface LaunchOptions {
  /** Root of the servers' working directories. */
  workDir: string;
  /** Extra variables that `$(VAR)` may expand (e.g. `PUNK_MANIFEST_DIR`); they are not passed to the child. */
  extraEnv?: Record<string, string>;
  /** The port of a streamable-http or sse server (its `spec.port`, or the one Punk picked): `$(PORT)` expands to it. */
  port?: number;
  /** The credentials vault that resolves `cred:<id>` values and `credentialRef`s of `env` (none: such entries are errors). */
  secrets?: Secrets;
}

/** The working directory of a server: `<workDir>/<namespace>/<name>`. */
export function serverWorkDir(workDir: string, server: McpServer): string {
  return resolve(workDir, server.metadata.namespace ?? 'default', server.metadata.name);
}

/**
 * Expands `$(VAR)` references from `vars`, as Kubernetes does for `env` and
 * `args`: unknown references stay literal and `$$(VAR)` escapes to `$(VAR)`.
 */
export function expandVars(value: string, vars: Record<string, string>): string {
  return value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (match, name: string | undefined) => {
    if (match === '$$') return '$';
    return name !== undefined && Object.hasOwn(vars, name) ? vars[name]! : match;
  });
}

/**
 * Builds the launch plan of a server that Punk starts (an `image` with a
 * `command`, or a `package`), creating its working directory.
 *
 * `env` values that reference a credential (a `cred:<id>` literal, or `valueFrom.credentialRef`) are resolved
 * through `options.secrets` and are not `$(VAR)`-expanded.
 *
 * @throws PunkError `ServerLaunchFailed` when the server cannot run locally (an
 *   `image` without `command`, a `url` server); for env entries, what
 *   {@link resolveEnv} throws (`SecretUnsupported` for a Secret, `CredentialUnavailable`
 *   without a vault, `InvalidCredentialValue`, the vault's own errors), naming the variable.
 */
export async function planLaunch(server: McpServer, options: LaunchOptions): Promise<LaunchPlan> {
  const spec = server.spec;
  const name = `${server.metadata.namespace ?? 'default'}/${server.metadata.name}`;
  if (spec.url !== undefined) throw new PunkError('ServerLaunchFailed', `server ${name} is a url server; there is nothing to launch`);
  const cwd = serverWorkDir(options.workDir, server);
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: cwd,
    TMPDIR: process.env.TMPDIR ?? tmpdir(),
    LANG: process.env.LANG ?? 'C.UTF-8',
  };
  const vars = (): Record<string, string> => ({
    ...options.extraEnv,
    ...(options.port !== undefined && { PORT: String(options.port) }),
    ...env,
  });
  const secrets: string[] = [];
  const vaultSecrets: string[] = [];
  for (const entry of spec.env) {
    const literal = entry.value !== undefined && !isCredentialReference(entry.value);
    if (literal) {
      const value = (env[entry.name] = expandVars(entry.value!, vars()));
      if (value.length >= MIN_LITERAL_SECRET_LENGTH) secrets.push(value);
    } else {
      const value = (env[entry.name] = await resolveEnv(server, entry, options.secrets));
      secrets.push(value);
      vaultSecrets.push(value);
    }
  }
  const args = (spec.args ?? []).map((arg) => expandVars(arg, vars()));
  let command: string;
  let prefix: string[];
  if (spec.command !== undefined) {
    const [first, ...rest] = spec.command.map((part) => expandVars(part, vars()));
    command = first!;
    prefix = rest;
  } else if (spec.package !== undefined) {
    ({ command, args: prefix } = packageCommand(name, spec.package));
  } else {
    throw new PunkError(
      'ServerLaunchFailed',
      `server ${name} names only the container image ${spec.image ?? '(none)'}; to run it locally, set spec.command`,
    );
  }
  // An HTTP server run by Node listens on loopback only, whatever host it names (loopback-preload.ts).
  if (transportOf(spec) !== 'stdio' && isNode(command)) prefix = ['--import', LOOPBACK_PRELOAD, ...prefix];
  // Owner-only (0700): a server's HOME holds what it keeps (a memory graph, tokens).
  await mkdir(cwd, { recursive: true, mode: OWNER_ONLY_DIRECTORY_MODE });
  return { command, args: [...prefix, ...args], env, cwd, secrets, vaultSecrets };
}

/**
 * The `url` server that reaches local HTTP server `server` (one Punk starts) on 127.0.0.1 `port` (its `spec.port`, or
 * the one Punk picked) once it runs: what launches it (`image`, `package`, `command`, `args`, `env`) is left out.
 */
export function asLocalUrlServer(server: McpServer, port: number): McpServer {
  const spec: McpServer['spec'] = { ...server.spec, env: [], url: `http://127.0.0.1:${String(port)}${server.spec.path}` };
  delete spec.image;
  delete spec.package;
  delete spec.command;
  delete spec.args;
  delete spec.port;
  return { ...server, spec };
}

/** The module preloaded into the HTTP servers run by Node, so that they listen on 127.0.0.1 only. */
const LOOPBACK_PRELOAD = pathToFileURL(fileURLToPath(new URL('./loopback-preload.js', import.meta.url))).href;

/** Whether `command` runs Node: this Node, or a `node` found on PATH. */
function isNode(command: string): boolean {
  return command === process.execPath || command === 'node' || basename(command) === 'node';
}

/**
 * Command of a package source: the installed npm package's bin run with this
 * Node, or `uvx` for PyPI. Locally Punk never downloads an npm package at run
 * time (a start would hang on the network, then time out without saying why).
 *
 * @throws PunkError `ServerLaunchFailed` naming the package when it is not installed.
 */
function packageCommand(server: string, pkg: NonNullable<McpServer['spec']['package']>): { command: string; args: string[] } {
  if (pkg.registry === 'pypi') return { command: 'uvx', args: [pkg.version ? `${pkg.name}==${pkg.version}` : pkg.name] };
  const installed = findInstalledBin(pkg.name, pkg.version);
  if (installed) return { command: process.execPath, args: [installed] };
  const wanted = `${pkg.name}${pkg.version ? `@${pkg.version}` : ''}`;
  throw new PunkError(
    'ServerLaunchFailed',
    `server ${server}: npm package ${wanted} is not installed in a node_modules above ${process.cwd()}; ` +
      `install it (npm install ${wanted}) or set spec.command. Punk does not download packages at run time`,
    { package: pkg.name },
  );
}

/**
 * Finds the `bin` script of an installed npm package (of the wanted version
 * when one is given) in the `node_modules` directories above the process cwd
 * and above this module.
 */
export function findInstalledBin(name: string, version?: string): string | undefined {
  const starts = [process.cwd(), dirname(fileURLToPath(import.meta.url))];
  for (const start of starts) {
    for (let dir = start; ; dir = dirname(dir)) {
      const manifestPath = join(dir, 'node_modules', name, 'package.json');
      if (existsSync(manifestPath)) {
        const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { version?: string; bin?: string | Record<string, string> };
        if (version !== undefined && manifest.version !== version) break;
        const bin = binOf(name, manifest.bin);
        if (bin) return join(dirname(manifestPath), bin);
        break;
      }
      if (dirname(dir) === dir) break;
    }
  }
  return undefined;
}

function binOf(name: string, bin: string | Record<string, string> | undefined): string | undefined {
  if (typeof bin === 'string') return bin;
  if (!bin) return undefined;
  const entries = Object.entries(bin);
  const unscoped = name.split('/').pop()!;
  return bin[unscoped] ?? entries.find(([key]) => unscoped.endsWith(key) || key.endsWith(unscoped))?.[1] ?? entries[0]?.[1];
}
