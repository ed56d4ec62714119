-- Latchkey schema v5 (PostgreSQL): the audit trail, hash-chained per tenant
-- (docs/operations.md, "Tamper evidence"). Each row gets its place in its
-- tenant's chain (1, 2, …) and the SHA-256 of the previous row's hash and its own
-- canonical content. Rows written before this schema are chained when the server
-- starts (their seq is NULL until then).
ALTER TABLE audit_event ADD COLUMN seq BIGINT;
ALTER TABLE audit_event ADD COLUMN hash TEXT;
CREATE UNIQUE INDEX audit_event_chain ON audit_event(tenant_id, seq);

-- Each tenant's last chained row. A writer extends the chain only while holding
-- this row (UPDATE … RETURNING locks it), so writers on any number of replicas
-- take turns and the chain never forks.
CREATE TABLE audit_head (
    tenant_id  TEXT PRIMARY KEY REFERENCES tenant(id),
    seq        BIGINT NOT NULL,
    hash       TEXT NOT NULL
);
