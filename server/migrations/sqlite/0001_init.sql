-- Latchkey schema v1 (SQLite). Times are Unix milliseconds; secrets are SHA-256 hex.
CREATE TABLE tenant (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL
);

CREATE TABLE api_token (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenant(id),
    name          TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('admin', 'agent')),
    token_hash    TEXT NOT NULL UNIQUE,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT,
    revoked_at    BIGINT,
    last_used_at  BIGINT
);
CREATE INDEX api_token_tenant ON api_token(tenant_id);

CREATE TABLE pairing (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenant(id),
    secret_hash  TEXT NOT NULL UNIQUE,
    label        TEXT,
    created_by   TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    used_at      BIGINT
);
CREATE INDEX pairing_tenant ON pairing(tenant_id, used_at, expires_at);

CREATE TABLE device (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenant(id),
    label            TEXT NOT NULL,
    browser_name     TEXT,
    browser_version  TEXT,
    created_by       TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    token_hash       TEXT NOT NULL UNIQUE,
    previous_hash    TEXT,
    expires_at       BIGINT NOT NULL,
    renew_after      BIGINT NOT NULL,
    last_seen_at     BIGINT,
    revoked_at       BIGINT
);
CREATE INDEX device_tenant ON device(tenant_id);
CREATE INDEX device_previous_hash ON device(previous_hash);

CREATE TABLE audit_event (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id  TEXT NOT NULL REFERENCES tenant(id),
    at         BIGINT NOT NULL,
    actor      TEXT NOT NULL,
    action     TEXT NOT NULL,
    target     TEXT NOT NULL,
    outcome    TEXT NOT NULL,
    detail     TEXT
);
CREATE INDEX audit_event_tenant ON audit_event(tenant_id, id);
