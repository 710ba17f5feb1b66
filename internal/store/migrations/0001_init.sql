-- Version 1: fleets, launch intents, instances and their state history.
-- Times are TEXT in a fixed-width UTC format (see store.go) so they sort.

CREATE TABLE fleets (
	name       TEXT PRIMARY KEY,
	created_at TEXT NOT NULL,
	spec       TEXT NOT NULL DEFAULT '{}',
	state      TEXT NOT NULL CHECK (state IN ('active', 'done', 'destroyed')),
	est_dph    REAL NOT NULL DEFAULT 0,
	est_hours  REAL NOT NULL DEFAULT 0,
	est_cost   REAL NOT NULL DEFAULT 0
);

-- An intent is written before the create call, so a crash between the call
-- and its answer leaves a pending row whose label can be looked up.
CREATE TABLE intents (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	fleet       TEXT NOT NULL REFERENCES fleets(name),
	offer_id    INTEGER NOT NULL,
	machine_id  INTEGER NOT NULL,
	label       TEXT UNIQUE,
	request     TEXT NOT NULL DEFAULT '{}',
	created_at  TEXT NOT NULL,
	updated_at  TEXT NOT NULL,
	state       TEXT NOT NULL CHECK (state IN ('pending', 'created', 'failed', 'abandoned')),
	instance_id INTEGER,
	error       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX intents_state ON intents(state);

CREATE TABLE instances (
	id                   INTEGER PRIMARY KEY,
	intent_id            INTEGER REFERENCES intents(id),
	fleet                TEXT NOT NULL DEFAULT '',
	offer_id             INTEGER NOT NULL DEFAULT 0,
	machine_id           INTEGER NOT NULL DEFAULT 0,
	gpu_name             TEXT NOT NULL DEFAULT '',
	num_gpus             INTEGER NOT NULL DEFAULT 0,
	cpu_cores            REAL NOT NULL DEFAULT 0,
	ram_mb               REAL NOT NULL DEFAULT 0,
	dph_total            REAL NOT NULL DEFAULT 0,
	storage_dph          REAL NOT NULL DEFAULT 0,
	label                TEXT NOT NULL DEFAULT '',
	state                TEXT NOT NULL DEFAULT '',
	wanted               TEXT NOT NULL DEFAULT 'running' CHECK (wanted IN ('running', 'parked', 'destroy')),
	created_at           TEXT NOT NULL,
	last_seen_at         TEXT NOT NULL,
	running_since        TEXT,
	destroy_requested_at TEXT,
	gone_at              TEXT,
	ssh_host             TEXT NOT NULL DEFAULT '',
	ssh_port             INTEGER NOT NULL DEFAULT 0,
	ssh_url              TEXT NOT NULL DEFAULT ''
);
CREATE INDEX instances_fleet ON instances(fleet);
CREATE INDEX instances_live ON instances(gone_at);

CREATE TABLE state_events (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	instance_id INTEGER NOT NULL REFERENCES instances(id),
	from_state  TEXT NOT NULL,
	to_state    TEXT NOT NULL,
	at          TEXT NOT NULL
);
CREATE INDEX state_events_instance ON state_events(instance_id, seq);

CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
