-- Latchkey schema v9: each MCP caller's choice of browser and the session open
-- on it (docs/mcp.md, "Sessions"), kept here so that every replica, and this one
-- after a restart, continues a caller where it left off.
CREATE TABLE mcp_choice (
    tenant_id   TEXT NOT NULL REFERENCES tenant(id),
    -- The API token or delegation the caller authenticated with.
    token_id    TEXT NOT NULL,
    -- The client's Latchkey-Session-Key; empty when it sent none.
    caller_key  TEXT NOT NULL,
    -- The browser picked or first given.
    device_id   TEXT,
    -- The session open on it, until it ends.
    session_id  TEXT,
    -- Set when the session was ended by a decision against the agent (the
    -- person's Stop, an admin, a policy): the end reason's wire name.
    halted      TEXT,
    -- Bumped on every write: a writer names the version it read, so two
    -- replicas never both replace the same choice.
    version     BIGINT NOT NULL,
    -- Unix ms of the last write; rows untouched for 30 days are pruned.
    changed_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, token_id, caller_key)
);
CREATE INDEX mcp_choice_changed ON mcp_choice (changed_at);
