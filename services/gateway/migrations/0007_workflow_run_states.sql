-- Up Migration

-- A workflow run's row outlives its end for a day (src/workflows/run-table.ts), with the state it ended in, so that a
-- cancellation of a run that already ended is answered with that state (409) on whichever replica it reaches.
ALTER TABLE gateway.workflow_runs
  ADD COLUMN state text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'completed', 'failed', 'cancelled', 'interrupted')),
  ADD COLUMN ended_at timestamptz;
CREATE INDEX workflow_runs_ended ON gateway.workflow_runs (ended_at);
