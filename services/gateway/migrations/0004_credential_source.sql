-- Up Migration

-- Where a credential came from: 'api' (credentials API) or 'secret' (credentials.apply, the operator copying a
-- Kubernetes Secret for an McpCredential), and for 'secret' the checksum of the Secret content it was made from.
-- An apply with the same checksum changes nothing, so a resync never overwrites a token the gateway refreshed since.
ALTER TABLE gateway.credentials
  ADD COLUMN source text NOT NULL DEFAULT 'api' CHECK (source IN ('api', 'secret')),
  ADD COLUMN source_checksum text,
  ADD CONSTRAINT credentials_source_checksum_check CHECK ((source = 'secret') = (source_checksum IS NOT NULL));

-- Down Migration

ALTER TABLE gateway.credentials DROP CONSTRAINT credentials_source_checksum_check, DROP COLUMN source_checksum, DROP COLUMN source;
