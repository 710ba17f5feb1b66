-- Version 2: per-instance cost estimates and the experiment name carried by
-- vast-instances.json, and machines to avoid after a failed launch.

ALTER TABLE instances ADD COLUMN experiment TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN est_hours REAL;
ALTER TABLE instances ADD COLUMN est_cost REAL;

CREATE TABLE bad_hosts (
	machine_id INTEGER PRIMARY KEY,
	reason     TEXT NOT NULL DEFAULT '',
	failed_at  TEXT NOT NULL,
	until      TEXT NOT NULL
);
