/**
 * Prompt ingest, mounted at `/api/v1` by the front: `POST /ingest/prompt` records a prompt typed in Claude Code
 * (its UserPromptSubmit hook input, `promptIngestBodySchema`) as a completed observed run on the ledger: a
 * `prompt.observed` event then an `observed.completed` one (provider `claude-code`, model `external`, route `live`,
 * cost 0), chained like every event (appended to the ledger stream with `appendLedgerEvent`). Answers 201 `{ runId }`.
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

/** Largest body, with a 100,000-character prompt of multi-byte characters and the hook's other fields. */
const MAX_BODY = '512kb';

/** What an observed prompt's run is, as the seed names it. */
const OBSERVED = { provider: 'claude-code', model: 'external', route: 'live' } as const;

/** Builds the router; mount it at `/api/v1`. */
export function ingestRouter(options: IngestApiOptions): Router {
  const router = express.Router();
  router.post(
    '/ingest/prompt',
    callerGuard(options.auth, options.log),
    express.json({ limit: MAX_BODY, strict: true, type: () => true }),
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
        const principal = (res.locals['caller'] as Principal | undefined) ?? anonymousPrincipal(options.tenant);
        const runId = `prompt-${randomUUID()}`;
        const occurredAt = new Date(body.time ?? Date.now()).toISOString();
        const event = (type: LedgerEvent['type'], data: Record<string, unknown>): LedgerEvent => ({
          id: randomUUID(),
          type,
          tenant: principal.tenant,
          runId,
          occurredAt,
          source: 'mcp-front',
          principal,
          ...(body.session_id !== undefined && { sessionId: body.session_id }),
          data,
        });
        await appendLedgerEvent(
          options.bus,
          event('prompt.observed', {
            prompt: body.prompt,
            ...(body.cwd !== undefined && { cwd: body.cwd }),
            ...(body.prompt_id !== undefined && { promptId: body.prompt_id }),
            ...(body.hook_event_name !== undefined && { hookEvent: body.hook_event_name }),
            ...OBSERVED,
            trigger: 'hook',
          }),
        );
        await appendLedgerEvent(options.bus, event('observed.completed', { outcome: 'ok', ...OBSERVED, costUsd: 0 }));
        res.status(201).set('Cache-Control', 'no-store').json({ runId });
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
          ? [413, 'PayloadTooLarge', `the body is larger than ${MAX_BODY}`]
          : error instanceof PunkError
            ? [error.code === 'UnsupportedMediaType' ? 415 : statusOf(error), error.code, error.message]
            : [500, 'Internal', 'the request failed inside Punk; see its logs'];
    if (status >= 500) options.log.warn({ err: errorMessage(error) }, 'prompt ingest failed');
    res.status(status).set('Cache-Control', 'no-store').json({ error: { code, message } });
  });
  return router;
}
