-- Latchkey schema v3 (SQLite): policies (docs/policy.md). The team's policy lives
-- on its tenant row, a browser's on its device row, each as the JSON document its
-- setter wrote (normalised); absent means no limit at that layer.
ALTER TABLE tenant ADD COLUMN policy TEXT;
ALTER TABLE device ADD COLUMN policy TEXT;
