-- Up Migration
-- A workflow run is filed under `punk.workflow` (the server that lists workflows), not under the server of its
-- first node, which the runs written before this took from their first event that named one.
UPDATE runs SET server = 'punk.workflow' WHERE 'workflow.started' = ANY(types);

-- Down Migration
UPDATE runs r SET server = (
  SELECT e.server FROM events e
  WHERE e.tenant = r.tenant AND e.run_id = r.run_id AND e.server IS NOT NULL
  ORDER BY e.tenant_seq LIMIT 1
) WHERE 'workflow.started' = ANY(types);
