// Package coord is the coordinator: the agents' HTTP API of package wire
// (heartbeats, findings, the agent binary), live fleet totals, a dashboard
// fed by server-sent events, and Prometheus /metrics.
//
// Tokens: each fleet has an agent token, which may only POST heartbeats
// and findings and fetch the agent binary, and a viewer token, which may
// only read state, events, metrics and the dashboard. A token never
// reaches another fleet: the fleet named in a body must be the token's.
// Tokens are checked, and rate-limited, before any of the body is read.
//
// Durability: a findings batch is committed to SQLite (synchronous=FULL,
// in a group commit with the batches that arrived meanwhile) before it is
// acknowledged; keys are unique per fleet, so a replay is acknowledged
// again and stored once. Node heartbeats are written behind, once a
// second, since only the newest matters after a restart.
//
// Work items: DB.AddItems queues a fleet's items (idempotent by value).
// An item-worker session leases one at a time (POST /api/v1/items/lease);
// a lease lasts Config.ItemLease past its node's latest heartbeat, so a
// node that goes quiet loses its items to the queue, checked on each
// lease request and once a second. The first result for an item (POST
// /api/v1/items/result) is kept; later ones are acknowledged and ignored.
// DB.ItemCounts, DB.Items and DB.ItemResults read them back.
//
// Load benchmark (N simulated agents over loopback HTTP, real SQLite file;
// reports heartbeats/s and p99 latency, and checks findings stored equal
// findings sent, counted back from SQLite):
//
//	go test -run '^$' -bench BenchmarkHeartbeats -benchtime 20000x ./internal/coord
package coord
