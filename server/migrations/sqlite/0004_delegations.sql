-- Latchkey schema v4 (SQLite): delegation tokens (docs/delegation.md).
-- The gateway's signing keys (Ed25519), gateway-wide: the public half is served at
-- /.well-known/jwks.json; a key is kept for verifying until every token it signed
-- has expired.
CREATE TABLE signing_key (
    kid          TEXT PRIMARY KEY,
    algorithm    TEXT NOT NULL,
    -- PKCS#8, base64.
    private_key  TEXT NOT NULL,
    -- The raw public key, base64url (a JWK's `x`).
    public_key   TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    -- No longer signs from then on (a newer key does); still verifies.
    retired_at   BIGINT
);

-- Every delegation minted: never the token itself, only what it carries, so it
-- can be listed and revoked by id.
CREATE TABLE delegation (
    id             TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenant(id),
    -- The API token at the root of the chain.
    root_token_id  TEXT NOT NULL,
    -- The chain, space-separated: root token, then each delegation down to this one.
    chain          TEXT NOT NULL,
    name           TEXT NOT NULL,
    scope          TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL,
    revoked_at     BIGINT
);
CREATE INDEX delegation_root ON delegation(tenant_id, root_token_id);
