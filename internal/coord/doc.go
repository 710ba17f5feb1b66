// Package coord is the coordinator: the agents' HTTP API of package wire
// (heartbeats, findings, the agent binary), live fleet totals, a dashboard
// fed by server-sent events, and Prometheus /metrics.
//
// Tokens: each fleet has a bootstrap (agent) token, which may only enroll
// an instance and fetch the agent binary, and a viewer token, which may
// only read state, events, metrics and the dashboard. An agent enrolls
// once (POST /api/v1/enroll with its CONTAINER_ID): the caller's
// Membership (its store and the marketplace listing) must put the
// instance in the fleet, and the coordinator then issues a credential
// bound to that instance and node, kept hashed in coord.db and revoked
// when the instance leaves the fleet. Heartbeats, findings, leases and
// results are the credential's node's: a body naming another node is
// 403, counted per node (/metrics, dashboard). A token never reaches
// another fleet. Tokens are checked, and rate-limited, before any of the
// body is read.
//
// Durability: a findings batch is committed to SQLite (synchronous=FULL,
// in a group commit with the batches that arrived meanwhile) before it is
// acknowledged; keys are unique per fleet, so a replay is acknowledged
// again and stored once. Node heartbeats are written behind, once a
// second, since only the newest matters after a restart.
//
// Work items: DB.AddItems queues a fleet's items (idempotent by value).
// An item-worker session leases one at a time (POST /api/v1/items/lease);
// a lease lasts Config.ItemLease past its node's latest heartbeat (only
// its own node's), so a node that goes quiet loses its items to the
// queue, checked on each lease request and once a second. A result (POST
// /api/v1/items/result) is taken only from the node holding that lease
// (403 otherwise); a replay or a lease lost meanwhile is acknowledged and
// not stored. DB.ItemCounts, DB.Items and DB.ItemResults read them back.
//
// Validation (DB.SetValidation, from the task file; validation.go): plain
// replication on distinct machines with a quorum, BOINC's adaptive
// replication, unmarked spot checks, and a verify command run here. A
// host that disagrees is caught (Config.BadHosts), gets no more items,
// and its unchecked results are run again elsewhere; DB.HostResults gives
// each host's validated, rejected and unchecked results.
//
// Trust benchmark (forged requests; a liar campaign, 300 items, 5 % of
// the nodes always lying and one wrong 1 % of the time):
//
//	go test -run 'TestForgedRequests|TestLiarCampaign' -v ./internal/coord
//	VASTFLEET_TRUST_BENCH=10 go test -run TestLiarCampaign -v ./internal/coord
//
// Load benchmark (N simulated agents over loopback HTTP, a real SQLite
// file and a real PostgreSQL side by side; reports heartbeats/s and p99
// latency, and checks findings stored equal findings sent, counted back
// from the database):
//
//	go test -run '^$' -bench BenchmarkHeartbeats -benchtime 20000x ./internal/coord
package coord
