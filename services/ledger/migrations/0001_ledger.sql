-- Up Migration

-- Trace events, append-only, one hash chain per tenant (see src/chain.ts).
CREATE TABLE events (
  seq bigserial PRIMARY KEY,                -- global arrival order
  id uuid NOT NULL UNIQUE,                  -- the event id: a redelivered event is stored once
  tenant text NOT NULL,
  tenant_seq bigint NOT NULL CHECK (tenant_seq > 0), -- position in the tenant's chain, from 1
  run_id text NOT NULL,
  type text NOT NULL,
  -- RFC 3339 text exactly as the source sent it: it is hashed, and a timestamptz
  -- round trip would change its spelling (offset, precision) and break verification.
  occurred_at text NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now(),
  source text NOT NULL,
  principal jsonb,
  session_id text,
  server text,
  data jsonb NOT NULL DEFAULT '{}'::jsonb,
  prev_hash char(64) NOT NULL,
  hash char(64) NOT NULL,
  UNIQUE (tenant, tenant_seq)
);
CREATE INDEX events_run_idx ON events (tenant, run_id, tenant_seq);

-- One row per run, kept in the transaction that appends the run's events.
CREATE TABLE runs (
  tenant text NOT NULL,
  run_id text NOT NULL,
  first_at timestamptz NOT NULL,
  last_at timestamptz NOT NULL,
  event_count integer NOT NULL,
  types text[] NOT NULL,
  server text,
  tool text,
  outcome text,
  PRIMARY KEY (tenant, run_id)
);
CREATE INDEX runs_recent_idx ON runs (tenant, last_at DESC, run_id DESC);

-- Stream messages that failed the LedgerEvent contract: kept, never silently dropped.
CREATE TABLE rejected_messages (
  id bigserial PRIMARY KEY,
  msg_id text NOT NULL UNIQUE,              -- the stream msgId: a redelivery is kept once
  stream_seq bigint NOT NULL,
  subject text NOT NULL,
  error text NOT NULL,
  payload text NOT NULL,                    -- the raw message as JSON text (text, not jsonb: any payload fits)
  received_at timestamptz NOT NULL DEFAULT now()
);

-- Down Migration
DROP TABLE rejected_messages;
DROP TABLE runs;
DROP TABLE events;
