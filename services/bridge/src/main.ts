#!/usr/bin/env node
/**
 * `punk-bridge`: `serve` (a stdio MCP server over Streamable HTTP) or `egress-proxy` (the pod's allow-list
 * proxy). Only wiring: parse the command line (a bad one: usage error on stderr, exit 2), start, and on
 * SIGTERM or SIGINT stop accepting, end every session and exit 0. No top-level await: the single executable
 * build (scripts/build-sea.mjs) bundles this file as CommonJS.
 */
import { parseCommandLine, USAGE, UsageError, type Command } from './flags.js';
import { createBridgeLogger } from './log.js';
import { startBridge } from './serve/bridge.js';
import { startEgressProxy } from './egress/proxy.js';

async function main(argv: string[]): Promise<void> {
  let command: Command;
  try {
    command = parseCommandLine(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`punk-bridge: ${error.message}\n\n${USAGE}`);
    process.exit(2);
  }
  if (command.kind === 'help') return void process.stdout.write(USAGE);
  const log = createBridgeLogger(command.kind === 'serve' ? 'bridge' : 'egress-proxy');
  try {
    const running = command.kind === 'serve' ? await startBridge({ ...command, log }) : await startEgressProxy({ ...command, log });
    const stop = (signal: NodeJS.Signals) => {
      log.info({ signal }, 'stopping');
      void running.close().then(() => process.exit(0));
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  } catch (error) {
    log.fatal({ err: (error as Error).message }, 'could not start');
    process.exit(1);
  }
}

void main(process.argv.slice(2));
