/**
 * Checks of an McpWorkflow beyond its schema: the graph (a known `start`, known targets, no cycle, every node
 * reachable) and, once the tenant's catalog is known, its tools (the server and tool exist, the arguments can
 * match the tool's `inputSchema`). Each problem names the workflow, the node and the field.
 */
import type { McpWorkflow, WorkflowNode } from './mcpworkflow.js';

/** One problem of a workflow. */
export interface WorkflowError {
  /** `<namespace>/<name>` of the workflow. */
  workflow: string;
  /** Id of the node, when the problem is in one. */
  node?: string;
  /** Dotted field path from the object (`spec.nodes.2.next`). */
  field: string;
  message: string;
}

/** Renders a workflow error as one line: `McpWorkflow ns/name node x spec.nodes.1.next: message`. */
export function formatWorkflowError(error: WorkflowError): string {
  return `McpWorkflow ${error.workflow}${error.node === undefined ? '' : ` node ${error.node}`} ${error.field}: ${error.message}`;
}

/** The targets of a node: each with the field naming it. */
function edges(node: WorkflowNode, index: number): Array<{ target: string; field: string }> {
  const out: Array<{ target: string; field: string }> = [];
  if (node.kind === 'branch')
    node.config.cases.forEach((c, i) => out.push({ target: c.next, field: `spec.nodes.${index}.config.cases.${i}.next` }));
  if (node.next !== undefined) out.push({ target: node.next, field: `spec.nodes.${index}.next` });
  return out;
}

/**
 * Checks the graph of a (schema-valid) workflow: node ids unique, `spec.start` and every `next` naming a node,
 * no cycle (a run always ends), every node reachable from `start`. Returns every problem found (none: valid).
 */
export function validateWorkflowGraph(workflow: McpWorkflow): WorkflowError[] {
  const name = `${workflow.metadata.namespace ?? 'default'}/${workflow.metadata.name}`;
  const errors: WorkflowError[] = [];
  const { nodes, start } = workflow.spec;
  const index = new Map<string, number>();
  nodes.forEach((node, i) => {
    if (index.has(node.id))
      errors.push({ workflow: name, node: node.id, field: `spec.nodes.${i}.id`, message: `duplicate node id ${node.id}` });
    else index.set(node.id, i);
  });
  if (!index.has(start)) {
    errors.push({ workflow: name, field: 'spec.start', message: `no node has id ${start}; known: ${[...index.keys()].join(', ')}` });
  }
  nodes.forEach((node, i) => {
    for (const edge of edges(node, i))
      if (!index.has(edge.target))
        errors.push({ workflow: name, node: node.id, field: edge.field, message: `no node has id ${edge.target}` });
  });
  if (errors.length > 0) return errors;
  // Depth-first from start: a target on the current path closes a cycle.
  const state = new Map<string, 'open' | 'done'>();
  const visit = (id: string): void => {
    state.set(id, 'open');
    const i = index.get(id)!;
    for (const edge of edges(nodes[i]!, i)) {
      const seen = state.get(edge.target);
      if (seen === 'open')
        errors.push({
          workflow: name,
          node: id,
          field: edge.field,
          message: `going to ${edge.target} makes a cycle: a workflow is a graph without loops, so every run ends`,
        });
      else if (seen === undefined) visit(edge.target);
    }
    state.set(id, 'done');
  };
  visit(start);
  nodes.forEach((node, i) => {
    if (!state.has(node.id) && index.get(node.id) === i)
      errors.push({ workflow: name, node: node.id, field: `spec.nodes.${i}`, message: `not reachable from start node ${start}` });
  });
  return errors;
}

/** A tool as the catalog knows it: its JSON Schema of arguments. */
export interface CatalogTool {
  inputSchema?: Record<string, unknown>;
}

/** The tenant's catalog: McpServer name to its tools by name. */
export type WorkflowCatalog = ReadonlyMap<string, ReadonlyMap<string, CatalogTool>>;

/** The JSON Schema type of a JSON value (`integer` for a whole number). */
function jsonType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

/**
 * Checks the `tool_call` nodes of a workflow against the catalog: the server and its tool exist, every argument the
 * tool requires is given, a literal argument has a type the tool's property declares, and no argument is given that a tool with `additionalProperties: false` does not declare.
 */
export function validateWorkflowCatalog(workflow: McpWorkflow, catalog: WorkflowCatalog): WorkflowError[] {
  const name = `${workflow.metadata.namespace ?? 'default'}/${workflow.metadata.name}`;
  const errors: WorkflowError[] = [];
  workflow.spec.nodes.forEach((node, i) => {
    if (node.kind !== 'tool_call') return;
    const at = `spec.nodes.${i}.config`;
    const tools = catalog.get(node.config.server);
    if (tools === undefined) {
      errors.push({
        workflow: name,
        node: node.id,
        field: `${at}.server`,
        message: `no McpServer ${node.config.server} in this namespace`,
      });
      return;
    }
    const tool = tools.get(node.config.tool);
    if (tool === undefined) {
      errors.push({
        workflow: name,
        node: node.id,
        field: `${at}.tool`,
        message: `McpServer ${node.config.server} has no tool ${node.config.tool}; it has: ${[...tools.keys()].join(', ') || 'none'}`,
      });
      return;
    }
    const schema = tool.inputSchema ?? {};
    const properties = (schema.properties ?? {}) as Record<string, unknown>;
    const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
    for (const key of required)
      if (!Object.hasOwn(node.config.args, key))
        errors.push({ workflow: name, node: node.id, field: `${at}.args`, message: `tool ${node.config.tool} requires argument ${key}` });
    for (const [key, arg] of Object.entries(node.config.args)) {
      const declared = (properties[key] as { type?: unknown } | undefined)?.type;
      if (arg.kind !== 'literal' || declared === undefined) continue;
      const types = Array.isArray(declared) ? (declared as string[]) : [declared as string];
      const actual = jsonType(arg.value);
      if (!types.includes(actual) && !(actual === 'integer' && types.includes('number')))
        errors.push({
          workflow: name,
          node: node.id,
          field: `${at}.args.${key}.value`,
          message: `tool ${node.config.tool} takes ${types.join(' or ')} for ${key}, not ${actual}`,
        });
    }
    if (schema.additionalProperties === false)
      for (const key of Object.keys(node.config.args))
        if (!Object.hasOwn(properties, key))
          errors.push({
            workflow: name,
            node: node.id,
            field: `${at}.args.${key}`,
            message: `tool ${node.config.tool} takes no argument ${key}; it takes: ${Object.keys(properties).join(', ') || 'none'}`,
          });
  });
  return errors;
}

/**
 * The catalog of one namespace from the gateway's server catalogs (`ServerCatalog`: namespace, name, listed tools). A
 * tool withheld as `awaiting-review` (its changed definition hidden by pinning until an admin accepts it) is in the
 * catalog without a schema: the workflow stays ready and its run fails closed at that node naming the review, as a
 * call does, instead of the workflow vanishing as if the tool did not exist.
 */
export function workflowCatalogOf(
  servers: ReadonlyArray<{
    namespace: string;
    name: string;
    tools: ReadonlyArray<{ name: string; inputSchema?: Record<string, unknown> }>;
    withheldTools?: ReadonlyArray<{ name: string; reason: string }>;
  }>,
  namespace: string,
): WorkflowCatalog {
  return new Map(
    servers
      .filter((server) => server.namespace === namespace)
      .map((server) => [
        server.name,
        new Map<string, CatalogTool>([
          ...(server.withheldTools ?? []).filter((tool) => tool.reason === 'awaiting-review').map((tool) => [tool.name, {}] as const),
          ...server.tools.map((tool) => [tool.name, tool.inputSchema === undefined ? {} : { inputSchema: tool.inputSchema }] as const),
        ]),
      ]),
  );
}
