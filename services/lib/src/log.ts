import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

/**
 * Creates the structured JSON logger every Punk component uses (pino).
 * One line per event on stdout; `component` names the service or module.
 *
 * @param component - the service or module name, recorded as `component` on every line
 * @param level - pino level (`trace` … `fatal`, or `silent`)
 */
export function createLogger(component: string, level: LoggerOptions['level'] = 'info'): Logger {
  return pino({
    level,
    base: { component },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: label => ({ level: label }) },
  });
}
