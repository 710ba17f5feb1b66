package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// FuzzIngest posts arbitrary bodies as heartbeats and findings: nothing
// may panic, every refusal is a wire.Error, and whatever is accepted must
// still encode as a snapshot (no NaN or broken UTF-8 reaches the views).
//
//	go test -run '^$' -fuzz FuzzIngest -fuzztime 30s ./internal/coord
func FuzzIngest(f *testing.F) {
	hb, _ := json.Marshal(heartbeat("alpha", "n1"))
	fs, _ := json.Marshal(findings("alpha", "n1", "k1"))
	f.Add(hb, false)
	f.Add(fs, true)
	f.Add([]byte(`{"fleet":"alpha","node":"n\u0000","cpu_percent":1e308}`), false)
	f.Add([]byte(`{"fleet":"alpha","node":"n","items":[{"key":"k","data":{"a":[1,2,{}]}}]}`), true)
	f.Add([]byte(`{"fleet":"alpha","node":"\xff","metrics":{"\xfe":1}}`), false)

	db := openTestDB(f, filepath.Join(f.TempDir(), "coord.db"))
	defer db.Close()
	agent, _, err := db.FleetTokens(context.Background(), "alpha")
	if err != nil {
		f.Fatal(err)
	}
	srv, err := New(Config{DB: db, TokenRate: 1e9, Members: testMembers{}})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	h := srv.Handler()
	enroll := httptest.NewRequest("POST", wire.PathEnroll, strings.NewReader(`{"fleet":"alpha","instance_id":1,"node":"n1"}`))
	enroll.Header.Set("Authorization", "Bearer "+agent)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, enroll)
	var cred wire.EnrollReply
	if err := json.Unmarshal(rec.Body.Bytes(), &cred); err != nil || cred.Token == "" {
		f.Fatalf("enroll: %d %s", rec.Code, rec.Body.Bytes())
	}
	f.Fuzz(func(t *testing.T, body []byte, asFindings bool) {
		path := wire.PathHeartbeat
		if asFindings {
			path = wire.PathFindings
		}
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+cred.Token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			var e wire.Error
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("status %d with body %q", rec.Code, rec.Body.Bytes())
			}
		}
		if _, err := json.Marshal(srv.Snapshot(context.Background(), "alpha")); err != nil {
			t.Fatalf("snapshot no longer encodes: %v", err)
		}
	})
}
