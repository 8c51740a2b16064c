-- Up Migration
-- What started each run: the `data.trigger` of the first event of the run that states one (`hook` for a prompt
-- posted by Claude Code's hook); runs whose events state none have none.
ALTER TABLE runs ADD COLUMN trigger text;
UPDATE runs r SET trigger = (
  SELECT e.data->>'trigger' FROM events e
  WHERE e.tenant = r.tenant AND e.run_id = r.run_id AND jsonb_typeof(e.data->'trigger') = 'string'
  ORDER BY e.tenant_seq LIMIT 1
);

-- Down Migration
ALTER TABLE runs DROP COLUMN trigger;
