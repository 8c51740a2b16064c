/**
 * Reads a Prometheus text exposition (format 0.0.4, "Exposition formats" of the Prometheus docs) into metric
 * families and samples, and fetches one from a `/metrics` endpoint, for tests that check what a process exports.
 */

/** One sample line: `name{label="value",…} value`. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** One metric family: its `# TYPE` and `# HELP`, and its samples (a histogram's `_bucket`, `_sum`, `_count` lines included). */
export interface MetricFamily {
  name: string;
  type: string;
  help: string;
  samples: Sample[];
}

/** The families of an exposition, by name. */
export type Exposition = Map<string, MetricFamily>;

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$/;

/** Parses `{a="x",b="y\"z"}`'s inside, honouring the escapes `\\`, `\"` and `\n`. @throws Error naming the line when it is malformed. */
function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const eq = text.indexOf('=', i);
    if (eq < 0 || text[eq + 1] !== '"') throw new Error(`malformed labels in exposition line: ${line}`);
    const name = text.slice(i, eq).trim();
    let value = '';
    let j = eq + 2;
    for (; j < text.length && text[j] !== '"'; j++) {
      if (text[j] === '\\') {
        j++;
        value += text[j] === 'n' ? '\n' : text[j];
      } else value += text[j];
    }
    if (j >= text.length) throw new Error(`unterminated label value in exposition line: ${line}`);
    labels[name] = value;
    i = j + 1;
    if (text[i] === ',') i++;
  }
  return labels;
}

/** The family a sample belongs to: its own name, or the histogram or summary it is a `_bucket`, `_sum` or `_count` of. */
function familyOf(families: Exposition, name: string): MetricFamily | undefined {
  if (families.has(name)) return families.get(name);
  const base = name.replace(/_(bucket|sum|count)$/, '');
  return families.get(base);
}

/**
 * Parses an exposition. Every sample must follow a `# TYPE` line of its family.
 * @throws Error naming the offending line when a line is neither a comment, blank, nor a well-formed sample of a declared family.
 */
export function parseExposition(text: string): Exposition {
  const families: Exposition = new Map();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const meta = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
    if (meta) {
      const [, what, name, rest] = meta as unknown as [string, string, string, string];
      const family = families.get(name) ?? { name, type: 'untyped', help: '', samples: [] };
      if (what === 'TYPE') family.type = rest;
      else family.help = rest;
      families.set(name, family);
      continue;
    }
    if (line.startsWith('#')) continue;
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`malformed exposition line: ${line}`);
    const [, name, labels, value] = match as unknown as [string, string, string | undefined, string];
    const family = familyOf(families, name);
    if (!family) throw new Error(`sample of an undeclared family: ${line}`);
    family.samples.push({ name, labels: labels ? parseLabels(labels, line) : {}, value: Number(value) });
  }
  return families;
}

/**
 * `GET <url>/metrics`, checked for status 200 and the text exposition's content type, parsed.
 * @throws Error naming the URL and what was wrong.
 */
export async function scrape(url: string): Promise<Exposition> {
  const res = await fetch(`${url}/metrics`);
  const body = await res.text();
  if (res.status !== 200) throw new Error(`GET ${url}/metrics answered ${res.status}: ${body}`);
  const type = res.headers.get('content-type') ?? '';
  if (!type.startsWith('text/plain') || !type.includes('version=0.0.4'))
    throw new Error(`GET ${url}/metrics has content type ${type}, not the text exposition format`);
  return parseExposition(body);
}

/**
 * The value of the sample `name` whose labels include every pair of `labels` (0 when there is none: a series not
 * yet observed). @throws Error when several samples match (the test must name more labels).
 */
export function valueOf(exposition: Exposition, name: string, labels: Record<string, string> = {}): number {
  const family = familyOf(exposition, name);
  const matching = (family?.samples ?? []).filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (matching.length > 1) throw new Error(`${matching.length} samples of ${name} match ${JSON.stringify(labels)}: name more labels`);
  return matching[0]?.value ?? 0;
}

/** The sum of the samples `name` whose labels include every pair of `labels`. */
export function sumOf(exposition: Exposition, name: string, labels: Record<string, string> = {}): number {
  const family = familyOf(exposition, name);
  return (family?.samples ?? [])
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}
