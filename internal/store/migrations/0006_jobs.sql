-- Version 6: the jobs `vastfleet up` runs. A job's record (its state, the
-- instances that ran it, its estimate, where its coordinator listened)
-- lives here, beside the fleet it rented; jobs/<job>/job.json is only an
-- export of it.

CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    started_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    record TEXT NOT NULL
);
