/**
 * The admin commands for people, over the same HTTP API and client as `punk mcp` (punk-api.ts): `punk servers`,
 * `punk runs`, `punk run <id>`, `punk approvals`, `punk approve <id>`, `punk deny <id>`, `punk keys`, `punk verify`.
 * Tables by default, `--json` for the API's data; `PUNK_GATEWAY_URL` and `PUNK_MCP_API_KEY` say where and as whom.
 */
import { parseArgs } from 'node:util';
import { PunkError } from '@punk/lib';
import { describeVerification, explainRun } from './explain.js';
import { PunkApi, targetFromEnv } from './punk-api.js';

/** The admin commands' names. */
export const ADMIN_COMMANDS = ['servers', 'runs', 'run', 'approvals', 'approve', 'deny', 'keys', 'verify'] as const;
export type AdminCommand = (typeof ADMIN_COMMANDS)[number];

/** Fixed-width columns: a header row and one row per item (cells of one line). */
export function table(headers: string[], rows: string[][]): string {
  const clean = rows.map((row) => row.map((cell) => cell.replace(/\s+/g, ' ')));
  const widths = headers.map((h, i) => Math.max(h.length, ...clean.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(headers), ...clean.map(line)].join('\n') + '\n';
}

/**
 * Runs admin command `command` with `args`; writes to `out` and answers the exit code (0; `punk verify` 1 when the
 * chain is broken). @throws PunkApiError from the API (the caller prints its message); PunkError for bad arguments.
 */
export async function adminCommand(command: AdminCommand, args: string[], out: (text: string) => void): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: {
      json: { type: 'boolean', default: false },
      limit: { type: 'string' },
      cursor: { type: 'string' },
      before: { type: 'string' },
      server: { type: 'string' },
      tool: { type: 'string' },
      subject: { type: 'string' },
      type: { type: 'string' },
      outcome: { type: 'string' },
      trigger: { type: 'string' },
      since: { type: 'string' },
      until: { type: 'string' },
      state: { type: 'string' },
      reason: { type: 'string' },
    },
    allowPositionals: true,
    strict: true,
  });
  const api = new PunkApi(targetFromEnv(process.env));
  const print = (data: unknown, text: string) => out(values.json ? `${JSON.stringify(data, null, 2)}\n` : text);
  const idOf = () => {
    if (positionals.length !== 1)
      throw new PunkError('InvalidArguments', `punk ${command} takes one id (got ${String(positionals.length)})`);
    return positionals[0]!;
  };
  if (command !== 'run' && command !== 'approve' && command !== 'deny' && positionals.length > 0)
    throw new PunkError('InvalidArguments', `punk ${command} takes no arguments (got ${positionals.join(' ')})`);
  switch (command) {
    case 'servers': {
      const servers = await api.servers();
      print(
        { servers },
        table(
          ['NAME', 'STATE', 'TOOLS', 'LAST ERROR'],
          servers.map((s) => [s.name, s.state, String(s.toolCount), s.lastError ?? '']),
        ),
      );
      return 0;
    }
    case 'runs': {
      const limit = values.limit === undefined ? undefined : Number(values.limit);
      if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= 500))
        throw new PunkError('InvalidArguments', `--limit must be an integer from 1 to 500 (got ${values.limit ?? ''})`);
      const { cursor, before, server, tool, subject, type, outcome, trigger, since, until } = values;
      const page = await api.runs({ limit, cursor, before, server, tool, subject, type, outcome, trigger, since, until });
      print(
        page,
        table(
          ['RUN', 'LAST', 'SERVER', 'TOOL', 'OUTCOME', 'SUBJECT'],
          page.runs.map((r) => [r.runId, r.lastAt, r.server ?? '', r.tool ?? '', r.outcome ?? '', r.subject ?? '']),
        ) + (page.nextCursor === undefined ? '' : `More runs: --cursor ${page.nextCursor}\n`),
      );
      return 0;
    }
    case 'run': {
      const [detail, chain] = await Promise.all([api.run(idOf()), api.verify()]);
      const explained = explainRun(detail, chain);
      print(explained, `${explained.narrative}\n`);
      return 0;
    }
    case 'approvals': {
      const approvals = await api.approvals(values.state ?? 'pending');
      print(
        { approvals },
        table(
          ['ID', 'STATE', 'SERVER', 'TOOL', 'CALLER', 'RULE', 'EXPIRES', 'YOU MAY DECIDE'],
          approvals.map((a) => [a.id, a.state, a.server, a.tool, a.principal.subject, a.rule, a.expiresAt, a.mayDecide ? 'yes' : 'no']),
        ),
      );
      return 0;
    }
    case 'approve':
    case 'deny': {
      const approval = await api.decide(idOf(), command, values.reason);
      print({ approval }, `approval ${approval.id} (${approval.server}/${approval.tool}): ${approval.state}\n`);
      return 0;
    }
    case 'keys': {
      const keys = await api.keys();
      print(
        { apiKeys: keys },
        table(
          ['ID', 'NAME', 'TENANT', 'SCOPES', 'REVOKED'],
          keys.map((k) => [k.id, k.name, k.tenant, (k.scopes ?? []).join(','), k.revokedAt ?? '']),
        ),
      );
      return 0;
    }
    case 'verify': {
      const verification = await api.verify();
      print(verification, `${describeVerification(verification)}\n${verification.ok ? '' : `${JSON.stringify(verification, null, 2)}\n`}`);
      return verification.ok ? 0 : 1;
    }
  }
}
