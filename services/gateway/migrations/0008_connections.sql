-- Up Migration

-- Per-user connections (spec.auth.perUser, src/connections): each principal's tokens for one server are an oauth2
-- credential of source 'connection', named by (principal, server) and never listed or referenced as cred:<id>.
-- needs_reconnect: its refresh token was refused (revoked, expired); the principal must connect again.
ALTER TABLE gateway.credentials DROP CONSTRAINT credentials_source_check;
ALTER TABLE gateway.credentials
  ADD CONSTRAINT credentials_source_check CHECK (source IN ('api', 'secret', 'connection')),
  ADD COLUMN principal text,
  ADD COLUMN server text,
  ADD COLUMN needs_reconnect boolean NOT NULL DEFAULT false,
  ADD CONSTRAINT credentials_connection_check CHECK ((source = 'connection') = (principal IS NOT NULL AND server IS NOT NULL));
CREATE INDEX credentials_connections_idx ON gateway.credentials (tenant, principal) WHERE source = 'connection';

-- A connect flow started and not yet come back (POST /api/v1/connections/...): its `state` (RFC 6749 §10.12) is
-- single-use (deleted when the callback reads it) and bound to the principal and to the browser (a hash of the
-- cookie set when it started); its PKCE code_verifier (RFC 7636) stays here, never in the browser.
CREATE TABLE gateway.connection_states (
  state text PRIMARY KEY,
  tenant text NOT NULL,
  server text NOT NULL,
  principal text NOT NULL,
  browser_hash text NOT NULL,
  code_verifier text NOT NULL,
  redirect_uri text NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX connection_states_expiry ON gateway.connection_states (expires_at);

-- Down Migration

DROP TABLE gateway.connection_states;
DELETE FROM gateway.credentials WHERE source = 'connection';
ALTER TABLE gateway.credentials DROP CONSTRAINT credentials_connection_check, DROP COLUMN needs_reconnect, DROP COLUMN server,
  DROP COLUMN principal, DROP CONSTRAINT credentials_source_check;
ALTER TABLE gateway.credentials ADD CONSTRAINT credentials_source_check CHECK (source IN ('api', 'secret'));
