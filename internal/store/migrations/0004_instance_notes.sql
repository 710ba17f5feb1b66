-- Version 4: notes on an instance, for what vastfleet did to it on its own
-- (an instance reaped because its agent fell silent), shown by `ls`.

CREATE TABLE instance_notes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    instance_id INTEGER NOT NULL,
    at TEXT NOT NULL,
    note TEXT NOT NULL
);
CREATE INDEX instance_notes_by_instance ON instance_notes (instance_id, seq);
