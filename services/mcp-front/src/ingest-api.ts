/**
 * Prompt ingest, mounted at `/api/v1` by the front: `POST /ingest/prompt` records a prompt typed in Claude Code
 * (its UserPromptSubmit hook input, `promptIngestBodySchema`) as a completed observed run on the ledger: a
 * `prompt.observed` event then an `observed.completed` one (provider `claude-code`, model `external`, route `live`,
 * cost 0), chained like every event (appended to the ledger stream with `appendLedgerEvent`). Answers 201 `{ runId }`.
 *
 * Nothing posted is dropped unseen: a prompt longer than `MAX_INGESTED_PROMPT_CHARS` is recorded as its beginning,
 * `truncated` (`promptChars` its whole length; the run's outcome `truncated`, the answer's `truncated` true); a body
 * larger than {@link MAX_BODY_BYTES} (4 MiB) cannot be read, so its run holds a `prompt.refused` event naming its
 * size (outcome `refused`) and the answer is 413.
 *
 * With authentication on, any authenticated caller of the tenant may post (401 otherwise): the run is recorded under
 * its principal. With it off, under the anonymous principal of the front's tenant. Errors are `{ error: { code, message } }`.
 */
import { randomUUID } from 'node:crypto';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import {
  anonymousPrincipal,
  appendLedgerEvent,
  errorMessage,
  MAX_INGESTED_PROMPT_CHARS,
  promptIngestBodySchema,
  PunkError,
  type Bus,
  type LedgerEvent,
  type Logger,
  type Principal,
} from '@punk/lib';
import { callerGuard } from './auth/admin-api.js';
import type { Authenticator } from './auth/authenticator.js';
import { checkJsonDepth } from './json-depth.js';
import { statusOf } from './registry-api.js';

/** Options of {@link ingestRouter}. */
export interface IngestApiOptions {
  bus: Bus;
  log: Logger;
  /** The front's authenticator; absent when authentication is off. */
  auth: Authenticator | undefined;
  /** The front's tenant: the tenant of callers when authentication is off. */
  tenant: string;
}

/** Largest body read, in bytes: a prompt of a few MiB is recorded truncated; a larger body is refused (`prompt.refused`). */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** What an observed prompt's run is, as the seed names it. */
const OBSERVED = { provider: 'claude-code', model: 'external', route: 'live' } as const;

/** Where an observed prompt's events go: its run, who posted it, when it was typed and in which session. */
interface ObservedRun {
  runId: string;
  principal: Principal;
  occurredAt: string;
  sessionId?: string | undefined;
}

/** Appends the events of an observed prompt's run: `type` with `data`, then `observed.completed` with `outcome`. */
async function appendObservedRun(
  bus: Bus,
  run: ObservedRun,
  type: 'prompt.observed' | 'prompt.refused',
  data: Record<string, unknown>,
  outcome: 'ok' | 'truncated' | 'refused',
): Promise<void> {
  const event = (eventType: LedgerEvent['type'], eventData: Record<string, unknown>): LedgerEvent => ({
    id: randomUUID(),
    type: eventType,
    tenant: run.principal.tenant,
    runId: run.runId,
    occurredAt: run.occurredAt,
    source: 'mcp-front',
    principal: run.principal,
    ...(run.sessionId !== undefined && { sessionId: run.sessionId }),
    data: eventData,
  });
  await appendLedgerEvent(bus, event(type, { ...data, ...OBSERVED, trigger: 'hook' }));
  await appendLedgerEvent(bus, event('observed.completed', { outcome, ...OBSERVED, costUsd: 0 }));
}

/** `prompt` cut to `MAX_INGESTED_PROMPT_CHARS`, never between the two halves of a surrogate pair; `undefined` when it fits. */
function truncatedPrompt(prompt: string): string | undefined {
  if (prompt.length <= MAX_INGESTED_PROMPT_CHARS) return undefined;
  const high = prompt.charCodeAt(MAX_INGESTED_PROMPT_CHARS - 1);
  return prompt.slice(0, high >= 0xd800 && high <= 0xdbff ? MAX_INGESTED_PROMPT_CHARS - 1 : MAX_INGESTED_PROMPT_CHARS);
}

/** The principal a request posts as: its caller's, or with authentication off the anonymous one of `tenant`. */
const posterOf = (res: Response, tenant: string): Principal =>
  (res.locals['caller'] as Principal | undefined) ?? anonymousPrincipal(tenant);

/** How far a prompt's `time` may be before Punk's clock (a hook posts at once; a queue may hold it a while), in ms. */
const MAX_TIME_PAST_MS = 24 * 60 * 60_000;
/** How far a prompt's `time` may be after Punk's clock (clock skew), in ms. */
const MAX_TIME_AHEAD_MS = 5 * 60_000;

/**
 * The run's time: the prompt's `time` when it is within a day before `now` and five minutes after it, else a 400:
 * the ledger lists runs by time, and one dated ahead would stay first forever (nothing on it can be removed).
 * @throws PunkError `InvalidRequest` naming `time`, the bounds and the fix.
 */
function submittedAt(time: string | undefined, now: number): string {
  if (time === undefined) return new Date(now).toISOString();
  const at = Date.parse(time);
  if (at < now - MAX_TIME_PAST_MS || at > now + MAX_TIME_AHEAD_MS)
    throw new PunkError(
      'InvalidRequest',
      `time: ${time} is not within the last 24 hours or at most 5 minutes ahead of Punk's clock (${new Date(now).toISOString()}); leave it out to record when the request arrives`,
    );
  return new Date(at).toISOString();
}

/** Builds the router; mount it at `/api/v1`. */
export function ingestRouter(options: IngestApiOptions): Router {
  const router = express.Router();
  router.post(
    '/ingest/prompt',
    callerGuard(options.auth, options.log),
    express.json({ limit: MAX_BODY_BYTES, strict: true, type: () => true }),
    checkJsonDepth,
    async (req: Request, res: Response, next: NextFunction) => {
      try {
        if (!req.is('application/json'))
          throw new PunkError('UnsupportedMediaType', 'the body must be JSON, with Content-Type: application/json');
        const parsed = promptIngestBodySchema.safeParse(req.body);
        if (!parsed.success) {
          const issue = parsed.error.issues[0]!;
          throw new PunkError('InvalidRequest', `${issue.path.join('.') || 'body'}: ${issue.message}`);
        }
        const body = parsed.data;
        const run: ObservedRun = {
          runId: `prompt-${randomUUID()}`,
          principal: posterOf(res, options.tenant),
          occurredAt: submittedAt(body.time, Date.now()),
          sessionId: body.session_id,
        };
        const truncated = truncatedPrompt(body.prompt);
        await appendObservedRun(
          options.bus,
          run,
          'prompt.observed',
          {
            prompt: truncated ?? body.prompt,
            ...(truncated !== undefined && { truncated: true, promptChars: body.prompt.length }),
            ...(body.cwd !== undefined && { cwd: body.cwd }),
            ...(body.prompt_id !== undefined && { promptId: body.prompt_id }),
            ...(body.hook_event_name !== undefined && { hookEvent: body.hook_event_name }),
          },
          truncated === undefined ? 'ok' : 'truncated',
        );
        res
          .status(201)
          .set('Cache-Control', 'no-store')
          .json({ runId: run.runId, ...(truncated !== undefined && { truncated: true }) });
      } catch (error) {
        next(error);
      }
    },
  );
  router.use('/ingest', (error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const type = (error as { type?: unknown })?.type;
    const [status, code, message] =
      type === 'entity.parse.failed'
        ? [400, 'InvalidRequest', 'body: not valid JSON']
        : type === 'entity.too.large'
          ? [413, 'PayloadTooLarge', `the body is larger than ${String(MAX_BODY_BYTES / 1024 / 1024)} MiB, so its prompt is not recorded`]
          : error instanceof PunkError
            ? [error.code === 'UnsupportedMediaType' ? 415 : statusOf(error), error.code, error.message]
            : [500, 'Internal', 'the request failed inside Punk; see its logs'];
    if (status >= 500) options.log.warn({ err: errorMessage(error) }, 'prompt ingest failed');
    const answer = () => res.status(status).set('Cache-Control', 'no-store').json({ error: { code, message } });
    if (type !== 'entity.too.large') {
      answer();
      return;
    }
    // Too large to read: the run says a prompt was posted and not recorded, so its loss shows.
    const bodyBytes = (error as { length?: unknown }).length;
    const run = { runId: `prompt-${randomUUID()}`, principal: posterOf(res, options.tenant), occurredAt: new Date().toISOString() };
    const data = { reason: message, ...(typeof bodyBytes === 'number' && { bodyBytes }), maxBodyBytes: MAX_BODY_BYTES };
    appendObservedRun(options.bus, run, 'prompt.refused', data, 'refused')
      .catch((failed: unknown) => options.log.warn({ err: errorMessage(failed) }, 'a refused prompt could not be recorded'))
      .finally(answer);
  });
  return router;
}
