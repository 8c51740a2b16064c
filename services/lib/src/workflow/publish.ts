/**
 * How an McpWorkflow object reaches bucket `PUNK_MCP_WORKFLOWS`, the one path the operator (from the cluster's
 * objects) and `punk up` (from its manifests directory) both take: the object is validated with `mcpWorkflowSchema`
 * and `validateWorkflowGraph`, and stored whole under `kvKey(namespace, name)` (the namespace is the tenant), written
 * only when it differs from the entry there, so an unchanged workflow makes no new generation.
 */
import { isDeepStrictEqual } from 'node:util';
import type { KvStore } from '../bus/bus.js';
import { kvKey } from '../contracts.js';
import { mcpWorkflowSchema, type McpWorkflow } from '../spec/mcpworkflow.js';
import { validateWorkflowGraph, type WorkflowError } from '../spec/workflow-graph.js';

/** What an McpWorkflow object is published from: its kind, name, namespace and generation, and its spec as written. */
export interface WorkflowObject {
  apiVersion?: unknown;
  kind?: unknown;
  metadata: { name: string; namespace: string; generation?: number | undefined };
  spec?: unknown;
}

/** A checked workflow, or every problem that refuses it (each naming the workflow, the node and the field). */
export type WorkflowEntryResult = { success: true; data: McpWorkflow } | { success: false; errors: WorkflowError[] };

/**
 * `object` as the entry it is published as: its schema (`mcpWorkflowSchema`) then its graph (`validateWorkflowGraph`)
 * checked. A schema problem inside `spec.nodes.<i>` names that node's id when the object gives one.
 */
export function workflowEntryOf(object: WorkflowObject): WorkflowEntryResult {
  const workflow = `${object.metadata.namespace}/${object.metadata.name}`;
  const parsed = mcpWorkflowSchema.safeParse({
    apiVersion: object.apiVersion,
    kind: object.kind,
    metadata: object.metadata,
    spec: object.spec,
  });
  if (!parsed.success) {
    const nodes = (object.spec as { nodes?: unknown } | undefined)?.nodes;
    return {
      success: false,
      errors: parsed.error.issues.map((issue) => {
        const [top, list, index] = issue.path;
        const id =
          top === 'spec' && list === 'nodes' && typeof index === 'number' && Array.isArray(nodes)
            ? (nodes[index] as { id?: unknown } | undefined)?.id
            : undefined;
        return {
          workflow,
          ...(typeof id === 'string' && { node: id }),
          field: issue.path.length > 0 ? issue.path.join('.') : '(object)',
          message: issue.message,
        };
      }),
    };
  }
  const errors = validateWorkflowGraph(parsed.data);
  return errors.length > 0 ? { success: false, errors } : { success: true, data: parsed.data };
}

/**
 * Publishes a valid workflow (from {@link workflowEntryOf}) under `kvKey(namespace, name)` unless the bucket already
 * holds it.
 * @returns whether it wrote.
 * @throws PunkError `BusUnavailable` from the bucket.
 */
export async function publishWorkflow(bucket: KvStore, workflow: McpWorkflow): Promise<boolean> {
  const key = kvKey(workflow.metadata.namespace!, workflow.metadata.name);
  const entry = await bucket.get(key);
  if (entry && isDeepStrictEqual(entry.value, JSON.parse(JSON.stringify(workflow)))) return false;
  await bucket.put(key, workflow);
  return true;
}

/**
 * Removes workflow `namespace/name` from the bucket (a no-op when absent).
 * @throws PunkError `BusUnavailable` from the bucket.
 */
export async function withdrawWorkflow(bucket: KvStore, namespace: string, name: string): Promise<void> {
  await bucket.delete(kvKey(namespace, name));
}
