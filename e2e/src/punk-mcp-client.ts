/**
 * `punk mcp` as a user's MCP client runs it: the SDK's `Client` spawns `node services/cli/dist/main.js mcp …` over
 * stdio (StdioClientTransport) with `PUNK_GATEWAY_URL` and `PUNK_MCP_API_KEY`; and the admin commands as a person
 * runs them. Shared by the `punk mcp` tests against `punk up` and `punk cluster`.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client, type ClientOptions } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { repoRoot } from './harness.js';

const exec = promisify(execFile);
const MAIN = join(repoRoot, 'services/cli/dist/main.js');

/** The platform tools `punk mcp` serves, in the order `--selfcheck` runs them. */
export { PLATFORM_TOOLS } from '@punk/cli';

/** `punk <args>` with the deployment's URL and `key`; resolves with its exit code and output (never rejects). */
export async function punkCli(baseUrl: string, key: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec(process.execPath, [MAIN, ...args], {
      env: { ...process.env, PUNK_GATEWAY_URL: baseUrl, PUNK_MCP_API_KEY: key },
      timeout: 120_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof failed.code === 'number' ? failed.code : -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

/**
 * A `punk mcp <args>` child driven by the SDK's Client over stdio in `era` (the 2025 `initialize` handshake, or
 * pinned to 2026-07-28), and what it wrote to stderr. A stray line on its stdout fails the test.
 */
export async function punkMcp(
  baseUrl: string,
  key: string,
  options: { era?: '2025' | '2026-07-28'; args?: string[]; client?: ClientOptions } = {},
): Promise<{ client: Client; stderr: () => string }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [MAIN, 'mcp', ...(options.args ?? [])],
    env: { ...(process.env as Record<string, string>), PUNK_GATEWAY_URL: baseUrl, PUNK_MCP_API_KEY: key },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const era = options.era ?? '2025';
  const client = new Client(
    { name: 'punk-mcp-e2e', version: '1.0.0' },
    { ...options.client, ...(era !== '2025' && { versionNegotiation: { mode: { pin: era } } }) },
  );
  // A stray line on stdout would break the protocol: the SDK reports it as an error, which fails the test.
  client.onerror = (error) => assert.fail(`punk mcp broke the protocol: ${error.message}\n${stderr}`);
  await client.connect(transport);
  return { client, stderr: () => stderr };
}

/** A tool result as the tests read it. */
export type ToolAnswer = { isError?: boolean; content?: unknown; structuredContent?: Record<string, unknown> };

/** Calls `name` with `args` through `client`. */
export const call = async (client: Client, name: string, args: Record<string, unknown> = {}): Promise<ToolAnswer> =>
  (await client.callTool({ name, arguments: args })) as ToolAnswer;
