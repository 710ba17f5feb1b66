-- Version 3: what an instance's bandwidth costs. The host's prices ($/GB)
-- and download speed, the image size the pull was estimated at, and the
-- marketplace's own bandwidth charge as last reported (NULL: never).

ALTER TABLE instances ADD COLUMN inet_down_cost REAL NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN inet_up_cost REAL NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN inet_down_mbps REAL NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN pull_gb REAL NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN bandwidth_billed REAL;
ALTER TABLE instances ADD COLUMN bandwidth_billed_at TEXT;
