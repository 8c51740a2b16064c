/**
 * An in-process OTLP/HTTP trace receiver for the tracing tests: a node:http server on a free port that accepts
 * `POST /v1/traces` in the OTLP JSON encoding (OTLP specification, "OTLP/HTTP", JSON Protobuf Encoding: ids as
 * lowercase hex) and keeps every span it is sent, flattened with its resource's `service.name`.
 */
import { createServer, type Server } from 'node:http';
import { gunzipSync } from 'node:zlib';

/** One received span. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP `SpanKind`: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP `Status.code`: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  links: Array<{ traceId: string; spanId: string }>;
}

/** OTLP span kinds as numbers. */
export const SpanKinds = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: OtlpAttribute[];
  status?: { code?: number };
  links?: Array<{ traceId: string; spanId: string }>;
}
interface OtlpRequest {
  resourceSpans?: Array<{ resource?: { attributes?: OtlpAttribute[] }; scopeSpans?: Array<{ spans?: OtlpSpan[] }> }>;
}

function valueOf(value: OtlpValue): string | number | boolean {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.boolValue !== undefined) return value.boolValue;
  return value.doubleValue ?? '';
}

function attributesOf(list: OtlpAttribute[] | undefined): Record<string, string | number | boolean> {
  return Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));
}

/** A running receiver. */
export interface OtlpReceiver {
  /** `http://127.0.0.1:<port>`: the value of `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  url: string;
  /** Every span received so far. */
  spans: ReceivedSpan[];
  /** Export requests it refused (not OTLP JSON), with the reason. */
  refused: string[];
  close(): Promise<void>;
}

/** Starts a receiver on a free port of 127.0.0.1. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const refused: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk) => chunks.push(chunk as Buffer));
    req.on('end', () => {
      try {
        if (req.method !== 'POST' || req.url !== '/v1/traces') throw new Error(`${req.method} ${req.url} is not POST /v1/traces`);
        if (!String(req.headers['content-type']).startsWith('application/json'))
          throw new Error(`content-type ${req.headers['content-type']} is not application/json`);
        const raw = Buffer.concat(chunks);
        const body = JSON.parse((req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString('utf8')) as OtlpRequest;
        for (const resourceSpans of body.resourceSpans ?? []) {
          const service = String(attributesOf(resourceSpans.resource?.attributes)['service.name'] ?? '');
          for (const scope of resourceSpans.scopeSpans ?? []) {
            for (const span of scope.spans ?? []) {
              spans.push({
                service,
                traceId: span.traceId,
                spanId: span.spanId,
                parentSpanId: span.parentSpanId ?? '',
                name: span.name,
                kind: span.kind,
                attributes: attributesOf(span.attributes),
                statusCode: span.status?.code ?? 0,
                links: (span.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
              });
            }
          }
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } catch (error) {
        refused.push((error as Error).message);
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ message: (error as Error).message }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    refused,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
