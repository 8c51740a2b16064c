import { pino, type Logger, type LoggerOptions } from 'pino';
import { activeLogFields } from './tracing/log-fields.js';

export type { Logger } from 'pino';

/**
 * Creates the structured JSON logger every Punk component uses (pino).
 * One line per event on stdout; `component` names the service or module. A line written while a span is
 * active carries `trace_id`, `span_id` and `trace_flags`, and inside a request also `requestId`, `runId` and
 * `tenant` where the service set them (tracing/log-fields.ts); fields of the line itself win over these.
 *
 * @param component - the service or module name, recorded as `component` on every line
 * @param level - pino level (`trace` … `fatal`, or `silent`)
 */
export function createLogger(component: string, level: LoggerOptions['level'] = 'info'): Logger {
  return pino({
    level,
    base: { component },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    mixin: activeLogFields,
  });
}
