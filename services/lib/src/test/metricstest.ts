/**
 * Reads prom-client's default registry in tests, through prom-client's own structured values (no text parsing).
 * Tests compare values before and after what they do: other services may run in the same test process.
 */
import { register, type MetricValueWithName } from 'prom-client';

/**
 * The sum of the samples `sample` of metric family `family` whose labels include every pair of `labels`; `sample`
 * is the family's name (counters, gauges) or one of a histogram's `<family>_count`, `_sum`, `_bucket`. 0 when the
 * series was not observed yet.
 * @throws Error when no family of that name is registered in this process.
 */
export async function registryValue(family: string, labels: Record<string, string>, sample = family): Promise<number> {
  const metric = register.getSingleMetric(family);
  if (!metric) throw new Error(`no metric family ${family} is registered in this process`);
  const values = (await metric.get()).values as MetricValueWithName<string>[];
  return values
    .filter((v) => (v.metricName ?? family) === sample && Object.entries(labels).every(([k, value]) => String(v.labels[k]) === value))
    .reduce((sum, v) => sum + v.value, 0);
}
