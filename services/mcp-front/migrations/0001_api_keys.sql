-- Up Migration

-- The API keys of `punk up` (src/auth/api-keys.ts), kept across restarts; the cluster keeps them in NATS KV bucket
-- PUNK_API_KEYS instead. Only the SHA-256 of a key is stored, never the key.
CREATE TABLE front.api_keys (
  -- 16 lower-case hex characters: the key's prefix after `pk_`.
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{16}$'),
  tenant text NOT NULL,
  -- The record as `apiKeySchema` (services/lib contracts.ts) declares it, with `sha256` and without the key.
  record jsonb NOT NULL,
  CHECK (record ->> 'id' = id AND record ->> 'tenant' = tenant)
);

-- Down Migration

DROP TABLE front.api_keys;
