-- Latchkey schema v11: console sign-ins through single sign-on (docs/console.md,
-- "Single sign-on"). Such a sign-in has no API token behind it, only the member
-- the identity provider vouched for: `token_hash` becomes optional, and a row
-- names a token or a member.
ALTER TABLE console_session ALTER COLUMN token_hash DROP NOT NULL;
ALTER TABLE console_session ADD CONSTRAINT console_session_who
    CHECK (token_hash IS NOT NULL OR member_id IS NOT NULL);
