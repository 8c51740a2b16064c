/**
 * The Workflows view: the tenant's workflows (ready or not, with what keeps them from being ready); one chosen is
 * run from a form generated from its input JSON Schema, and the run's node-by-node trace is read from the ledger
 * (asked again every {@link POLL_MS} until the run ended); a running run can be cancelled from its trace.
 */
import '../views.css';
import { useState } from 'preact/hooks';
import { getRun } from '../api.js';
import { eventsOf, json, outcomeClass, POLL_MS, usePolling } from '../api-runs.js';
import { cancelWorkflowRun, listWorkflows, runWorkflow, traceOf, type WorkflowRunReply, type WorkflowView } from '../api-workflows.js';
import { ErrorMessage, messageOf, Page, useLoad } from '../components.js';
import { Link } from '../router.js';
import { SchemaFields, useSchemaTexts, valuesOf, type JsonSchema } from '../schema-form.js';

/** The node-by-node trace of run `runId` of workflow `workflow`, with a button cancelling it while it runs. */
function RunTrace(props: { workflow: string; runId: string }) {
  const run = useLoad(() => getRun(props.runId), [props.runId]);
  const trace = run.data ? traceOf(eventsOf(run.data)) : undefined;
  usePolling(trace?.outcome === undefined ? run : { reload: async () => undefined }, POLL_MS);
  const [cancelling, setCancelling] = useState(false);
  const [cancelError, setCancelError] = useState<string | undefined>(undefined);
  const cancel = async () => {
    setCancelError(undefined);
    setCancelling(true);
    try {
      await cancelWorkflowRun(props.workflow, props.runId);
      await run.reload();
    } catch (caught) {
      // A run that ended meanwhile: the message names the state it ended in.
      setCancelError(messageOf(caught));
    } finally {
      setCancelling(false);
    }
  };
  if (!trace) return run.error ? <ErrorMessage message={run.error} /> : <p class="muted">Waiting for the run on the ledger…</p>;
  return (
    <section aria-label="Run trace" class="trace">
      <h3>
        Trace of run{' '}
        <Link to={`runs/${encodeURIComponent(props.runId)}`} class="mono">
          {props.runId}
        </Link>{' '}
        {trace.outcome ? (
          <span class={`badge ${outcomeClass(trace.outcome)}`}>{trace.outcome}</span>
        ) : (
          <>
            <span class="badge warn">running</span>{' '}
            <button type="button" class="quiet" disabled={cancelling} onClick={() => void cancel()}>
              {cancelling ? 'Cancelling…' : 'Cancel run'}
            </button>
          </>
        )}
      </h3>
      <ErrorMessage message={cancelError} />
      <ol class="plain" aria-label="Nodes">
        {trace.nodes.map((node, index) => (
          <li key={`${node.node}-${String(index)}`} class={`node ${node.isError ? 'bad' : node.durationMs !== undefined ? 'ok' : ''}`}>
            <strong class="mono">{node.node}</strong> <span class="muted">{node.kind}</span>
            {node.server && node.tool && (
              <span class="mono">
                {' '}
                {node.server}/{node.tool}
              </span>
            )}
            {node.durationMs !== undefined ? ` · ${String(node.durationMs)} ms` : ' · running'}
            {node.isError && ' · error'}
            {node.next && ` → ${node.next}`}
          </li>
        ))}
      </ol>
      {trace.error && <p class="error">{trace.error}</p>}
      {trace.result !== undefined && (
        <>
          <h3>Result</h3>
          <pre aria-label="Workflow result">{json(trace.result)}</pre>
        </>
      )}
    </section>
  );
}

/** One workflow: what it is, its form, and the trace of the run it started. */
function WorkflowPanel(props: { workflow: WorkflowView }) {
  const { workflow } = props;
  const schema = workflow.inputSchema as JsonSchema;
  const [texts, setTexts] = useSchemaTexts(schema, workflow.name);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);
  const [reply, setReply] = useState<WorkflowRunReply | undefined>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    let args: Record<string, unknown>;
    try {
      args = valuesOf(schema, texts);
    } catch (caught) {
      setError(messageOf(caught));
      return;
    }
    setBusy(true);
    try {
      setReply(await runWorkflow(workflow.name, args));
    } catch (caught) {
      setError(messageOf(caught));
    } finally {
      setBusy(false);
    }
  };
  return (
    <section aria-labelledby="workflow-title" class="box">
      <h2 id="workflow-title">
        <span class="mono">{workflow.name}</span>{' '}
        <span class={`badge ${workflow.ready ? 'ok' : 'bad'}`}>{workflow.ready ? 'ready' : 'not ready'}</span>
      </h2>
      <p>{workflow.description}</p>
      <p class="muted">
        Tool <span class="mono">{workflow.tool}</span> on /mcp; side-effect level{' '}
        {workflow.sideEffectLevel ?? 'unknown (a tool it calls is not in the catalog)'}
        {workflow.readOnly ? ' (read-only)' : ''}.
      </p>
      {workflow.errors.length > 0 && (
        <ul class="error" aria-label="Why it is not ready">
          {workflow.errors.map((text) => (
            <li key={text}>{text}</li>
          ))}
        </ul>
      )}
      <form noValidate aria-label={`Run ${workflow.name}`} onSubmit={(event) => void submit(event)}>
        <SchemaFields schema={schema} texts={texts} onChange={setTexts} idPrefix={`wf-${workflow.name}`} />
        <ErrorMessage message={error} />
        <div class="actions decide">
          <button type="submit" disabled={busy || !workflow.ready}>
            {busy ? 'Running…' : 'Run workflow'}
          </button>
        </div>
      </form>
      {reply?.error && (
        <p class="error" role="alert">
          {/* The message names the node already ("node read: …"). */}
          The run failed: {reply.error.message}
        </p>
      )}
      {reply && <RunTrace key={reply.runId} workflow={workflow.name} runId={reply.runId} />}
    </section>
  );
}

/** The Workflows view. */
export function WorkflowsPage() {
  const workflows = useLoad(listWorkflows, []);
  const [chosen, setChosen] = useState<string | undefined>(undefined);
  const list = workflows.data ?? [];
  const selected = list.find((workflow) => workflow.name === chosen) ?? list[0];
  return (
    <Page
      title="Workflows"
      actions={
        <button type="button" class="quiet" onClick={() => void workflows.reload()}>
          Refresh
        </button>
      }
    >
      <ErrorMessage message={workflows.error} />
      {workflows.data === undefined ? (
        !workflows.error && <p class="muted">Loading workflows…</p>
      ) : list.length === 0 ? (
        <p class="muted">No workflows: add an McpWorkflow manifest (docs/workflows.md).</p>
      ) : (
        <div class="split">
          <nav aria-label="Workflows">
            <ul class="plain">
              {list.map((workflow) => (
                <li key={workflow.name}>
                  <button
                    type="button"
                    class={workflow.name === selected?.name ? '' : 'quiet'}
                    aria-pressed={workflow.name === selected?.name}
                    onClick={() => setChosen(workflow.name)}
                  >
                    {workflow.name}
                  </button>{' '}
                  {!workflow.ready && <span class="badge bad">not ready</span>}
                </li>
              ))}
            </ul>
          </nav>
          {selected && <WorkflowPanel key={selected.name} workflow={selected} />}
        </div>
      )}
    </Page>
  );
}
