package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// BenchmarkHeartbeats runs N simulated agents, each a node of one fleet
// sending heartbeats back to back over loopback HTTP (keep-alive, as the
// agent does) to a coordinator on a real database, SQLite (coord.db) and
// PostgreSQL (a local cluster syncing each commit) side by side; every
// 20th request of an agent is instead a batch of 5 findings. b.N is the
// number of heartbeats. It reports heartbeats/s and the p50 and p99
// latency of a heartbeat, and fails unless the findings counted back
// from the database equal those sent.
//
//	go test -run '^$' -bench BenchmarkHeartbeats -benchtime 20000x ./internal/coord
func BenchmarkHeartbeats(b *testing.B) {
	for _, agents := range []int{64, 256, 1024} {
		b.Run(fmt.Sprintf("agents=%d", agents), func(b *testing.B) {
			for _, backend := range backends {
				b.Run("db="+backend, func(b *testing.B) { benchHeartbeats(b, backend, agents) })
			}
		})
	}
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hbRig is a coordinator on a real database with agents enrolled, one
// credential each, as on a real fleet, and a keep-alive client.
type hbRig struct {
	db     *DB
	srv    *Server
	hs     *httptest.Server
	client *http.Client
	creds  map[string]string
	viewer string
}

// newHBRig is an hbRig on backend (PostgreSQL: one that syncs each
// commit, as SQLite's coord.db does).
func newHBRig(tb testing.TB, backend string, agents int) *hbRig {
	tb.Helper()
	ctx := context.Background()
	r := &hbRig{db: newTestStore(tb, backend, true).open(tb), creds: map[string]string{}}
	tb.Cleanup(func() { r.db.Close() })
	token, viewer, err := r.db.FleetTokens(ctx, "bench")
	if err != nil {
		tb.Fatal(err)
	}
	r.viewer = viewer
	members := MembershipFunc(func(context.Context, string) (map[int64]Instance, error) {
		out := map[int64]Instance{}
		for a := range agents {
			out[int64(1000+a)] = Instance{MachineID: int64(1000 + a)}
		}
		return out, nil
	})
	if r.srv, err = New(Config{DB: r.db, TokenRate: 1e9, Members: members}); err != nil {
		tb.Fatal(err)
	}
	r.hs = httptest.NewServer(r.srv.Handler())
	tb.Cleanup(r.hs.Close)
	r.client = &http.Client{Transport: &http.Transport{MaxIdleConns: agents + 1, MaxIdleConnsPerHost: agents + 1}}
	for a := range agents {
		node := fmt.Sprintf("node-%04d", a)
		body, _ := json.Marshal(wire.EnrollRequest{Fleet: "bench", InstanceID: int64(1000 + a), Node: node})
		req, _ := http.NewRequest("POST", r.hs.URL+wire.PathEnroll, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := r.client.Do(req)
		if err != nil {
			tb.Fatal(err)
		}
		var rep wire.EnrollReply
		err = json.NewDecoder(resp.Body).Decode(&rep)
		resp.Body.Close()
		if err != nil || rep.Token == "" {
			tb.Fatalf("enrolling %s: %d %v", node, resp.StatusCode, err)
		}
		r.creds[node] = rep.Token
	}
	return r
}

// post sends body, whose "node" names the sender, with that node's own
// credential.
func (r *hbRig) post(path string, body []byte) error {
	var who struct{ Node string }
	_ = json.Unmarshal(body, &who)
	req, _ := http.NewRequest("POST", r.hs.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.creds[who.Node])
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: status %d", path, resp.StatusCode)
	}
	return nil
}

// heartbeat is node a's heartbeat, as a busy agent sends it.
func benchHeartbeat(a int) wire.Heartbeat {
	return wire.Heartbeat{
		Fleet: "bench", Node: fmt.Sprintf("node-%04d", a), InstanceID: int64(1000 + a),
		CPUPercent: 3150, CPUCores: 32, RAMUsedBytes: 20 << 30, RAMTotalBytes: 64 << 30,
		DiskUsedBytes: 10 << 30, DiskTotalBytes: 100 << 30, UptimeS: 3600,
		GPUs:     []wire.GPU{{Index: 0, UtilPercent: 97, MemUsedMB: 20000, MemTotalMB: 24576}},
		Sessions: []wire.SessionState{{Name: "search", State: "running", PID: 42}},
		Metrics:  map[string]float64{"keys_per_s": 4.1e8, "batches": 12},
	}
}

// benchFindings is a batch of 5 findings from node, the i-th of its run.
func benchFindings(node string, i int) wire.Findings {
	fs := wire.Findings{Fleet: "bench", Node: node}
	for j := range 5 {
		fs.Items = append(fs.Items, wire.Finding{Key: fmt.Sprintf("%s-%d-%d", node, i, j),
			Session: "search", At: time.Now(), Data: json.RawMessage(`{"privkey":"5HueCGU8rMjxEXxiPuD5BDku4MkFqeZyd4dZ1jvhTVqvbTLvyTJ"}`)})
	}
	return fs
}

func benchHeartbeats(b *testing.B, backend string, agents int) {
	ctx := context.Background()
	rig := newHBRig(b, backend, agents)
	db, srv, post := rig.db, rig.srv, rig.post

	var (
		next       atomic.Int64 // heartbeats handed out
		sent       atomic.Int64 // findings acked
		mu         sync.Mutex
		latencies  = make([]time.Duration, 0, b.N)
		wg         sync.WaitGroup
		firstError atomic.Value
	)
	cpu0 := cpuTime()
	b.ResetTimer()
	start := time.Now()
	for a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hb := benchHeartbeat(a)
			mine := make([]time.Duration, 0, b.N/agents+1)
			defer func() {
				mu.Lock()
				latencies = append(latencies, mine...)
				mu.Unlock()
			}()
			for i := 0; ; i++ {
				if i%20 == 19 {
					fs := benchFindings(hb.Node, i)
					body, _ := json.Marshal(fs)
					if err := post(wire.PathFindings, body); err != nil {
						firstError.CompareAndSwap(nil, err)
						return
					}
					sent.Add(5)
					continue
				}
				if next.Add(1) > int64(b.N) {
					return
				}
				hb.Seq++
				hb.SentAt = time.Now()
				body, _ := json.Marshal(hb)
				t0 := time.Now()
				if err := post(wire.PathHeartbeat, body); err != nil {
					firstError.CompareAndSwap(nil, err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cpuUsed := cpuTime() - cpu0
	if err, _ := firstError.Load().(error); err != nil {
		b.Fatal(err)
	}
	srv.Close()
	stored, err := db.CountFindings(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	if stored != sent.Load() {
		b.Fatalf("findings stored %d, sent and acked %d", stored, sent.Load())
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		if len(latencies) == 0 {
			return 0
		}
		return float64(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "heartbeats/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(stored), "findings-stored")
	// CPU time of the whole process (coordinator and simulated agents)
	// per heartbeat: on a shared, busy machine it says more about
	// capacity than the wall-clock rate does.
	b.ReportMetric(float64(cpuUsed.Microseconds())/float64(len(latencies)), "cpu-µs/heartbeat")
}
