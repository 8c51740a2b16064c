/**
 * The runs, in the gateway's table `gateway.workflow_runs` (Postgres, PGlite in `punk up`): a run has a row in state
 * `running` while it runs, renewed every {@link RENEW_MS} by the replica running it, and keeps it for
 * {@link ENDED_KEPT_MS} after its end with the state it ended in (so a cancellation of an ended run names that state
 * on every replica). Every replica sweeps the table every {@link RENEW_MS} (and once at start): a running row not
 * renewed for {@link STALE_MS} belongs to a replica that died, so the sweep marks it `interrupted` (one
 * `UPDATE … RETURNING`: exactly one replica takes each) and records the run as failed with outcome `interrupted`. A
 * run is thus never left running forever, whichever replica or restart notices first.
 */
import { createHash } from 'node:crypto';
import { appendLedgerEvent, errorMessage, principalSchema, type Bus, type Database, type Logger, type Principal } from '@punk/lib';

/** How often a running run's row is renewed and the table swept, in milliseconds. */
export const RENEW_MS = 5_000;
/** Age of a row's last renewal past which its run counts as interrupted, in milliseconds. */
export const STALE_MS = 20_000;
/** How long an ended run's row (its state) is kept, in milliseconds: a day. */
export const ENDED_KEPT_MS = 24 * 60 * 60_000;

/** States of a run's row: running, or how it ended. */
export type RunState = 'running' | 'completed' | 'failed' | 'cancelled' | 'interrupted';

/** A run in progress. */
export interface RunRow {
  tenant: string;
  runId: string;
  workflow: string;
  /** The principal of the run's events (the agent acting for the caller): its interruption is recorded under it. */
  principal: Principal;
}

/** The id of a run's `workflow.failed` of an interruption: the same on every replica, so the ledger keeps it once. */
function interruptedEventId(tenant: string, runId: string): string {
  const hex = createHash('sha256').update(`${tenant}\n${runId}\ninterrupted`).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** The running runs of this replica, kept in the table, and the sweep of everyone's. */
export class RunTable {
  private readonly running = new Map<string, RunRow>();
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> = Promise.resolve();

  constructor(private readonly deps: { db: Database; bus: Bus; log: Logger; instanceId: string; staleMs?: number; renewMs?: number }) {}

  /** Sweeps once, then renews and sweeps every {@link RENEW_MS}. */
  async start(): Promise<void> {
    await this.sweep();
    this.timer = setInterval(() => {
      this.sweeping = this.sweeping.then(() => this.tick());
    }, this.deps.renewMs ?? RENEW_MS);
    this.timer.unref();
  }

  /**
   * Records a run as running here.
   * @throws PunkError `DatabaseUnavailable`.
   */
  async add(row: RunRow): Promise<void> {
    await this.deps.db.query(
      'INSERT INTO gateway.workflow_runs (tenant, run_id, workflow, instance, principal) VALUES ($1, $2, $3, $4, $5)',
      [row.tenant, row.runId, row.workflow, this.deps.instanceId, JSON.stringify(row.principal)],
    );
    this.running.set(`${row.tenant}\n${row.runId}`, row);
  }

  /**
   * Records that a run ended (its end is on the ledger) in `state`; a failure is logged (the sweep would then record
   * it interrupted).
   */
  async end(tenant: string, runId: string, state: Exclude<RunState, 'running' | 'interrupted'>): Promise<void> {
    this.running.delete(`${tenant}\n${runId}`);
    try {
      await this.deps.db.query(
        "UPDATE gateway.workflow_runs SET state = $3, ended_at = now() WHERE tenant = $1 AND run_id = $2 AND state = 'running'",
        [tenant, runId, state],
      );
    } catch (error) {
      this.deps.log.warn({ runId, err: errorMessage(error) }, 'could not record the end of a workflow run in gateway.workflow_runs');
    }
  }

  /**
   * The workflow and state of run `runId` of `tenant` (any replica's), undefined when the table has none (never
   * started, or ended more than {@link ENDED_KEPT_MS} ago).
   * @throws PunkError `DatabaseUnavailable`.
   */
  async find(tenant: string, runId: string): Promise<{ workflow: string; state: RunState } | undefined> {
    const { rows } = await this.deps.db.query<{ workflow: string; state: RunState }>(
      'SELECT workflow, state FROM gateway.workflow_runs WHERE tenant = $1 AND run_id = $2',
      [tenant, runId],
    );
    return rows[0];
  }

  /** Stops renewing and sweeping (this replica's rows then age: another replica records their runs interrupted). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.sweeping;
  }

  private async tick(): Promise<void> {
    try {
      if (this.running.size > 0)
        await this.deps.db.query("UPDATE gateway.workflow_runs SET renewed_at = now() WHERE instance = $1 AND state = 'running'", [
          this.deps.instanceId,
        ]);
      await this.sweep();
    } catch (error) {
      this.deps.log.warn({ err: errorMessage(error) }, 'could not renew or sweep the workflow runs');
    }
  }

  /** Records every stale run as interrupted, and forgets the runs ended more than {@link ENDED_KEPT_MS} ago. */
  private async sweep(): Promise<void> {
    await this.deps.db.query('DELETE FROM gateway.workflow_runs WHERE ended_at < now() - make_interval(secs => $1::double precision)', [
      ENDED_KEPT_MS / 1000,
    ]);
    const { rows } = await this.deps.db.query<{ tenant: string; run_id: string; workflow: string; principal: unknown; started_at: Date }>(
      `UPDATE gateway.workflow_runs SET state = 'interrupted', ended_at = now()
       WHERE state = 'running' AND renewed_at < now() - make_interval(secs => $1::double precision)
       RETURNING tenant, run_id, workflow, principal, started_at`,
      [(this.deps.staleMs ?? STALE_MS) / 1000],
    );
    for (const row of rows) {
      const message = `the run was interrupted: the gateway replica running it stopped (its row in gateway.workflow_runs was not renewed)`;
      this.deps.log.warn(
        { tenant: row.tenant, runId: row.run_id, workflow: row.workflow },
        `workflow run ${row.run_id} of ${row.workflow}: ${message}`,
      );
      const principal = principalSchema.safeParse(typeof row.principal === 'string' ? JSON.parse(row.principal) : row.principal);
      await appendLedgerEvent(this.deps.bus, {
        id: interruptedEventId(row.tenant, row.run_id),
        type: 'workflow.failed',
        tenant: row.tenant,
        runId: row.run_id,
        occurredAt: new Date().toISOString(),
        source: 'gateway',
        ...(principal.success && { principal: principal.data }),
        data: {
          workflow: row.workflow,
          outcome: 'interrupted',
          code: 'WorkflowInterrupted',
          error: message,
          durationMs: Date.now() - new Date(row.started_at).getTime(),
        },
      });
    }
  }
}
