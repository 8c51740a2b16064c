/**
 * The OpenTelemetry SDK part of tracing: the tracer provider with its sampler, batch span processor and OTLP/HTTP
 * exporter, and the W3C propagators. Apart from setup.ts and loaded by it only when tracing is on, so a process with
 * tracing off (every `punk up` without `OTEL_EXPORTER_OTLP_ENDPOINT`) loads none of the SDK's modules.
 */
import { propagation, trace } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, detectResources, resourceAttributesEnvDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
} from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { TracingSettings } from './settings.js';

function samplerOf(settings: TracingSettings): Sampler {
  const ratio = new TraceIdRatioBasedSampler(settings.samplerRatio);
  switch (settings.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio;
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
  }
}

/** Registers the global tracer provider and propagators of `settings`; returns the provider. */
export function register(settings: TracingSettings): TracerProvider {
  const exporter =
    settings.protocol === 'http/json'
      ? new OtlpJsonExporter({ url: settings.tracesUrl })
      : new OtlpProtobufExporter({ url: settings.tracesUrl });
  // OTEL_RESOURCE_ATTRIBUTES adds to the resource; the service name is Punk's unless OTEL_SERVICE_NAME says otherwise.
  const resource = defaultResource()
    .merge(detectResources({ detectors: [resourceAttributesEnvDetector] }))
    .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: settings.serviceName }));
  const provider = new TracerProvider({
    resource,
    sampler: samplerOf(settings),
    spanProcessors: [new BatchSpanProcessor({ exporter, ...settings.batch })],
  });
  trace.setGlobalTracerProvider(provider);
  propagation.setGlobalPropagator(new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }));
  return provider;
}
