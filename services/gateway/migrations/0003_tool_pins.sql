-- Up Migration

-- Tool-definition pinning (src/pinning): the definition of each tool of each server as first seen (or as last
-- accepted), and a changed definition waiting for an admin's acceptance.
CREATE TABLE gateway.tool_pins (
  tenant text NOT NULL,
  server text NOT NULL,
  tool text NOT NULL,
  -- SHA-256 (hex) of the canonical JSON of the pinned definition (src/pinning/fingerprint.ts).
  fingerprint text NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
  -- The pinned fields of the definition (name, title, description, inputSchema, outputSchema, annotations).
  definition jsonb NOT NULL,
  pinned_at timestamptz NOT NULL DEFAULT now(),
  -- 'first-listing', 'serve-policy' (re-pinned automatically under policy serve), or the accepting admin's subject.
  pinned_by text NOT NULL,
  -- A listed definition that differs from the pinned one, recorded once (with its ledger event) until accepted or reverted.
  pending_fingerprint text CHECK (pending_fingerprint ~ '^[0-9a-f]{64}$'),
  pending_definition jsonb,
  -- The policy in force when the change was recorded: 'hide' or 'approval'.
  pending_policy text CHECK (pending_policy IN ('hide', 'approval')),
  changed_at timestamptz,
  -- Incremented by every change of the row: updates are conditional on it (optimistic concurrency between replicas),
  -- and it makes the ledger event id of a change deterministic, so replicas recording the same change write one event.
  revision integer NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant, server, tool),
  CHECK ((pending_fingerprint IS NULL) = (pending_definition IS NULL)),
  CHECK ((pending_fingerprint IS NULL) = (pending_policy IS NULL)),
  CHECK ((pending_fingerprint IS NULL) = (changed_at IS NULL))
);

-- Down Migration

DROP TABLE gateway.tool_pins;
