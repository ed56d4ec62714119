-- Latchkey schema v2 (PostgreSQL): the people of a team, and whose each browser is.
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
-- it) and the `member` role, a person's own token, which always has one.
ALTER TABLE api_token ADD COLUMN member_id TEXT REFERENCES member(id);
ALTER TABLE api_token DROP CONSTRAINT api_token_role_check;
ALTER TABLE api_token ADD CONSTRAINT api_token_role_check
    CHECK (role IN ('admin', 'agent', 'member'));
ALTER TABLE api_token ADD CONSTRAINT api_token_member_role_check
    CHECK (role <> 'member' OR member_id IS NOT NULL);
CREATE INDEX api_token_member ON api_token(tenant_id, member_id);
