/**
 * Sets up OpenTelemetry tracing once per process: an AsyncLocalStorage context manager always (log lines read
 * the active context), and, when an OTLP endpoint is configured (settings.ts), a tracer provider with a batch
 * span processor exporting over OTLP/HTTP and the W3C Trace Context and Baggage propagators (provider.ts, loaded
 * only then).
 */
import { propagation, trace } from '@opentelemetry/api';
import type { TracerProvider } from '@opentelemetry/sdk-trace';
import { manageContext } from './context.js';
import { tracingSettings, type TracingSettings } from './settings.js';

/** Tracing of a process as `startTracing` set it up. */
export interface Tracing {
  /** The settings in force; undefined when tracing is off (no provider, no exporter). */
  settings: TracingSettings | undefined;
  /** Exports the spans still buffered and stops the exporter; idempotent. Never throws: an unreachable collector loses those spans. */
  shutdown(): Promise<void>;
}

/** Longest a shutdown waits for the last export, in milliseconds. */
const SHUTDOWN_TIMEOUT_MS = 5_000;

/** The provider this process registered, shared by every `startTracing` of the process, and how many hold it. */
let installed: { provider: TracerProvider; settings: TracingSettings; holders: number } | undefined;

/** Whether this process exports spans (a `startTracing` with tracing on holds the provider); spans are no-ops otherwise. */
export function isTracingOn(): boolean {
  return installed !== undefined;
}

/**
 * Sets up tracing for service `service` (`gateway`, `mcp-front`, `up`, …) from the `OTEL_*` variables of `env`
 * (settings.ts). The first call of a process with tracing on registers the global tracer provider and
 * propagators; later calls share it (in-process tests), and the last `shutdown` flushes and removes it.
 * The OTLP exporter reads its headers, certificates and timeout (`OTEL_EXPORTER_OTLP_*`) from `process.env` itself.
 * @throws PunkError `InvalidConfig` naming a bad `OTEL_*` variable.
 */
export async function startTracing(service: string, env: NodeJS.ProcessEnv = process.env): Promise<Tracing> {
  // Registered once, even with tracing off: log lines and bus hand-offs read the active context.
  manageContext();
  const settings = tracingSettings(service, env);
  if (!settings) return { settings, shutdown: async () => undefined };
  if (!installed) {
    const { register } = await import('./provider.js');
    installed ??= { provider: register(settings), settings, holders: 0 };
  }
  installed.holders++;
  const held = installed;
  let released = false;
  return {
    settings: held.settings,
    shutdown: async () => {
      if (released) return;
      released = true;
      if (--held.holders > 0) return;
      if (installed === held) installed = undefined;
      trace.disable();
      propagation.disable();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        held.provider.shutdown().catch(() => undefined),
        new Promise((resolve) => (timer = setTimeout(resolve, SHUTDOWN_TIMEOUT_MS))),
      ]);
      clearTimeout(timer);
    },
  };
}
