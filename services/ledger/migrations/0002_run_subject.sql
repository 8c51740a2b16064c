-- Up Migration
-- Who ran each run: the subject of the first event of the run that names a principal.
ALTER TABLE runs ADD COLUMN subject text;
UPDATE runs r SET subject = (
  SELECT e.principal->>'subject' FROM events e
  WHERE e.tenant = r.tenant AND e.run_id = r.run_id AND e.principal IS NOT NULL
  ORDER BY e.tenant_seq LIMIT 1
);

-- Down Migration
ALTER TABLE runs DROP COLUMN subject;
