/**
 * The AsyncLocalStorage context manager of OpenTelemetry, registered once per process whether tracing is on or off:
 * log lines (log-fields.ts) and bus hand-offs (propagation.ts) read the active context. Apart from setup.ts so a
 * process with tracing off loads no exporter or SDK (setup.ts loads provider.ts only when tracing is on).
 */
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';

let contextManaged = false;

/** Registers the global context manager, once per process (later calls do nothing). */
export function manageContext(): void {
  if (!contextManaged) contextManaged = context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
}
