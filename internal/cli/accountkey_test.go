package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vastfleet/vastfleet/internal/nodes"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// The fleet key goes on the account before instances are created, once:
// instances boot accepting it, so exec never attaches it per instance.
func TestFleetKeyRegisteredOnAccountBeforeCreate(t *testing.T) {
	t.Parallel()
	// This market runs on wall time, as a shared one does: slow enough that
	// a busy machine still boots two instances well inside the deadline.
	mkt, err := sim.New(sim.Config{Seed: 5, APIKey: sim.DefaultAPIKey, TimeScale: 100, HostDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer mkt.Close()
	var attaches, registers atomic.Int64
	api := mkt.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/v0/instances/") && strings.HasSuffix(r.URL.Path, "/ssh/") {
			attaches.Add(1)
		}
		if r.Method == http.MethodPost && r.URL.Path == "/api/v0/ssh/" {
			registers.Add(1)
		}
		api.ServeHTTP(w, r)
	}))
	defer srv.Close()
	e := newEnv(t) // a fresh data dir: the fleet key is generated here
	at := func(args ...string) []string { return append([]string{"--api-url", srv.URL}, args...) }
	e.ok(at("launch", "--count", "2", "--deadline", "3h", "--fleet", "k", "--image", "ubuntu:22.04",
		"-n", "rentable=True num_gpus=1 dph_total<1")...)
	// A second rental lists the account's keys and finds the key there.
	offers := decode[[]map[string]any](t, e.ok(at("search", "num_gpus=1", "-o", "+dph_total", "--limit", "1", "--json")...).out)
	e.ok(at("rent", fmt.Sprint(int64(offers[0]["id"].(float64))), "--fleet", "k", "--image", "ubuntu:22.04")...)
	if n := registers.Load(); n != 1 {
		t.Errorf("%d account key registrations, want 1", n)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/api/v0/ssh/", nil)
	req.Header.Set("Authorization", "Bearer "+sim.DefaultAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Keys []map[string]any `json:"ssh_keys"`
	}
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list.Keys) != 1 || !strings.HasSuffix(fmt.Sprint(list.Keys[0]["ssh_key"]), " vastfleet") {
		t.Errorf("account keys %v, want the fleet key once", list.Keys)
	}

	r := e.ok(at("exec", "--fleet", "k", "--json", "--", "echo $VASTFLEET_NODE_RANK")...)
	rows := decode[[]nodes.ExecRow](t, r.out)
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	for _, row := range rows {
		if row.ExitCode != 0 || row.Error != "" {
			t.Errorf("exec row %+v", row)
		}
	}
	if n := attaches.Load(); n != 0 {
		t.Errorf("%d per-instance key attaches, want 0: the instances should boot with the account key", n)
	}
}
