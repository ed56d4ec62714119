-- Latchkey schema v10: web console sign-ins (docs/console.md, "Signing in").
-- Kept here, not in the cookie, so that signing out, removing the member or
-- revoking the token ends a sign-in at once, on every replica.
CREATE TABLE console_session (
    -- SHA-256 of the cookie's secret: the cookie itself is never stored.
    id_hash     TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenant(id),
    -- SHA-256 of the API token signed in with (as api_token.token_hash): every
    -- request checks that the token is still live and reads its role.
    token_hash  TEXT NOT NULL,
    -- The person signed in, when the token is a member's.
    member_id   TEXT,
    created_at  BIGINT NOT NULL,
    -- Unix ms after which the sign-in is void; expired rows are pruned.
    expires_at  BIGINT NOT NULL
);
CREATE INDEX console_session_member ON console_session (tenant_id, member_id);
CREATE INDEX console_session_expires ON console_session (expires_at);
