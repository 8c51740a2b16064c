-- Up Migration

-- The last `servers.test` of each managed server (a manifest's or an McpServer custom resource's), one row per
-- (tenant, name), so its "Last test" outlives a restart of `punk up --data` and is the same on every gateway
-- replica. `definition` is the SHA-256 of the server's spec when it was tested: a row whose server has changed
-- since is not shown (it described the old definition), as a registration's update forgets its last test.
CREATE TABLE gateway.managed_tests (
  tenant text NOT NULL,
  name text NOT NULL,
  definition text NOT NULL,
  status text NOT NULL CHECK (status IN ('ok', 'error')),
  tool_count integer NOT NULL,
  last_error text,
  latency_ms integer NOT NULL,
  tested_at timestamptz NOT NULL,
  -- The tool listing of the last successful test of this definition, and its time.
  tools jsonb,
  listed_at timestamptz,
  PRIMARY KEY (tenant, name)
);

-- Down Migration

DROP TABLE gateway.managed_tests;
