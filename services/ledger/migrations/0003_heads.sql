-- Up Migration

-- The head of each tenant's chain (its last position and hash), written in the transaction that extends the
-- chain and read by the next one: verify compares the chain's last event with it, so a deleted tail is seen.
CREATE TABLE heads (
  tenant text PRIMARY KEY,
  tenant_seq bigint NOT NULL CHECK (tenant_seq > 0),
  hash char(64) NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO heads (tenant, tenant_seq, hash)
  SELECT DISTINCT ON (tenant) tenant, tenant_seq, hash FROM events ORDER BY tenant, tenant_seq DESC;

-- How far verification has checked each tenant's chain: every event up to tenant_seq, the last one with this hash
-- (the next verification resumes after it), and where the sweep that checks the verified events again is.
CREATE TABLE verified (
  tenant text PRIMARY KEY,
  tenant_seq bigint NOT NULL CHECK (tenant_seq >= 0),
  hash char(64) NOT NULL,
  verified_at timestamptz NOT NULL DEFAULT now(),
  sweep_seq bigint NOT NULL DEFAULT 0 CHECK (sweep_seq >= 0),
  sweep_hash char(64) NOT NULL DEFAULT repeat('0', 64),
  swept_at timestamptz                      -- when the sweep last went over every verified event
);

-- Down Migration
DROP TABLE verified;
DROP TABLE heads;
