-- Up Migration

-- Workflow runs in progress (src/workflows/run-table.ts): one row per running run, renewed by the replica running it.
-- A row not renewed for a while belongs to a replica that died: another replica (or this one at its next start)
-- removes it and records the run as failed, outcome interrupted.
CREATE TABLE gateway.workflow_runs (
  tenant text NOT NULL,
  run_id text NOT NULL,
  workflow text NOT NULL,
  -- The replica running it (its instance id).
  instance text NOT NULL,
  -- The principal of the run's events: the agent workflow-engine acting for the caller.
  principal jsonb NOT NULL,
  started_at timestamptz NOT NULL DEFAULT now(),
  renewed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, run_id)
);
CREATE INDEX workflow_runs_renewed ON gateway.workflow_runs (renewed_at);
