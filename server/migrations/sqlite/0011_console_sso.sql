-- Latchkey schema v11: console sign-ins through single sign-on (docs/console.md,
-- "Single sign-on"). Such a sign-in has no API token behind it, only the member
-- the identity provider vouched for: `token_hash` becomes optional, and a row
-- names a token or a member. SQLite cannot relax NOT NULL in place: the table is
-- rebuilt, and the sign-ins it holds are kept.
CREATE TABLE console_session_v11 (
    -- SHA-256 of the cookie's secret: the cookie itself is never stored.
    id_hash     TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenant(id),
    -- SHA-256 of the API token signed in with, for a token sign-in: every
    -- request checks that the token is still live and reads its role.
    token_hash  TEXT,
    -- The person signed in: a member's token's member, or the member single
    -- sign-on vouched for (whose role every request reads).
    member_id   TEXT,
    created_at  BIGINT NOT NULL,
    -- Unix ms after which the sign-in is void; expired rows are pruned.
    expires_at  BIGINT NOT NULL,
    CHECK (token_hash IS NOT NULL OR member_id IS NOT NULL)
);
INSERT INTO console_session_v11 (id_hash, tenant_id, token_hash, member_id, created_at, expires_at)
    SELECT id_hash, tenant_id, token_hash, member_id, created_at, expires_at FROM console_session;
DROP TABLE console_session;
ALTER TABLE console_session_v11 RENAME TO console_session;
CREATE INDEX console_session_member ON console_session (tenant_id, member_id);
CREATE INDEX console_session_expires ON console_session (expires_at);
