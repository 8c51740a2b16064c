-- Up Migration

-- Servers registered through the registry API (`/api/v1/mcp/servers`), one row per (tenant, name).
-- `body` is the registration as the admin sent it (validated); `cred:<id>` values are stored as given
-- and resolved at connect time. The status columns hold the outcome of the last `servers.test`; `tools`
-- is the last tool listing (of a test or of a pooled connection), `listed_at` its time.
CREATE TABLE gateway.registrations (
  tenant text NOT NULL,
  name text NOT NULL,
  body jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  created_by text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  updated_by text NOT NULL,
  status text NOT NULL DEFAULT 'unknown' CHECK (status IN ('unknown', 'ok', 'error')),
  tool_count integer,
  last_error text,
  latency_ms integer,
  tested_at timestamptz,
  tools jsonb,
  listed_at timestamptz,
  PRIMARY KEY (tenant, name)
);

-- Down Migration

DROP TABLE gateway.registrations;
