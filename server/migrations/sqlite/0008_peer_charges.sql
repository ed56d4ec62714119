-- Latchkey schema v8: pairing attempts charged to a client address, counted
-- across replicas in cluster mode, so the per-address limit holds for the
-- cluster rather than for each replica (docs/cluster.md, "Rate limits").
-- Windows older than the last two minutes are pruned.
CREATE TABLE peer_charge (
    -- The client address as the rate limiter keys it (IPv6 folded to its /64).
    peer     TEXT NOT NULL,
    -- The window: Unix time in whole minutes.
    minute   BIGINT NOT NULL,
    charges  INTEGER NOT NULL,
    PRIMARY KEY (peer, minute)
);
