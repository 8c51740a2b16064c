/**
 * Side-effect classification of what a caller is about to use on an upstream
 * MCP server: a level 0-4 (see `SideEffectLevel` in @punk/lib) and the action
 * string policies match on. Pure functions, no I/O.
 */
import type { GovernanceCheck, GovernanceDecision, SideEffectLevel } from '../contracts.js';

/** Where a level came from: the manifest, the name heuristics, or the kind of use (resource, prompt). */
export type LevelSource = GovernanceDecision['levelSource'];

/** A classification: the level, where it came from, and the policy action. */
export interface Classification {
  level: SideEffectLevel;
  levelSource: LevelSource;
  /** `read:<server>/<target>` (level <= 1), `write:…` (2-3) or `destroy:…` (4). */
  action: string;
}

/** Verbs of destructive or payment-shaped tools (level 4). */
const DESTROY_VERBS = [
  'delete',
  'remove',
  'destroy',
  'drop',
  'purge',
  'wipe',
  'erase',
  'truncate',
  'kill',
  'terminate',
  'pay',
  'purchase',
  'charge',
  'refund',
  'transfer',
  'withdraw',
  'buy',
  'sell',
  'rm',
  'rmdir',
  'unlink',
  'shred',
  'overwrite',
  'revoke',
  'uninstall',
  'shutdown',
  'reboot',
];
/**
 * Pairs of a write verb and a noun that make a name level 4 together, where the verb alone is a write (level 3):
 * money sent, code or a shell run, a password reset, a disk formatted (the fresh-user trial found `send_money`, `run_shell`,
 * `execute_sql` and `reset_password` served without an approval).
 */
const DESTROY_PAIRS: { verbs: string[]; nouns: string[] }[] = [
  { verbs: ['send', 'move', 'wire'], nouns: ['money', 'funds', 'payment', 'payout', 'crypto'] },
  { verbs: ['execute', 'exec', 'run', 'eval', 'invoke'], nouns: ['shell', 'sql', 'bash', 'command', 'cmd', 'script', 'code'] },
  { verbs: ['reset', 'set', 'change', 'update'], nouns: ['password', 'passwords', 'mfa', '2fa'] },
  { verbs: ['format'], nouns: ['disk', 'disks', 'drive', 'volume', 'partition', 'device', 'filesystem'] },
];
/** Verbs of writing or sending tools (level 3). */
const WRITE_VERBS = [
  'send',
  'create',
  'write',
  'update',
  'post',
  'publish',
  'insert',
  'add',
  'set',
  'put',
  'move',
  'rename',
  'edit',
  'upload',
  'execute',
  'exec',
  'run',
  'patch',
  'save',
  'modify',
  'append',
  'reset',
  'invoke',
  'trigger',
  'start',
  'stop',
  'deploy',
  'commit',
  'push',
  'merge',
  'approve',
  'reply',
  'email',
  'notify',
  'toggle',
];
/**
 * Verbs of reading tools (level 1). Not `open`: `open_pull_request` and `open_issue` write; a server whose `open_`
 * tool only reads declares it (examples/memory.yaml's `open_nodes`).
 */
const READ_VERBS = [
  'get',
  'list',
  'read',
  'search',
  'find',
  'fetch',
  'query',
  'describe',
  'show',
  'view',
  'echo',
  'count',
  'status',
  'lookup',
  'inspect',
  'check',
  'browse',
  'retrieve',
  'info',
  'stat',
  'tree',
  'peek',
  'download',
  'head',
  'tail',
  'explain',
  'summarize',
  'validate',
  'diff',
  'compare',
  'ping',
  'whoami',
  'directory',
];

/** Level when no heuristic matches: unknown tools are treated as writes. */
export const UNKNOWN_TOOL_LEVEL: SideEffectLevel = 3;

/**
 * Splits a tool name into lower-case words at camelCase and acronym
 * boundaries and at `_`, `-`, `.`, `/`, `:` and spaces.
 * `deleteFile` → [delete, file]; `get_HTTPStatus` → [get, http, status].
 */
export function splitWords(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .split(/[\s_\-./:]+/)
    .map((word) => word.toLowerCase())
    .filter((word) => word.length > 0);
}

/** True when `word` is `verb` or an inflection of it (`deletes`, `deleted`, `deleting`). */
function isVerb(word: string, verb: string): boolean {
  if (word === verb) return true;
  if (!word.startsWith(verb)) return false;
  const rest = word.slice(verb.length);
  return ['s', 'es', 'd', 'ed', 'ing'].includes(rest);
}

function hasAny(words: string[], verbs: string[]): boolean {
  return words.some((word) => verbs.some((verb) => isVerb(word, verb)));
}

/**
 * Level of a tool from its name alone: any destroy- or payment-shaped word, or a
 * write verb with a noun of {@link DESTROY_PAIRS}, → 4, else any write- or send-shaped word → 3, else any read-shaped word → 1,
 * else {@link UNKNOWN_TOOL_LEVEL}. The most severe word wins, so
 * `get_and_delete` is 4.
 */
export function heuristicToolLevel(name: string): SideEffectLevel {
  const words = splitWords(name);
  if (hasAny(words, DESTROY_VERBS)) return 4;
  if (DESTROY_PAIRS.some(({ verbs, nouns }) => hasAny(words, verbs) && words.some((word) => nouns.includes(word)))) return 4;
  if (hasAny(words, WRITE_VERBS)) return 3;
  if (hasAny(words, READ_VERBS)) return 1;
  return UNKNOWN_TOOL_LEVEL;
}

/** The policy action of a level on a server's target. */
export function actionOf(level: SideEffectLevel, server: string, target: string): string {
  const verb = level <= 1 ? 'read' : level <= 3 ? 'write' : 'destroy';
  return `${verb}:${server}/${target}`;
}

/**
 * Classifies one use. A `declaredLevel` (from the McpServer manifest's
 * `spec.tools.overrides`) wins; else resource reads are level 1 and prompt
 * gets level 0 (`kind`); else tool names go through {@link heuristicToolLevel}.
 */
export function classify(check: Pick<GovernanceCheck, 'kind' | 'target' | 'server' | 'declaredLevel'>): Classification {
  let level: SideEffectLevel;
  let levelSource: LevelSource;
  if (check.declaredLevel !== undefined) {
    level = check.declaredLevel;
    levelSource = 'declared';
  } else if (check.kind === 'resource') {
    level = 1;
    levelSource = 'kind';
  } else if (check.kind === 'prompt') {
    level = 0;
    levelSource = 'kind';
  } else {
    level = heuristicToolLevel(check.target);
    levelSource = 'heuristic';
  }
  return { level, levelSource, action: actionOf(level, check.server, check.target) };
}
