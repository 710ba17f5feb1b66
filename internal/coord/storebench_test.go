package coord

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/server/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// storeBackend is a coordinator database the benchmarks write to, and
// the statements they write with.
type storeBackend struct {
	w                *conn
	findings, upsert string
}

// openStoreBackend is coord.db as the coordinator opens it: on SQLite
// (WAL, synchronous=FULL) or on PostgreSQL (a local cluster syncing each
// commit), one writer on each.
func openStoreBackend(b *testing.B, name string) storeBackend {
	b.Helper()
	db := newTestStore(b, name, true).open(b)
	b.Cleanup(func() { db.Close() })
	return storeBackend{w: db.w, findings: insertFindingSQL, upsert: upsertNodeSQL}
}

// Under BenchmarkHeartbeats' load (an agent sends a batch of 5 findings
// after 19 heartbeats) 10,000 heartbeats/s from 1,024 agents are, for
// the database, one write-behind flush of up to 1,024 nodes a second and
// about 2,600 findings a second in group commits.
const (
	benchFlushNodes  = 1024
	benchGroupBatchs = 16 // batches of 5 findings per group commit
)

// BenchmarkStoreWrites times the coordinator's two writes under load, the
// same statements and code, on SQLite (coord.db: WAL, synchronous=FULL)
// and on PostgreSQL (a local cluster syncing each commit), side by side:
// flush is one write-behind tick of 1,024 nodes' heartbeats, findings one
// group commit of 16 batches of 5 findings (select1 is one empty
// statement, the floor under each row's). Each reports its p50 and p99
// and the rows/s one writer sustains. A heartbeat itself never waits on
// the database (BenchmarkHeartbeats): these are what the database must
// keep up with behind it.
//
//	go test -run '^$' -bench BenchmarkStoreWrites -benchtime 200x ./internal/coord
func BenchmarkStoreWrites(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		// What one statement costs before any work: a round trip to the
		// PostgreSQL backend process, a call into SQLite.
		b.Run("db="+backend+"/op=select1", func(b *testing.B) {
			be := openStoreBackend(b, backend)
			timeStoreWrites(b, 1, func(ctx context.Context, i int) error {
				var one int
				return be.w.QueryRowContext(ctx, "SELECT 1").Scan(&one)
			})
		})
		b.Run("db="+backend+"/op=flush", func(b *testing.B) {
			be := openStoreBackend(b, backend)
			timeFlushes(b, func(ctx context.Context, nodes []savedNode) error {
				return saveNodesWith(ctx, be.w, be.upsert, nodes)
			})
		})
		b.Run("db="+backend+"/op=findings", func(b *testing.B) {
			be := openStoreBackend(b, backend)
			timeFindingGroups(b, func(ctx context.Context, group []*findingsReq) error {
				return insertFindingsWith(ctx, be.w, be.findings, group)
			})
		})
	}
}

// BenchmarkStoreWritesPostgresArrays is BenchmarkStoreWrites' PostgreSQL
// writes as the coordinator makes them there: each one statement, the
// rows as arrays (saveNodesArrays, insertFindingsArrays).
//
//	go test -run '^$' -bench BenchmarkStoreWritesPostgresArrays -benchtime 200x ./internal/coord
func BenchmarkStoreWritesPostgresArrays(b *testing.B) {
	b.Run("op=flush", func(b *testing.B) {
		be := openStoreBackend(b, postgresBackend)
		timeFlushes(b, func(ctx context.Context, nodes []savedNode) error {
			return saveNodesArrays(ctx, be.w, nodes)
		})
	})
	b.Run("op=findings", func(b *testing.B) {
		be := openStoreBackend(b, postgresBackend)
		timeFindingGroups(b, func(ctx context.Context, group []*findingsReq) error {
			return insertFindingsArrays(ctx, be.w, group)
		})
	})
}

// timeFlushes times save writing benchFlushNodes nodes, each write a new
// heartbeat of every node, as the once-a-second flush does.
func timeFlushes(b *testing.B, save func(context.Context, []savedNode) error) {
	nodes := make([]savedNode, benchFlushNodes)
	for a := range nodes {
		nodes[a] = savedNode{fleet: "bench", hb: benchHeartbeat(a)}
	}
	timeStoreWrites(b, benchFlushNodes, func(ctx context.Context, i int) error {
		for a := range nodes {
			nodes[a].lastSeen = time.Now()
			nodes[a].hb.Seq = int64(i)
		}
		return save(ctx, nodes)
	})
}

// timeFindingGroups times insert storing a group commit of
// benchGroupBatchs new batches of findings, and checks every one stored.
func timeFindingGroups(b *testing.B, insert func(context.Context, []*findingsReq) error) {
	timeStoreWrites(b, benchGroupBatchs*5, func(ctx context.Context, i int) error {
		group := make([]*findingsReq, benchGroupBatchs)
		for g := range group {
			fs := benchFindings(fmt.Sprintf("node-%04d", g), i)
			group[g] = &findingsReq{fleet: fs.Fleet, node: fs.Node, items: fs.Items, receivedAt: time.Now()}
		}
		if err := insert(ctx, group); err != nil {
			return err
		}
		for _, r := range group {
			if r.stored != len(r.items) {
				return fmt.Errorf("stored %d of %d new findings", r.stored, len(r.items))
			}
		}
		return nil
	})
}

// timeStoreWrites runs write b.N times, each writing rows rows, and
// reports p50 and p99 of one write and the rows/s written.
func timeStoreWrites(b *testing.B, rows int, write func(ctx context.Context, i int) error) {
	ctx := context.Background()
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		t0 := time.Now()
		if err := write(ctx, i); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(took)
	ms := func(p float64) float64 {
		return float64(took[min(len(took)-1, int(p*float64(len(took))))].Microseconds()) / 1000
	}
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(float64(rows*b.N)/elapsed.Seconds(), "rows/s")
}
