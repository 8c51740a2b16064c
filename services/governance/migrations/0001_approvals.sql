-- Up Migration

-- Approval requests (src/approvals.ts): one per call that a policy rule made approval_required, bound to the exact
-- call (principal, server, tool, SHA-256 of the RFC 8785 canonical arguments) and usable once before it expires.
CREATE TABLE governance.approvals (
  id uuid PRIMARY KEY,
  tenant text NOT NULL,
  subject text NOT NULL,
  groups jsonb NOT NULL DEFAULT '[]',
  server text NOT NULL,
  tool text NOT NULL,
  arguments_digest text NOT NULL CHECK (arguments_digest ~ '^[0-9a-f]{64}$'),
  rule text NOT NULL,
  generation integer NOT NULL,
  -- Who may decide, as the rule said when the request was made: { subjects, groups } (both empty: admins).
  approvers jsonb NOT NULL,
  allow_self boolean NOT NULL,
  run_id text NOT NULL,
  session_id text,
  state text NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'consumed')),
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  decided_by text,
  decided_at timestamptz,
  reason text,
  consumed_at timestamptz,
  consumed_run_id text
);

-- A call's claim looks for its own open requests.
CREATE INDEX approvals_call ON governance.approvals (tenant, subject, server, tool, arguments_digest) WHERE state IN ('pending', 'approved');
CREATE INDEX approvals_listing ON governance.approvals (tenant, created_at DESC);

-- Down Migration

DROP TABLE governance.approvals;
