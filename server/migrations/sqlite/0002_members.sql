-- Latchkey schema v2 (SQLite): the people of a team, and whose each browser is.
CREATE TABLE member (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenant(id),
    display_name  TEXT NOT NULL,
    -- Lower case; one member per address among those not removed.
    email         TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    created_at    BIGINT NOT NULL,
    removed_at    BIGINT
);
CREATE INDEX member_tenant ON member(tenant_id);
CREATE UNIQUE INDEX member_email ON member(tenant_id, email) WHERE removed_at IS NULL;

-- The member a pairing link was made for, and so the owner of its device.
ALTER TABLE pairing ADD COLUMN owner_id TEXT REFERENCES member(id);
ALTER TABLE device ADD COLUMN owner_id TEXT REFERENCES member(id);
CREATE INDEX device_owner ON device(tenant_id, owner_id);
-- API tokens gain the person behind them (whose own token it is, or who created
-- it) and the `member` role, a person's own token, which always has one. SQLite
-- cannot change a CHECK in place: the table is rebuilt.
CREATE TABLE api_token_v2 (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenant(id),
    name          TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('admin', 'agent', 'member')),
    token_hash    TEXT NOT NULL UNIQUE,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT,
    revoked_at    BIGINT,
    last_used_at  BIGINT,
    member_id     TEXT REFERENCES member(id),
    CHECK (role <> 'member' OR member_id IS NOT NULL)
);
INSERT INTO api_token_v2 (id, tenant_id, name, role, token_hash, created_at, expires_at, revoked_at, last_used_at)
    SELECT id, tenant_id, name, role, token_hash, created_at, expires_at, revoked_at, last_used_at FROM api_token;
DROP TABLE api_token;
ALTER TABLE api_token_v2 RENAME TO api_token;
CREATE INDEX api_token_tenant ON api_token(tenant_id);
CREATE INDEX api_token_member ON api_token(tenant_id, member_id);
