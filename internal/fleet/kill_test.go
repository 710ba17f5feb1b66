package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/provider/vast"
	"github.com/vastfleet/vastfleet/internal/store"
)

// TestKillHelper is the child process of TestKill9: it rents (and in the
// destroy modes destroys) against the parent's simulator and database, and
// is killed with SIGKILL somewhere along the way.
func TestKillHelper(t *testing.T) {
	if os.Getenv("FLEET_KILL_CHILD") == "" {
		t.Skip("helper process for TestKill9")
	}
	ctx := context.Background()
	st, err := store.Open(ctx, os.Getenv("FLEET_DB"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := vast.New(vast.Options{BaseURL: os.Getenv("FLEET_URL"), APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	var off market.Offer
	if err := json.Unmarshal([]byte(os.Getenv("FLEET_OFFER")), &off); err != nil {
		t.Fatal(err)
	}
	ns, _ := strconv.ParseInt(os.Getenv("FLEET_NOW"), 10, 64)
	m := &Manager{P: c, S: st, Clock: clock.Fixed{At: time.Unix(0, ns).UTC()}}
	rec, err := m.Rent(ctx, RentRequest{Fleet: "f1", Offer: off,
		Create: provider.CreateRequest{Image: "ubuntu:22.04", Disk: 20}})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("RENTED %d\n", rec.ID)
	if os.Getenv("FLEET_KILL_CHILD") == "destroy" {
		if err := m.Destroy(ctx, []int64{rec.ID}); err != nil {
			t.Fatal(err)
		}
	}
	// Being still alive here is fine for the "after response" kill point.
	time.Sleep(10 * time.Second)
}

// TestKill9 kills a renting process with SIGKILL at several points and
// checks that a reconcile by the next process leaves no instance of ours
// that the store does not know, and no offer rented twice.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	type point struct {
		name  string
		mode  string // rent | destroy
		hook  func(g *gate, reached chan<- struct{}, release <-chan struct{})
		check func(t *testing.T, e *env, m *Manager)
	}
	// block signals the parent and holds the request until the child is dead.
	block := func(reached chan<- struct{}, release <-chan struct{}) {
		reached <- struct{}{}
		<-release
	}
	reconcile := func(t *testing.T, m *Manager) Report {
		t.Helper()
		rep, err := m.Reconcile(context.Background(), ReconcileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	kinds := func(rep Report) map[string]int {
		k := map[string]int{}
		for _, c := range rep.Changes {
			k[c.Kind]++
		}
		return k
	}
	points := []point{
		{"after intent, before create", "rent",
			func(g *gate, reached chan<- struct{}, release <-chan struct{}) {
				g.onCreate = func(*http.Request) bool { block(reached, release); return false }
			},
			func(t *testing.T, e *env, m *Manager) {
				if k := kinds(reconcile(t, m)); len(k) != 0 {
					t.Fatalf("young pending intent touched: %v", k)
				}
				e.clock.Advance(DefaultGrace + time.Second)
				if k := kinds(reconcile(t, m)); k[ChangeAbandoned] != 1 {
					t.Fatalf("changes %v, want one abandoned", k)
				}
			}},
		{"create applied, answer not received", "rent",
			func(g *gate, reached chan<- struct{}, release <-chan struct{}) {
				g.afterCreate = func(*http.Request) { block(reached, release) }
			},
			func(t *testing.T, e *env, m *Manager) {
				if k := kinds(reconcile(t, m)); k[ChangeAdopted] != 1 {
					t.Fatalf("changes %v, want one adopted", k)
				}
			}},
		{"after the instance was recorded", "rent", nil, // killed once it prints RENTED
			func(t *testing.T, e *env, m *Manager) {
				if k := kinds(reconcile(t, m)); k[ChangeAdopted] != 0 {
					t.Fatalf("changes %v: the recorded instance was adopted again", k)
				}
			}},
		{"destroy applied, answer not received", "destroy",
			func(g *gate, reached chan<- struct{}, release <-chan struct{}) {
				g.afterDelete = func(*http.Request) { block(reached, release) }
			},
			func(t *testing.T, e *env, m *Manager) {
				reconcile(t, m)
				e.clock.Advance(DefaultGrace + time.Second)
				if k := kinds(reconcile(t, m)); k[ChangeGone] != 1 {
					t.Fatalf("changes %v, want one gone", k)
				}
			}},
		{"destroy requested, not sent", "destroy",
			func(g *gate, reached chan<- struct{}, release <-chan struct{}) {
				g.beforeDelete = func(*http.Request) bool { block(reached, release); return false }
			},
			func(t *testing.T, e *env, m *Manager) {
				if rep := reconcile(t, m); len(rep.Redestroyed) != 1 {
					t.Fatalf("report %+v, want the destroy re-sent", rep)
				}
				e.clock.Advance(DefaultGrace + time.Second)
				if k := kinds(reconcile(t, m)); k[ChangeGone] != 1 {
					t.Fatalf("changes %v, want one gone", k)
				}
			}},
	}
	for _, p := range points {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t, envOpts{noStore: true})
			e.dbPath = t.TempDir() + "/vastfleet.db"
			reached := make(chan struct{}, 1)
			release := make(chan struct{})
			defer func() {
				select {
				case <-release:
				default:
					close(release)
				}
			}()
			if p.hook != nil {
				e.gate.set(func(g *gate) { p.hook(g, reached, release) })
			}

			off, _ := json.Marshal(e.offers[0])
			cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), "FLEET_KILL_CHILD="+p.mode, "FLEET_DB="+e.dbPath, "FLEET_URL="+e.srv.URL,
				"FLEET_OFFER="+string(off), "FLEET_NOW="+strconv.FormatInt(e.clock.Now().UnixNano(), 10))
			out := &syncBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if p.hook == nil {
				go func() {
					for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
						if strings.Contains(out.String(), "RENTED") {
							reached <- struct{}{}
							return
						}
					}
				}()
			}
			select {
			case <-reached:
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child never reached the kill point; output:\n%s", out.String())
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child was not killed by SIGKILL: %v\n%s", err, out.String())
			}
			close(release)
			e.gate.set(func(g *gate) { g.reset() })

			st, err := store.Open(context.Background(), e.dbPath)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			e.st = st
			m := e.manager(e.client)
			p.check(t, e, m)
			e.assertNoLeak(st)
			if rep := reconcile(t, m); len(rep.Changes) != 0 {
				t.Errorf("reconcile after recovery not idempotent: %v", rep.Changes)
			}
		})
	}
}
