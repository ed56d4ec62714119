-- Latchkey schema v7 (SQLite): signed webhooks (docs/webhooks.md).

-- A team's endpoint. Deliveries follow the team's audit trail in order: the
-- endpoint keeps the last place it handled, so a restart (or another replica)
-- resumes there and nothing committed to the trail is skipped.
CREATE TABLE webhook_endpoint (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenant(id),
    url              TEXT NOT NULL,
    -- Space-separated event types (audit actions).
    events           TEXT NOT NULL,
    description      TEXT,
    -- The Standard Webhooks signing secret (whsec_…): kept, since every
    -- delivery is signed with it; never logged, shown once.
    secret           TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    -- The last audit place handled (delivered, or not an event it follows).
    cursor_seq       BIGINT NOT NULL,
    -- Failed attempts at the event after cursor_seq, and since when.
    attempts         INTEGER NOT NULL DEFAULT 0,
    failing_since    BIGINT,
    next_attempt_at  BIGINT NOT NULL DEFAULT 0,
    -- A replica delivering holds the endpoint until then.
    lease_until      BIGINT NOT NULL DEFAULT 0,
    disabled_at      BIGINT
);
CREATE INDEX webhook_endpoint_tenant ON webhook_endpoint(tenant_id);

-- Every attempt, for the delivery log (the newest are listed).
CREATE TABLE webhook_delivery (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    endpoint_id  TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    event_type   TEXT NOT NULL,
    attempt      INTEGER NOT NULL,
    at           BIGINT NOT NULL,
    delivered    BOOLEAN NOT NULL,
    status       INTEGER,
    error        TEXT
);
CREATE INDEX webhook_delivery_endpoint ON webhook_delivery(endpoint_id, id);
