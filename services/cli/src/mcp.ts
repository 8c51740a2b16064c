/**
 * `punk mcp`: Punk's platform tools (mcp-tools.ts) as an MCP server over stdio, for clients that launch
 * subprocesses (Claude Code); a pure HTTP client of the deployment at `PUNK_GATEWAY_URL` with `PUNK_MCP_API_KEY`.
 * Both protocol eras over stdio (the SDK's `serveStdio`); standard output carries the protocol only, anything else
 * goes to standard error.
 * `punk mcp --relay` also serves every tool, resource and prompt of the deployment's `/mcp` (mcp-relay.ts).
 * `punk mcp --selfcheck` instead runs every tool through an in-process client against the deployment and prints
 * one line per tool (docs/punk-mcp.md).
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/client';
import { InMemoryTransport } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { relayServer } from './mcp-relay.js';
import { PLATFORM_TOOLS, platformServer } from './mcp-tools.js';
import { PunkApi, PunkApiError, targetFromEnv, type PunkTarget } from './punk-api.js';
import { StdioWatch } from './stdio-watch.js';

const VERSION = '0.1.0';

export const MCP_USAGE = `Usage: punk mcp [--relay | --selfcheck]

Serves Punk's platform tools over stdio (MCP) against the deployment at PUNK_GATEWAY_URL
(default http://localhost:4100) with the API key PUNK_MCP_API_KEY (when the deployment needs one).
  --relay       also serve every tool, resource and prompt of the deployment's /mcp
  --selfcheck   run every tool once against the deployment, print one line per tool, exit 1 on any failure
  -h, --help    show this help
`;

/** `punk mcp [--relay | --selfcheck]`. Resolves when stdin closes (the client went away), or with the selfcheck's exit code. */
export async function mcpCommand(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      relay: { type: 'boolean', default: false },
      selfcheck: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(MCP_USAGE);
    return 0;
  }
  if (values.relay && values.selfcheck) throw new Error('punk mcp: --relay and --selfcheck do not go together; give one');
  const target = targetFromEnv(process.env);
  if (values.selfcheck) return selfcheck(target, (line) => process.stdout.write(`${line}\n`));
  const api = new PunkApi(target);
  // serveStdio owns the era decision: an `initialize` opening gets a 2025-era instance, a 2026-07-28 one a modern instance.
  const closed = new Promise<void>((done) => process.stdin.once('end', () => done()).once('close', () => done()));
  const log = (line: string) => process.stderr.write(`${line}\n`);
  // The relay reads what the client declares and listens to on the wire (stdio-watch.ts).
  const watch = values.relay ? new StdioWatch() : undefined;
  const handle = serveStdio((ctx) => (watch ? relayServer(api, VERSION, ctx.era, log, watch) : platformServer(api, VERSION)), {
    onerror: (error) => log(`punk mcp: ${error.message}`),
    ...(watch && { transport: watch.transport }),
  });
  log(
    `punk mcp: serving the platform tools${values.relay ? ` and relaying ${api.target.baseUrl}/mcp` : ''} over stdio for ${api.target.baseUrl}`,
  );
  await closed;
  await handle.close().catch(() => undefined);
  return 0;
}

/**
 * The tools `--selfcheck` runs on an approval, a workflow and a run no one has: the answer "no approval <id>", "no
 * ready workflow <name>" or "has no run <id>" means the route answered, and counts as ok.
 */
const EXPECTED_REFUSALS: Partial<Record<(typeof PLATFORM_TOOLS)[number], RegExp>> = {
  punk_decide_approval: /no approval/i,
  punk_run_workflow: /no ready workflow/i,
  punk_cancel_workflow_run: /has no run/i,
};

/** What a tool answers when the key lacks a right: the tool works, this key may not use it (not a failure). */
const SCOPE_REFUSAL = /the key needs the scope (\S+?)[.,;)]?(?:\s|$)/;

/**
 * The arguments `--selfcheck` gives a tool, from what the earlier tools answered; `skipped` holds the tools this
 * key may not use, so a tool that needs their answer is skipped too instead of failing for want of it.
 */
type Seen = { server?: string; runId?: string; toolWord?: string; skipped: Set<string> };

/** What {@link selfcheckArguments} answers for a tool that needs the answer of a tool this key may not use. */
const SKIP = Symbol('skip');

function selfcheckArguments(tool: (typeof PLATFORM_TOOLS)[number], seen: Seen): Record<string, unknown> | string | typeof SKIP {
  switch (tool) {
    case 'punk_search_tools':
      return { query: seen.toolWord ?? 'list', limit: 5 };
    case 'punk_test_server':
      if (seen.server) return { name: seen.server };
      return seen.skipped.has('punk_list_servers') ? SKIP : 'the deployment has no server to test';
    case 'punk_list_runs':
      return { limit: 5 };
    case 'punk_explain_run':
      if (seen.runId) return { runId: seen.runId };
      return seen.skipped.has('punk_list_runs') ? SKIP : 'the ledger has no run to explain';
    case 'punk_decide_approval':
      // An id no request has: the route and the key's right to ask are checked, and nothing is decided.
      return { id: randomUUID(), decision: 'deny', reason: 'punk mcp --selfcheck' };
    case 'punk_run_workflow':
      // A workflow no tenant has: the key's /mcp is asked, and nothing runs.
      return { name: `punk-selfcheck-${randomUUID()}`, arguments: {} };
    case 'punk_cancel_workflow_run':
      // A run no workflow has: the route and the key's right to ask are checked, and nothing is cancelled.
      return { name: `punk-selfcheck-${randomUUID()}`, runId: randomUUID() };
    default:
      return {};
  }
}

/** The deadline of each request the selfcheck makes, in milliseconds: a deployment that takes a request and never answers fails it in seconds. */
export const SELFCHECK_REQUEST_TIMEOUT_MS = 5_000;

/**
 * Runs every platform tool once through an in-process client (a linked in-memory pair) against `target`'s
 * deployment, writing one line per tool with `print`; answers the exit code (0 when none failed, 1 otherwise). A tool
 * the key may not use (it answers naming the scope it needs) is listed as `skip`, not as a failure: a non-admin key
 * is a working install. Before the tools it checks the deployment answers and takes the key, and says so plainly
 * when not. Every request it makes has a deadline of {@link SELFCHECK_REQUEST_TIMEOUT_MS}; one past it fails naming
 * the request (`POST /mcp initialize`, `GET /api/v1/runs`).
 */
export async function selfcheck(target: PunkTarget, print: (line: string) => void): Promise<number> {
  print(`punk mcp --selfcheck against ${target.baseUrl}${target.apiKey ? ' (with PUNK_MCP_API_KEY)' : ' (no API key)'}`);
  const api = new PunkApi(target, { requestTimeoutMs: SELFCHECK_REQUEST_TIMEOUT_MS });
  try {
    await api.deploymentTools();
  } catch (error) {
    if (!(error instanceof PunkApiError)) throw error;
    if (error.unreachable) print(`FAIL the deployment cannot be reached: ${error.message}`);
    else if (error.timedOut) print(`FAIL the deployment did not answer in time: ${error.message}`);
    else if (error.refused) print(`FAIL the deployment refused the API key: ${error.message}`);
    else print(`FAIL the deployment's /mcp endpoint failed: ${error.message}`);
    return 1;
  }
  const server = platformServer(api, VERSION);
  const client = new Client({ name: 'punk-selfcheck', version: VERSION });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  await client.connect(clientSide);
  let failures = 0;
  const seen: Seen = { skipped: new Set() };
  try {
    const listed = new Set((await client.listTools()).tools.map((t) => t.name));
    for (const tool of PLATFORM_TOOLS) {
      const args = selfcheckArguments(tool, seen);
      if (args === SKIP) {
        seen.skipped.add(tool);
        print(`skip ${tool}: needs what an earlier tool this key may not use answers`);
        continue;
      }
      if (!listed.has(tool) || typeof args === 'string') {
        failures++;
        print(`FAIL ${tool}: ${typeof args === 'string' ? args : 'not listed by tools/list'}`);
        continue;
      }
      const result = await client.callTool({ name: tool, arguments: args });
      const text = (result.content as Array<{ type: string; text?: string }>).map((c) => c.text ?? '').join(' ');
      const structured = result.structuredContent as Record<string, unknown> | undefined;
      const scope = result.isError === true ? SCOPE_REFUSAL.exec(text)?.[1] : undefined;
      if (scope !== undefined) {
        seen.skipped.add(tool);
        print(`skip ${tool}: this key may not use it (it needs the scope ${scope})`);
        continue;
      }
      const expected = EXPECTED_REFUSALS[tool];
      const ok = expected ? result.isError === true && expected.test(text) : result.isError !== true;
      if (!ok) failures++;
      if (ok && structured) remember(tool, structured, seen);
      const summary = text.split('\n')[0]!.slice(0, 160);
      print(`${ok ? 'ok  ' : 'FAIL'} ${tool}: ${summary}`);
    }
  } finally {
    await client.close().catch(() => undefined);
    await server.close().catch(() => undefined);
  }
  const skipped = seen.skipped.size === 0 ? '' : `; ${String(seen.skipped.size)} skipped: this key may not use them`;
  print(
    failures === 0
      ? `${String(PLATFORM_TOOLS.length - seen.skipped.size)} of ${String(PLATFORM_TOOLS.length)} tools ok${skipped}`
      : `${String(failures)} of ${String(PLATFORM_TOOLS.length)} tools failed${skipped}`,
  );
  return failures === 0 ? 0 : 1;
}

/** Keeps what later tools of the selfcheck need from a tool's structured answer. */
function remember(tool: string, structured: Record<string, unknown>, seen: Seen): void {
  if (tool === 'punk_list_servers') {
    const servers = structured['servers'] as Array<{ name: string; state: string }>;
    const server = servers.find((s) => s.state === 'ready') ?? servers[0];
    if (server) {
      seen.server = server.name;
      seen.toolWord = server.name;
    }
  }
  if (tool === 'punk_list_runs') seen.runId = (structured['runs'] as Array<{ runId: string }>)[0]?.runId;
}
