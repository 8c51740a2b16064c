/**
 * The tracing settings of a process, read from the standard OpenTelemetry environment variables
 * (OpenTelemetry specification, "Environment Variable Specification" and "OTLP Exporter Configuration").
 * Tracing is off unless an OTLP endpoint is set.
 */
import { PunkError } from '../errors.js';

/** OTLP over HTTP encodings Punk exports with (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`). */
export type OtlpHttpProtocol = 'http/protobuf' | 'http/json';

/** Samplers of `OTEL_TRACES_SAMPLER` (the specification's known values, minus the vendor-specific ones). */
export type SamplerName =
  'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';

/** What `startTracing` sets up; absent when tracing is off. */
export interface TracingSettings {
  /** `service.name` of the resource: `OTEL_SERVICE_NAME`, else `punk-<service>`. */
  serviceName: string;
  /** Full URL spans are POSTed to: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as is, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`. */
  tracesUrl: string;
  protocol: OtlpHttpProtocol;
  sampler: SamplerName;
  /** `OTEL_TRACES_SAMPLER_ARG` of the ratio samplers, from 0 to 1 (default 1). */
  samplerRatio: number;
  /** Batch span processor settings (`OTEL_BSP_*`), in milliseconds and spans; undefined ones keep the SDK defaults. */
  batch: { scheduledDelayMillis?: number; exportTimeoutMillis?: number; maxQueueSize?: number; maxExportBatchSize?: number };
}

const PROTOCOLS: readonly OtlpHttpProtocol[] = ['http/protobuf', 'http/json'];
const SAMPLERS: readonly SamplerName[] = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];

/** A set, non-blank variable, trimmed. */
function read(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

function invalid(variable: string, message: string): PunkError {
  return new PunkError('InvalidConfig', `invalid configuration: ${variable} ${message}`, { variable });
}

function url(variable: string, value: string): string {
  try {
    const parsed = new URL(value);
    if (parsed.protocol === 'http:' || parsed.protocol === 'https:') return parsed.toString();
  } catch {
    // reported below
  }
  // An endpoint may carry credentials (user:password@): they never reach an error message or a log.
  const shown = value.replace(/\/\/[^/?#]*@/, '//<redacted>@');
  throw invalid(variable, `must be an http(s) URL (got ${JSON.stringify(shown)})`);
}

function wholeNumber(env: NodeJS.ProcessEnv, variable: string): number | undefined {
  const value = read(env, variable);
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw invalid(variable, `must be a positive integer (got ${JSON.stringify(value)})`);
  return n;
}

/**
 * Reads the tracing settings of service `service` from `env`; undefined when neither
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` nor `OTEL_EXPORTER_OTLP_ENDPOINT` is set, or `OTEL_SDK_DISABLED=true`.
 * `OTEL_TRACES_EXPORTER=none` turns tracing off as well.
 * @throws PunkError `InvalidConfig` naming the variable: an endpoint that is no http(s) URL, a protocol other
 *   than `http/protobuf` or `http/json` (`grpc` is not offered), an unknown sampler, a ratio outside 0..1, a
 *   non-positive `OTEL_BSP_*` number.
 */
export function tracingSettings(service: string, env: NodeJS.ProcessEnv): TracingSettings | undefined {
  if (read(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return undefined;
  if (read(env, 'OTEL_TRACES_EXPORTER')?.toLowerCase() === 'none') return undefined;
  const specific = read(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const general = read(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (specific === undefined && general === undefined) return undefined;
  const tracesUrl =
    specific !== undefined
      ? url('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', specific)
      : `${url('OTEL_EXPORTER_OTLP_ENDPOINT', general!).replace(/\/$/, '')}/v1/traces`;

  const protocolVariable =
    read(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') !== undefined ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = read(env, protocolVariable) ?? 'http/protobuf';
  if (!(PROTOCOLS as readonly string[]).includes(protocol))
    throw invalid(protocolVariable, `must be http/protobuf or http/json (got ${JSON.stringify(protocol)})`);

  const sampler = read(env, 'OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on';
  if (!(SAMPLERS as readonly string[]).includes(sampler))
    throw invalid('OTEL_TRACES_SAMPLER', `must be one of ${SAMPLERS.join(', ')} (got ${JSON.stringify(sampler)})`);
  const ratioText = read(env, 'OTEL_TRACES_SAMPLER_ARG');
  const samplerRatio = ratioText === undefined ? 1 : Number(ratioText);
  if (!(samplerRatio >= 0 && samplerRatio <= 1))
    throw invalid('OTEL_TRACES_SAMPLER_ARG', `must be a number from 0 to 1 (got ${JSON.stringify(ratioText)})`);

  const batch: TracingSettings['batch'] = {};
  const delay = wholeNumber(env, 'OTEL_BSP_SCHEDULE_DELAY');
  const timeout = wholeNumber(env, 'OTEL_BSP_EXPORT_TIMEOUT');
  const queue = wholeNumber(env, 'OTEL_BSP_MAX_QUEUE_SIZE');
  const size = wholeNumber(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE');
  if (delay !== undefined) batch.scheduledDelayMillis = delay;
  if (timeout !== undefined) batch.exportTimeoutMillis = timeout;
  if (queue !== undefined) batch.maxQueueSize = queue;
  if (size !== undefined) batch.maxExportBatchSize = size;

  return {
    serviceName: read(env, 'OTEL_SERVICE_NAME') ?? `punk-${service}`,
    tracesUrl,
    protocol: protocol as OtlpHttpProtocol,
    sampler: sampler as SamplerName,
    samplerRatio,
    batch,
  };
}
