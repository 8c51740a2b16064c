/**
 * The McpWorkflow part of the manifest loader: a document of kind McpWorkflow is checked as the operator checks an
 * object (`workflowEntryOf`: its schema and its graph); a valid one is kept, every problem becomes a manifest error
 * naming the field, and the workflow and node in its message.
 */
import type { ManifestError } from './loader.js';
import type { McpWorkflow } from './mcpworkflow.js';
import type { WorkflowError } from './workflow-graph.js';
import { workflowEntryOf } from '../workflow/publish.js';

/** A valid McpWorkflow and the file it came from. */
export interface LoadedWorkflow {
  workflow: McpWorkflow;
  file: string;
  document: number;
}

/**
 * Parses one McpWorkflow document (`object` is its YAML as JavaScript); the namespace defaults to
 * `defaultNamespace`. Returns the workflow, or the errors that refuse it.
 */
export function parseWorkflowDocument(
  object: Record<string, unknown>,
  file: string,
  document: number,
  defaultNamespace: string,
): { workflow: LoadedWorkflow } | { errors: ManifestError[] } {
  const metadata = (typeof object.metadata === 'object' && object.metadata !== null ? object.metadata : {}) as Record<string, unknown>;
  const parsed = workflowEntryOf({
    ...object,
    metadata: { ...metadata, namespace: typeof metadata.namespace === 'string' ? metadata.namespace : defaultNamespace } as {
      name: string;
      namespace: string;
    },
  });
  if (!parsed.success) return { errors: parsed.errors.map((error) => workflowManifestError({ file, document }, error)) };
  return { workflow: { workflow: parsed.data, file, document } };
}

/** A workflow's problem as a manifest error of the document it came from (`McpWorkflow ns/name node x: message`). */
export function workflowManifestError(where: { file: string; document: number }, error: WorkflowError): ManifestError {
  return {
    ...where,
    field: error.field,
    message: `McpWorkflow ${error.workflow}${error.node === undefined ? '' : ` node ${error.node}`}: ${error.message}`,
  };
}
