/**
 * The bridge's log: JSON lines on stderr (pino), with the fields and level names of every other Punk
 * component. stderr, because a child's stderr is forwarded there too, one log line per child line, and a pod's
 * log shows both streams. The bridge does not import @punk/lib at run time (that would carry NATS and Postgres
 * into the binary copied into every server pod), so this mirrors its `createLogger`.
 */
import { pino, type Logger } from 'pino';

export type { Logger } from 'pino';

/**
 * A logger writing synchronously to file descriptor 2.
 * @param component - recorded as `component` on every line (`bridge`, `egress-proxy`)
 */
export function createBridgeLogger(component: string, level: pino.LevelWithSilent = 'info'): Logger {
  return pino(
    { level, base: { component }, timestamp: pino.stdTimeFunctions.isoTime, formatters: { level: (label) => ({ level: label }) } },
    pino.destination({ dest: 2, sync: true }),
  );
}
