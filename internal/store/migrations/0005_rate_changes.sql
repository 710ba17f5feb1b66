-- Version 5: changes of an instance's price while it lives (a raised bid),
-- so that cost bills each stretch at the rate then in force.

CREATE TABLE rate_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    instance_id INTEGER NOT NULL,
    at TEXT NOT NULL,
    from_dph_total REAL NOT NULL,
    from_storage_dph REAL NOT NULL,
    to_dph_total REAL NOT NULL,
    to_storage_dph REAL NOT NULL
);
CREATE INDEX rate_changes_by_instance ON rate_changes (instance_id, seq);
