/**
 * Reconciles one McpWorkflow: checks it and publishes it to bucket `PUNK_MCP_WORKFLOWS` with lib's
 * `workflowEntryOf` and `publishWorkflow` (the path `punk up` takes for its manifests' workflows); status
 * Ready/Degraded with `observedGeneration`.
 *
 * Checks, each problem naming the workflow, the node and the field (`McpWorkflow ns/name node x spec.nodes.1.next: …`):
 * - the schema and the graph (`workflowEntryOf`: unknown node ids, cycles, unreachable nodes, a missing start), the
 *   ones the CRD's own validation cannot express: Degraded `InvalidSpec`;
 * - the catalog of the namespace (`validateWorkflowCatalog`): an McpServer that does not exist (`ServerNotFound`), a
 *   tool its last listing does not have (`ToolNotFound`), arguments that cannot match the tool's `inputSchema`
 *   (`ArgumentMismatch`). Tool names come from the listing this operator made (ToolListings, with the schemas) or,
 *   before it made one, from the McpServer's `status.tools` (names only: the arguments are checked once the
 *   server is listed, which queues the workflow again). Meanwhile a workflow whose status already describes its
 *   generation keeps its status and entry (they were decided with the schemas, by this process or the previous
 *   leader), so a new leader neither flaps them nor serves arguments it refused; a new generation is published
 *   with Ready=Unknown `ToolsNotListed` naming the nodes whose arguments wait. A server never listed (no
 *   `status.tools`) cannot be checked: the workflow is published with Ready=Unknown `ToolsNotListed` naming the
 *   server and the nodes.
 *
 * An invalid workflow is withdrawn from the bucket, unlike a policy (whose last valid generation stays): a run of
 * an earlier generation is not what the object declares any more, and a workflow whose server or tool is gone
 * would fail at that node after the earlier nodes' calls already had their effects. Withdrawing refuses the run
 * before any node runs; it removes a capability, never a protection. A deleted workflow's entry is removed here
 * (the reconcile finds no object) and by the manager's orphan sweep.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  buckets,
  formatWorkflowError,
  publishWorkflow,
  validateWorkflowCatalog,
  withdrawWorkflow,
  workflowEntryOf,
  type CatalogTool,
  type KvStore,
  type McpWorkflow,
  type WorkflowError,
} from '@punk/lib/controller';
import type { ReconcileContext } from './context.js';
import { conditionsOf, degraded, healthy, setConditions, undetermined, writeStatus, type ConditionDecision } from './status.js';
import type { ToolListings } from './tool-listings.js';

/** Longest condition message (the limit of `metav1.Condition.message`), in characters. */
const MAX_MESSAGE = 32_768;

/** The McpServers a workflow object's `tool_call` nodes name (read loosely: the object may be invalid). */
export function workflowServerNames(workflow: KubernetesObject): string[] {
  const nodes = (workflow as { spec?: { nodes?: unknown } }).spec?.nodes;
  if (!Array.isArray(nodes)) return [];
  const names = nodes
    .filter((node) => (node as { kind?: unknown } | null)?.kind === 'tool_call')
    .map((node) => (node as { config?: { server?: unknown } }).config?.server)
    .filter((name): name is string => typeof name === 'string');
  return [...new Set(names)];
}

/** The tools of an McpServer's `status.tools` by name (names only), or undefined when it has none. */
function statusTools(server: KubernetesObject): ReadonlyMap<string, CatalogTool> | undefined {
  const tools = (server as { status?: { tools?: unknown } }).status?.tools;
  if (!Array.isArray(tools)) return undefined;
  return new Map((tools as { name: string }[]).map((tool) => [tool.name, {}]));
}

/** The reason of a catalog problem, from the field it names. */
function catalogReason(error: WorkflowError): string {
  if (error.field.endsWith('.server')) return 'ServerNotFound';
  if (error.field.endsWith('.tool')) return 'ToolNotFound';
  return 'ArgumentMismatch';
}

/** The problems as one message within {@link MAX_MESSAGE}: each formatted, `; `-separated, then `suffix`. */
function problemsMessage(errors: readonly WorkflowError[], suffix: string): string {
  const lines = errors.map(formatWorkflowError);
  for (let kept = lines.length; kept > 0; kept--) {
    const more = kept < lines.length ? `; and ${lines.length - kept} more` : '';
    const message = `${lines.slice(0, kept).join('; ')}${more}; ${suffix}`;
    if (message.length <= MAX_MESSAGE) return message;
  }
  return `${lines[0]!.slice(0, MAX_MESSAGE - suffix.length - 40)}…; and ${lines.length - 1} more; ${suffix}`;
}

/** Reconciles McpWorkflow objects of the cache into the workflows bucket. */
export class McpWorkflowReconciler {
  constructor(
    private readonly context: ReconcileContext,
    private readonly bucket: KvStore,
    private readonly listings: ToolListings,
  ) {}

  /** Brings the bucket entry and status of workflow `namespace/name` in line with the object and the catalog. */
  async reconcile(namespace: string, name: string): Promise<void> {
    const object = this.context.caches.McpWorkflow.get(name, namespace) as
      (KubernetesObject & { spec?: unknown; status?: unknown }) | undefined;
    if (!object || object.metadata?.deletionTimestamp) {
      await withdrawWorkflow(this.bucket, namespace, name);
      return;
    }
    const generation = object.metadata?.generation ?? 0;
    const parsed = workflowEntryOf({
      apiVersion: object.apiVersion,
      kind: object.kind,
      metadata: { name, namespace, generation },
      spec: object.spec,
    });
    const previous = conditionsOf(object);
    const ready = previous.find((condition) => condition.type === 'Ready');
    const described = (object.status as { observedGeneration?: unknown } | undefined)?.observedGeneration === generation;
    const settled = described && ready ? (ready.status === 'False' ? 'refused' : 'served') : undefined;
    const decision = parsed.success
      ? await this.serve(parsed.data, generation, settled)
      : await this.refuse(namespace, name, 'InvalidSpec', parsed.errors);
    if (!decision) return;
    const metadata = { name, namespace, uid: object.metadata?.uid, resourceVersion: object.metadata?.resourceVersion };
    const status = {
      observedGeneration: generation,
      conditions: setConditions(previous, decision, this.context.now(), generation),
    };
    await writeStatus(this.context.clients, this.context.recorder, { kind: 'McpWorkflow', metadata, status: object.status }, status);
  }

  /**
   * Checks a workflow whose schema and graph are valid against the catalog; publishes it, or withdraws it.
   * @param settled what the status says of this generation, when it describes it: `served` (Ready True or
   *   Unknown) or `refused`; a check this process cannot make yet then leaves the decision as it is.
   * @returns the conditions, or undefined to keep the status as it is (the entry made to match it).
   */
  private async serve(
    workflow: McpWorkflow,
    generation: number,
    settled: 'served' | 'refused' | undefined,
  ): Promise<ConditionDecision[] | undefined> {
    const namespace = workflow.metadata.namespace!;
    const catalog = new Map<string, ReadonlyMap<string, CatalogTool>>();
    const unlisted = new Set<string>(); // no listing at all: its nodes are not checked
    const namesOnly = new Set<string>(); // status.tools only: tool names checked, arguments not
    for (const server of workflowServerNames(workflow as KubernetesObject)) {
      const object = this.context.caches.McpServer.get(server, namespace);
      if (!object || object.metadata?.deletionTimestamp) continue; // not in the catalog: ServerNotFound
      const listed = this.listings.get(namespace, server);
      const tools = listed ?? statusTools(object);
      if (!tools) unlisted.add(server);
      else {
        catalog.set(server, tools);
        if (!listed) namesOnly.add(server);
      }
    }
    const serverOf = new Map(workflow.spec.nodes.flatMap((node) => (node.kind === 'tool_call' ? [[node.id, node.config.server]] : [])));
    const errors = validateWorkflowCatalog(workflow, catalog).filter((error) => !unlisted.has(serverOf.get(error.node ?? '') ?? ''));
    if (errors.length > 0) return this.refuse(namespace, workflow.metadata.name, catalogReason(errors[0]!), errors);
    // Just after this process started leading, the status of an unchanged workflow was decided with the schemas
    // (by this process or the previous leader): it stands until the listing arrives and queues the workflow again.
    if (settled && unlisted.size === 0 && namesOnly.size > 0) {
      if (settled === 'served') await publishWorkflow(this.bucket, workflow);
      else await withdrawWorkflow(this.bucket, namespace, workflow.metadata.name);
      return undefined;
    }
    await publishWorkflow(this.bucket, workflow);
    const published = `generation ${generation} (${workflow.spec.nodes.length} nodes) is published to bucket ${buckets.mcpWorkflows.name}, which every gateway replica watches`;
    if (unlisted.size === 0 && namesOnly.size === 0) return healthy('Published', published);
    const nodesOf = (servers: Set<string>) => [...serverOf].filter(([, server]) => servers.has(server)).map(([node]) => node);
    const pending: string[] = [];
    if (unlisted.size > 0)
      pending.push(
        `the tools of McpServer ${[...unlisted].join(', ')} have not been listed yet (no status.tools), so nodes ${nodesOf(unlisted).join(', ')} are checked once they are`,
      );
    if (namesOnly.size > 0)
      pending.push(
        `the arguments of nodes ${nodesOf(namesOnly).join(', ')} are checked once this operator has listed the tools of McpServer ${[...namesOnly].join(', ')} (it knows their names only, from status.tools)`,
      );
    return undetermined('ToolsNotListed', `${published}; ${pending.join('; ')}`);
  }

  /** Withdraws the entry of workflow `namespace/name`; the conditions name every problem. */
  private async refuse(namespace: string, name: string, reason: string, errors: readonly WorkflowError[]): Promise<ConditionDecision[]> {
    await withdrawWorkflow(this.bucket, namespace, name);
    return degraded(
      reason,
      problemsMessage(errors, `the workflow is not served (not in bucket ${buckets.mcpWorkflows.name}) until this is fixed`),
    );
  }
}
