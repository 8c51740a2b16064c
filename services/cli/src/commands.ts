import { parseArgs } from 'node:util';
import {
  PunkError,
  createLogger,
  formatManifestError,
  validateWorkflowCatalog,
  workflowCatalogOf,
  workflowManifestError,
  redactNatsUrl,
  loadConfig,
  runServiceMain,
  unauthenticatedExposureWarning,
  type Logger,
  type PunkConfig,
  type ServerCatalog,
} from '@punk/lib';
import { ADMIN_COMMANDS, adminCommand, type AdminCommand } from './admin.js';
import { PunkApiError } from './punk-api.js';

// Each command loads its own modules when it runs: `punk mcp`, which Claude Code starts for every session, is an
// HTTP client and needs none of the gateway, ledger or embedded database.

const USAGE = `Usage: punk <command> [options]

Commands:
  up          Run everything in one process on embedded defaults (what \`npm start\` runs)
  cluster     Run the distributed topology on this machine as separate processes against
              local NATS and Postgres (what \`npm run cluster\` runs; docs/distributed.md);
              \`punk cluster --clean\` (\`npm run cluster:clean\`), with the cluster stopped, deletes
              its NATS streams and KV buckets and drops its database
  gateway     Run one gateway process (PUNK_NATS_URL, PUNK_DATABASE_URL, PUNK_MANIFESTS)
  governance  Run one governance process (PUNK_NATS_URL)
  ledger      Run one ledger process (PUNK_NATS_URL, PUNK_DATABASE_URL)
  credentials reencrypt
              Re-encrypt stored credentials under PUNK_ENCRYPTION_KEY after a key rotation
              (the old key in PUNK_ENCRYPTION_PREVIOUS_KEYS); \`punk credentials --help\`
  mcp         Punk's platform tools as an MCP server over stdio (\`punk mcp --selfcheck\` checks them);
              \`punk mcp --help\`, docs/punk-mcp.md

Admin commands (over the HTTP API of PUNK_GATEWAY_URL, default http://localhost:4100, with PUNK_MCP_API_KEY;
tables, or --json):
  servers              the servers, their state, tool count and last error
  runs [--limit N] [--cursor C] [--before TIME] [--server S] [--tool T] [--subject S] [--type T]
       [--outcome O] [--trigger T] [--since TIME] [--until TIME]
                       the ledger's runs, most recently active first, filtered; while there are
                       more, the table ends with the --cursor of the next page
  run <id>             one run explained: events, decisions, approvals, timings, errors, chain state
  approvals [--state S]
                       approval requests (pending by default)
  approve <id> [--reason TEXT], deny <id> [--reason TEXT]
                       decide one
  keys                 the API keys
  verify               verify the ledger's chain (exit 1 when broken)

Options of \`punk up\`:
  --manifests DIR   McpServer manifests to serve (default: examples, or PUNK_MANIFESTS)
  --data DIR        PGlite data directory (default: .punk/data, or PUNK_DATA_DIR); the servers'
                    working directories go beside it, in DIR-servers (.punk/servers
                    for .punk/data)
  --ephemeral       keep nothing: the database and the servers' working
                    directories in temporary directories removed at exit
  --host HOST       listen address (default: 127.0.0.1, or PUNK_HOST)
  --port PORT       listen port (default: 4100, or PUNK_PORT; 0 picks a free one)
  -h, --help        show this help
`;

/** `punk up`: starts the all-in-one and stops it cleanly on SIGINT, SIGTERM or SIGHUP. */
async function up(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      manifests: { type: 'string' },
      data: { type: 'string' },
      ephemeral: { type: 'boolean', default: false },
      host: { type: 'string' },
      port: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  if (values.ephemeral && values.data !== undefined)
    throw new PunkError(
      'ConflictingOptions',
      `--ephemeral keeps nothing, so it takes no --data (got --data ${values.data}): pass one of them (PUNK_DATA_DIR is not used with --ephemeral)`,
    );
  const overrides: Partial<Record<keyof PunkConfig, unknown>> = {
    manifests: values.manifests,
    dataDir: values.data,
    host: values.host,
    port: values.port,
  };
  const config = loadConfig(process.env, overrides, { manifests: '--manifests', dataDir: '--data', host: '--host', port: '--port' });
  const log = createLogger('punk', config.logLevel);
  const exposed = unauthenticatedExposureWarning(config, 'the MCP endpoints, the servers API and the ledger API');
  if (exposed) log.warn(exposed);
  const { startEmbedded } = await import('./embedded.js');
  const started = Date.now();
  const starting = startEmbedded({ config, dataDir: values.ephemeral ? null : config.dataDir });
  // From the start: a signal while servers are still starting stops them too (it waits for the start to settle).
  let stopping = false;
  stopOnSignals(log, 'shutting down', async () => {
    stopping = true;
    const punk = await starting.catch(() => undefined);
    await punk?.close();
  });
  const punk = await starting;
  const endpoint = `${punk.baseUrl}${config.mcpPath}`;
  const pending = punk.catalog().filter((s) => s.state === 'starting');
  if (pending.length > 0)
    log.info(
      { servers: pending.map((s) => s.name) },
      `serving ${endpoint}; still starting: ${pending.map((s) => s.name).join(', ')} (served as each is ready)`,
    );
  await punk.serversStarted();
  // A signal during the start: the servers were stopped, not started; there is nothing to announce.
  if (stopping) return;
  // The tools each workflow names, now that the servers listed theirs: a problem is reported, never fatal.
  const catalog = punk.catalog();
  const workflowErrors = punk.workflows.flatMap((entry) =>
    validateWorkflowCatalog(entry.workflow, workflowCatalogOf(catalog, entry.workflow.metadata.namespace ?? config.tenant)).map((error) =>
      workflowManifestError(entry, error),
    ),
  );
  for (const error of workflowErrors) log.error({ manifestError: error }, `manifest error: ${formatManifestError(error)}`);
  process.stdout.write(
    `\nPunk is ready in ${Date.now() - started} ms: ${endpoint}\n` +
      serversLine(catalog, punk.manifestErrors.length + workflowErrors.length) +
      `  one server, names unchanged: ${punk.baseUrl}/servers/<name>/mcp; ledger: ${punk.baseUrl}/api/v1/runs\n` +
      `  dashboard: ${punk.baseUrl}/ui\n` +
      connectHint(config, punk.baseUrl) +
      '\n',
  );
}

/**
 * `punk cluster`: 2 mcp-front, 2 gateway, 1 governance, 2 ledger processes and
 * the example servers behind a round-robin proxy on PUNK_HOST:PUNK_PORT; Ctrl-C stops them all.
 * `punk cluster --clean` instead removes what a stopped cluster left in NATS and Postgres (cluster-clean.ts).
 */
async function cluster(args: string[]): Promise<void> {
  if (args.includes('-h') || args.includes('--help')) {
    process.stdout.write(USAGE);
    return;
  }
  const clean = args.length === 1 && args[0] === '--clean';
  if (args.length > 0 && !clean)
    throw new PunkError('UnknownOption', `punk cluster takes only --clean (got ${args.join(' ')}); configure it with PUNK_* variables`);
  const config = loadConfig(process.env);
  const [{ CLUSTER_DATABASE_URL, CLUSTER_NATS_URL, startCluster }, { cleanCluster }, { frontOptionsOf }] = await Promise.all([
    import('./cluster.js'),
    import('./cluster-clean.js'),
    import('@punk/mcp-front'),
  ]);
  const natsUrl = config.natsUrl ?? CLUSTER_NATS_URL;
  const databaseUrl = config.databaseUrl ?? CLUSTER_DATABASE_URL;
  if (clean) {
    const cleaned = await cleanCluster(natsUrl, databaseUrl, createLogger('cluster', config.logLevel));
    process.stdout.write(
      `removed streams and KV buckets: ${cleaned.streams.join(', ') || 'none found'} (NATS ${redactNatsUrl(natsUrl)}); database: ${cleaned.database ?? 'none found'}\n`,
    );
    return;
  }
  // The fronts would each refuse bad endpoint or PUNK_AUTH_* settings; refuse them once, before anything starts.
  frontOptionsOf(config);
  const log = createLogger('cluster', config.logLevel);
  const exposed = unauthenticatedExposureWarning(config, 'the MCP endpoints, the servers API and the ledger API');
  if (exposed) log.warn(exposed);
  const started = Date.now();
  const running = await startCluster(config, natsUrl, databaseUrl);
  const endpoint = `${running.url}${config.mcpPath}`;
  process.stdout.write(
    `\nPunk cluster is ready in ${Date.now() - started} ms: ${endpoint} (NATS ${redactNatsUrl(natsUrl)})\n` +
      serversLine(running.servers, running.manifestErrors.length) +
      `  ledger: ${running.url}/api/v1/runs, ${running.url}/api/v1/ledger/verify\n` +
      running.gaps.map((gap) => `  missing: ${gap}\n`).join('') +
      connectHint(config, running.url) +
      `  Ctrl-C stops everything; \`npm run cluster:clean\` then removes its NATS streams, buckets and database\n\n`,
  );
  stopOnSignals(log, 'stopping the cluster', () => running.stop());
}

/** The banner's line of servers: each name, with its state and last error unless it is ready. */
function serversLine(servers: Array<Pick<ServerCatalog, 'name' | 'state' | 'lastError'>>, manifestErrors: number): string {
  const states = servers.map((s) => (s.state === 'ready' ? s.name : `${s.name} (${s.state}${s.lastError ? `: ${s.lastError}` : ''})`));
  return `  servers: ${states.join(', ') || 'none'}${manifestErrors > 0 ? ` (${String(manifestErrors)} manifest error(s) above)` : ''}\n`;
}

/**
 * The banner's lines on connecting Claude Code to the endpoint at `baseUrl`: with `PUNK_AUTH_MODE=on`, with
 * the bearer header an API key goes in, and how to make one (docs/authentication.md).
 */
function connectHint(config: PunkConfig, baseUrl: string): string {
  const add = `  connect a client: claude mcp add --transport http punk ${baseUrl}${config.mcpPath}`;
  if (config.authMode === 'off') return `${add}\n`;
  return (
    `${add} --header "Authorization: Bearer <API key>"\n` +
    `  make an API key (docs/authentication.md): curl -s ${baseUrl}/api/v1/api-keys -H "authorization: Bearer $PUNK_AUTH_BOOTSTRAP_ADMIN_KEY" \\\n` +
    `      -H 'content-type: application/json' -d '{"name":"my laptop"}'\n`
  );
}

/**
 * Signals within this many milliseconds of the first are the same stop: Ctrl-C in a terminal sends SIGINT to the
 * whole foreground process group, and npm passes its own on, so one key press reaches `npm start`'s node twice.
 */
const SAME_STOP_MS = 1000;

/**
 * On SIGINT, SIGTERM or SIGHUP (the terminal closed), runs `close` and exits 0 (1 when it fails); a signal more
 * than {@link SAME_STOP_MS} after the first (Ctrl-C pressed again) exits 1 at once.
 */
function stopOnSignals(log: Logger, what: string, close: () => Promise<void>): void {
  let stopping: number | undefined;
  const stop = (signal: string) => {
    if (stopping !== undefined) {
      if (Date.now() - stopping <= SAME_STOP_MS) return;
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = Date.now();
    log.info({ signal }, what);
    close().then(
      () => process.exit(0),
      (error: unknown) => {
        log.error({ err: error }, `${what} failed`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGHUP', () => stop('SIGHUP'));
}

async function main(argv: string[]): Promise<void> {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 22) {
    throw new PunkError(
      'UnsupportedNode',
      `Punk needs Node.js 22 or later (this is ${process.versions.node}); run it through npm (npm start), which uses the Node 24 that npm ci installed in node_modules/.bin`,
    );
  }
  const [command, ...rest] = argv;
  switch (command) {
    case 'up':
      return up(rest);
    case 'cluster':
      return cluster(rest);
    case 'gateway': {
      runServiceMain((await import('@punk/gateway')).gatewayService);
      return;
    }
    case 'governance': {
      runServiceMain((await import('@punk/governance')).governanceService);
      return;
    }
    case 'ledger': {
      runServiceMain((await import('@punk/ledger')).ledgerService);
      return;
    }
    case 'credentials':
      return (await import('./credentials.js')).credentialsCommand(rest);
    case 'mcp': {
      process.exitCode = await (await import('./mcp.js')).mcpCommand(rest);
      return;
    }
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(USAGE);
      return;
    default:
      if ((ADMIN_COMMANDS as readonly string[]).includes(command)) {
        process.exitCode = await adminCommand(command as AdminCommand, rest, (text) => process.stdout.write(text));
        return;
      }
      throw new PunkError('UnknownCommand', `unknown command "${command}"; run \`punk --help\``);
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`punk: ${message}\n`);
  // A failed API request (unreachable, refused, an error answer) is exit 1; bad usage and everything else 2.
  process.exit(error instanceof PunkApiError ? 1 : 2);
});
