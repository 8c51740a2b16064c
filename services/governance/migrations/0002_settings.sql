-- Up Migration

-- Each tenant's settings (src/settings.ts): one row per tenant and key, the value as JSON, who set it and when.
-- Governance publishes them to bucket PUNK_TENANT_SETTINGS, which every process that appends ledger events watches.
CREATE TABLE governance.settings (
  tenant text NOT NULL,
  key text NOT NULL,
  value jsonb NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  updated_by text NOT NULL,
  PRIMARY KEY (tenant, key)
);
