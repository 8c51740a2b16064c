/**
 * The tenants' McpWorkflow custom resources, as the operator and `punk up` publish them in bucket
 * `PUNK_MCP_WORKFLOWS` (whole objects by `kvKey(tenant, name)`, publish.ts). The gateway watches the bucket and
 * serves each tenant's workflows (tools on `/mcp`, `/api/v1/workflows`, runs). An entry that is not a valid
 * McpWorkflow (schema or graph) is logged with its key and the bad field, and the workflow it names is no longer
 * served: a workflow runs only as checked.
 */
import type { Bus, BusSubscription } from '../bus/bus.js';
import { buckets, kvKey } from '../contracts.js';
import type { Logger } from '../log.js';
import type { McpWorkflow } from '../spec/mcpworkflow.js';
import { formatWorkflowError } from '../spec/workflow-graph.js';
import { workflowEntryOf } from './publish.js';

/** The served workflows of every tenant, kept current by a watch of bucket `PUNK_MCP_WORKFLOWS`. */
export interface TenantWorkflows {
  /** The workflows of `tenant`, by name order. */
  of(tenant: string): McpWorkflow[];
  /** Workflow `name` of `tenant`, or undefined. */
  get(tenant: string, name: string): McpWorkflow | undefined;
  /** Calls `listener` with the tenant after each change of its workflows; returns the function that removes it. */
  onChange(listener: (tenant: string) => void): () => void;
  /** Stops the watch. */
  stop(): Promise<void>;
}

/**
 * Watches bucket `PUNK_MCP_WORKFLOWS`; resolves once the workflows it held at the start are loaded.
 * @throws PunkError `BusUnavailable` when the bucket cannot be opened or watched.
 */
export async function watchWorkflows(bus: Bus, log: Logger): Promise<TenantWorkflows> {
  const kv = await bus.keyValue(buckets.mcpWorkflows);
  /** Valid workflows by bucket key. */
  const workflows = new Map<string, McpWorkflow>();
  const listeners = new Set<(tenant: string) => void>();
  const changed = (tenant: string) => {
    for (const listener of listeners) listener(tenant);
  };
  const subscription: BusSubscription = await kv.watch((change) => {
    const previous = workflows.get(change.key);
    if (change.operation === 'delete') {
      if (!previous) return;
      workflows.delete(change.key);
      log.info(
        { key: change.key, workflow: previous.metadata.name, tenant: previous.metadata.namespace },
        `McpWorkflow ${previous.metadata.namespace}/${previous.metadata.name} removed`,
      );
      changed(previous.metadata.namespace!);
      return;
    }
    const workflow = validWorkflow(change.key, change.value, log);
    if (!workflow) {
      if (!previous) return;
      workflows.delete(change.key);
      changed(previous.metadata.namespace!);
      return;
    }
    workflows.set(change.key, workflow);
    log.info(
      { key: change.key, workflow: workflow.metadata.name, tenant: workflow.metadata.namespace },
      `McpWorkflow ${workflow.metadata.namespace}/${workflow.metadata.name} served`,
    );
    changed(workflow.metadata.namespace!);
  });
  return {
    of: (tenant) =>
      [...workflows.values()].filter((w) => w.metadata.namespace === tenant).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name)),
    get: (tenant, name) => workflows.get(kvKey(tenant, name)),
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stop: () => subscription.unsubscribe(),
  };
}

/** The McpWorkflow of a bucket entry, or `undefined` (logged with the key and the field) when it is not a valid one. */
function validWorkflow(key: string, value: unknown, log: Logger): McpWorkflow | undefined {
  const refuse = (field: string, message: string): McpWorkflow | undefined => {
    log.error({ bucket: buckets.mcpWorkflows.name, key, field }, `McpWorkflow entry ${key} is skipped (not served): ${field}: ${message}`);
    return undefined;
  };
  const metadata = (value as { metadata?: { name?: unknown; namespace?: unknown } } | null)?.metadata;
  if (typeof metadata?.namespace !== 'string' || typeof metadata.name !== 'string')
    return refuse('metadata', 'needs a name and a namespace (the tenant)');
  if (kvKey(metadata.namespace, metadata.name) !== key)
    return refuse(
      'metadata',
      `names ${metadata.namespace}/${metadata.name}, whose key is ${kvKey(metadata.namespace, metadata.name)}, not ${key}`,
    );
  const entry = value as { apiVersion?: unknown; kind?: unknown; spec?: unknown; metadata: { name: string; namespace: string } };
  const parsed = workflowEntryOf(entry);
  if (!parsed.success) {
    const first = parsed.errors[0]!;
    return refuse(first.field, formatWorkflowError(first));
  }
  return parsed.data;
}
