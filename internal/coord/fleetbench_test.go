package coord

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// pacedResult is what a fleet at its heartbeat interval saw.
type pacedResult struct {
	heartbeats, findingsSent, findingsStored int64
	hbP50, hbP99, stateP99                   time.Duration
	stateReads                               int
	stateBytes                               int
	// sseBytes and sseEvents are what a dashboard's event stream carried
	// after its first snapshot.
	sseBytes, sseEvents int64
	sseFor              time.Duration
}

// runPaced runs agents that each send a heartbeat every interval (the
// first at a random point of the first interval, as agents boot apart) and
// a batch of 5 findings every fifth beat, for d of wall time, while a
// dashboard reads the fleet's state once a second.
func runPaced(tb testing.TB, backend string, agents int, interval, d time.Duration) pacedResult {
	tb.Helper()
	rig := newHBRig(tb, backend, agents)
	var (
		mu        sync.Mutex
		hbLat     []time.Duration
		stateLat  []time.Duration
		sent      atomic.Int64
		firstErr  atomic.Value
		wg        sync.WaitGroup
		stateSize int
	)
	stop := time.Now().Add(d)
	for a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hb := benchHeartbeat(a)
			time.Sleep(time.Duration(rand.Int64N(int64(interval))))
			var mine []time.Duration
			for i := 0; time.Now().Before(stop); i++ {
				next := time.Now().Add(interval)
				hb.Seq++
				hb.SentAt = time.Now()
				body, _ := json.Marshal(hb)
				t0 := time.Now()
				if err := rig.post(wire.PathHeartbeat, body); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				mine = append(mine, time.Since(t0))
				if i%5 == 4 {
					body, _ := json.Marshal(benchFindings(hb.Node, i))
					if err := rig.post(wire.PathFindings, body); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					sent.Add(5)
				}
				time.Sleep(time.Until(next))
			}
			mu.Lock()
			hbLat = append(hbLat, mine...)
			mu.Unlock()
		}()
	}
	wg.Add(1)
	go func() { // the dashboard
		defer wg.Done()
		for time.Now().Before(stop) {
			next := time.Now().Add(time.Second)
			req, _ := http.NewRequest("GET", rig.hs.URL+wire.PathState, nil)
			req.Header.Set("Authorization", "Bearer "+rig.viewer)
			t0 := time.Now()
			resp, err := rig.client.Do(req)
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
				return
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				firstErr.CompareAndSwap(nil, fmt.Errorf("state: status %d", resp.StatusCode))
				return
			}
			mu.Lock()
			stateLat, stateSize = append(stateLat, time.Since(t0)), int(n)
			mu.Unlock()
			time.Sleep(time.Until(next))
		}
	}()
	var sseBytes, sseEvents atomic.Int64
	var sseStart time.Time
	sseDone := make(chan struct{})
	go func() { // the dashboard's event stream
		defer close(sseDone)
		req, _ := http.NewRequest("GET", rig.hs.URL+wire.PathEvents, nil)
		req.Header.Set("Authorization", "Bearer "+rig.viewer)
		resp, err := rig.client.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		rd := bufio.NewReaderSize(resp.Body, 1<<20)
		first := true
		for time.Now().Before(stop) {
			line, err := rd.ReadSlice('\n')
			if err != nil && err != bufio.ErrBufferFull {
				return
			}
			if first {
				if len(line) == 1 { // the end of the first snapshot
					first, sseStart = false, time.Now()
				}
				continue
			}
			sseBytes.Add(int64(len(line)))
			if len(line) == 1 {
				sseEvents.Add(1)
			}
		}
	}()
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		tb.Fatal(err)
	}
	rig.hs.CloseClientConnections()
	<-sseDone
	rig.srv.Close()
	stored, err := rig.db.CountFindings(context.Background(), "bench")
	if err != nil {
		tb.Fatal(err)
	}
	pct := func(ls []time.Duration, p float64) time.Duration {
		if len(ls) == 0 {
			return 0
		}
		slices.Sort(ls)
		return ls[min(len(ls)-1, int(p*float64(len(ls))))]
	}
	return pacedResult{heartbeats: int64(len(hbLat)), findingsSent: sent.Load(), findingsStored: stored,
		hbP50: pct(hbLat, 0.5), hbP99: pct(hbLat, 0.99), stateP99: pct(stateLat, 0.99),
		stateReads: len(stateLat), stateBytes: stateSize,
		sseBytes: sseBytes.Load(), sseEvents: sseEvents.Load(), sseFor: time.Since(sseStart)}
}

// BenchmarkFleetAtInterval is a fleet as it runs: VASTFLEET_COORD_AGENTS
// agents (default 1000) at the coordinator's default heartbeat interval
// (10 s), findings every fifth beat, a dashboard reading the state every
// second, for VASTFLEET_COORD_SECONDS (default 60) of wall time, on
// SQLite and on PostgreSQL. It reports the heartbeat latency's p50 and
// p99, the state read's p99 and size, and fails unless every finding
// sent was stored.
//
//	go test -run '^$' -bench BenchmarkFleetAtInterval -benchtime 1x ./internal/coord
func BenchmarkFleetAtInterval(b *testing.B) {
	agents, secs := 1000, 60
	if v, err := strconv.Atoi(os.Getenv("VASTFLEET_COORD_AGENTS")); err == nil && v > 0 {
		agents = v
	}
	if v, err := strconv.Atoi(os.Getenv("VASTFLEET_COORD_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	for _, backend := range backends {
		b.Run("db="+backend, func(b *testing.B) {
			for range b.N {
				r := runPaced(b, backend, agents, 10*time.Second, time.Duration(secs)*time.Second)
				if r.findingsStored != r.findingsSent {
					b.Fatalf("findings stored %d, sent and acked %d", r.findingsStored, r.findingsSent)
				}
				b.ReportMetric(float64(r.heartbeats), "heartbeats")
				b.ReportMetric(float64(r.hbP50.Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(r.hbP99.Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(r.stateP99.Microseconds())/1000, "state-p99-ms")
				b.ReportMetric(float64(r.stateBytes)/1024, "state-KiB")
				b.ReportMetric(float64(r.sseBytes)/1024/r.sseFor.Seconds(), "events-KiB/s")
			}
		})
	}
}

// TestFleetAtIntervalReduced runs the fleet benchmark small, on each
// backend, so that it cannot rot: 40 agents at 200 ms for 2 s, every
// finding stored, every agent heard and the state read.
func TestFleetAtIntervalReduced(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run("db="+backend, func(t *testing.T) {
			t.Parallel()
			r := runPaced(t, backend, 40, 200*time.Millisecond, 2*time.Second)
			if r.findingsStored != r.findingsSent || r.findingsSent == 0 {
				t.Errorf("findings stored %d, sent and acked %d", r.findingsStored, r.findingsSent)
			}
			if r.heartbeats < 40 || r.stateReads == 0 || r.stateBytes == 0 {
				t.Errorf("%d heartbeats, %d state reads of %d bytes", r.heartbeats, r.stateReads, r.stateBytes)
			}
		})
	}
}
