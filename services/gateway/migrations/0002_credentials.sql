-- Up Migration

-- The credentials vault (src/credentials): one row per credential, its keys encrypted together with
-- AES-256-GCM. Only key names, type, expiry and refresh health are stored in the clear.
CREATE TABLE gateway.credentials (
  tenant text NOT NULL,
  id text NOT NULL,
  type text NOT NULL CHECK (type IN ('static', 'oauth2')),
  key_names text[] NOT NULL,
  -- The encrypted JSON object of keys and values; the AAD binds it to (tenant, id).
  key_id text NOT NULL,
  iv bytea NOT NULL,
  ciphertext bytea NOT NULL,
  tag bytea NOT NULL,
  -- oauth2: expiry of the stored access token (a copy of its expires_at key), last refresh, and why the last one failed.
  expires_at timestamptz,
  last_refresh_at timestamptz,
  refresh_error text,
  -- One refresh at a time per credential across gateway replicas: claimed by an atomic UPDATE when free or expired.
  refresh_lease_holder text,
  refresh_lease_until timestamptz,
  -- Bumped when the keys or the refresh outcome change (not by a re-encryption): waiters on a lease see a refresh land.
  version bigint NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  created_by text NOT NULL,
  PRIMARY KEY (tenant, id)
);
-- Re-encryption finds the records not under the current key.
CREATE INDEX credentials_key_id_idx ON gateway.credentials (key_id);

-- Down Migration

DROP TABLE gateway.credentials;
