-- Latchkey schema v6 (SQLite): signed checkpoints and retention for the audit
-- trail (docs/operations.md, "Tamper evidence" and "Retention"), and expiry
-- notices for devices.

-- The gateway's audit keys (Ed25519), gateway-wide and never dropped: every
-- checkpoint a key signed stays verifiable for as long as the rows are kept.
CREATE TABLE audit_key (
    kid          TEXT PRIMARY KEY,
    -- PKCS#8, base64; NULL for a key the operator keeps outside the store
    -- (audit.signing_key_file), whose public half is recorded here.
    private_key  TEXT,
    -- The raw public key, base64url (a JWK's `x`).
    public_key   TEXT NOT NULL,
    created_at   BIGINT NOT NULL
);

-- The place of the tenant's last checkpoint row: a checkpoint is due when the
-- head has moved past it.
ALTER TABLE audit_head ADD COLUMN checkpoint_seq BIGINT NOT NULL DEFAULT 0;

-- The last expiry notice written for the device's current grant (7: within 7
-- days, 1: within 1 day); a renewal clears it. Claimed in the transaction that
-- writes the notice's audit row, so no notice is written twice.
ALTER TABLE device ADD COLUMN expiry_notice INTEGER;

-- How long the team keeps its audit rows; NULL: the gateway's default.
ALTER TABLE tenant ADD COLUMN audit_retention_days INTEGER;

-- Checkpoints by place: found without walking the tenant's other rows.
CREATE INDEX audit_event_checkpoint ON audit_event(tenant_id, seq)
    WHERE action = 'audit.checkpoint';
