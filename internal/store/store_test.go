package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var updateFixture = flag.Bool("update-fixture", false, "rewrite testdata/v1.db from migration 0001")

var t0 = time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)

func openTest(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func mustFleet(t *testing.T, s *Store, name string) {
	t.Helper()
	if err := s.CreateFleet(context.Background(), Fleet{Name: name, CreatedAt: t0, Spec: json.RawMessage(`{"count":2}`)}); err != nil {
		t.Fatal(err)
	}
}

func label(fleet string) func(int64) string {
	return func(id int64) string { return fmt.Sprintf("vastfleet:%s:%d", fleet, id) }
}

func pragma(t *testing.T, s *Store, name string) string {
	t.Helper()
	var v string
	if err := s.db.QueryRow("PRAGMA " + name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestOpenPragmas(t *testing.T) {
	s, _ := openTest(t)
	for name, want := range map[string]string{
		"journal_mode": "wal",
		"foreign_keys": "1",
		"synchronous":  "2", // FULL
		"busy_timeout": "5000",
	} {
		if got := pragma(t, s, name); got != want {
			t.Errorf("PRAGMA %s = %q, want %q", name, got, want)
		}
	}
	var v int
	if err := s.db.QueryRow("SELECT MAX(version) FROM schema_migrations").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != SchemaVersion() || v < 2 {
		t.Errorf("schema version %d, want %d", v, SchemaVersion())
	}
}

func TestOpenRejectsQuestionMark(t *testing.T) {
	if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "a?b.db")); err == nil {
		t.Fatal("want error for '?' in path")
	}
}

func TestReopenPersistsAndMigrationsIdempotent(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	mustFleet(t, s, "f")
	if err := s.SetMeta(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for range 2 {
		s2, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := s2.db.QueryRow("SELECT COUNT(*) FROM schema_migrations").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != SchemaVersion() {
			t.Errorf("schema_migrations has %d rows, want %d", n, SchemaVersion())
		}
		if v, err := s2.GetMeta(ctx, "k"); err != nil || v != "v" {
			t.Errorf("GetMeta = %q, %v", v, err)
		}
		if _, err := s2.GetFleet(ctx, "f"); err != nil {
			t.Error(err)
		}
		s2.Close()
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	if _, err := s.db.Exec("INSERT INTO schema_migrations(version, name) VALUES (999, 'future')"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(ctx, path)
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open = %v, want a newer-schema error", err)
	}
}

// TestGenerateV1Fixture writes testdata/v1.db as vastfleet at schema
// version 1 left it. Run with -update-fixture only if the fixture is lost;
// it must never change with later migrations.
func TestGenerateV1Fixture(t *testing.T) {
	if !*updateFixture {
		t.Skip("run with -update-fixture to regenerate testdata/v1.db")
	}
	out := filepath.Join("testdata", "v1.db")
	os.Remove(out)
	db, err := sql.Open("sqlite", dsn(out))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{
		"CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)",
		ms[0].sql,
		"INSERT INTO schema_migrations VALUES (1, '" + ms[0].name + "')",
		`INSERT INTO fleets VALUES ('old', '2026-11-30T10:00:00.000000000Z', '{"count":1}', 'active', 0.5, 10, 5)`,
		`INSERT INTO intents(id, fleet, offer_id, machine_id, label, request, created_at, updated_at, state, instance_id)
			VALUES (1, 'old', 111, 222, 'vastfleet:old:1', '{}', '2026-11-30T10:00:01.000000000Z', '2026-11-30T10:00:02.000000000Z', 'created', 9001)`,
		`INSERT INTO intents(id, fleet, offer_id, machine_id, label, request, created_at, updated_at, state)
			VALUES (2, 'old', 112, 223, 'vastfleet:old:2', '{}', '2026-11-30T10:00:03.000000000Z', '2026-11-30T10:00:03.000000000Z', 'pending')`,
		`INSERT INTO instances(id, intent_id, fleet, offer_id, machine_id, gpu_name, num_gpus, dph_total, label, state, wanted,
			created_at, last_seen_at, running_since, ssh_host, ssh_port, ssh_url)
			VALUES (9001, 1, 'old', 111, 222, 'RTX 4090', 1, 0.5, 'vastfleet:old:1', 'running', 'running',
			'2026-11-30T10:00:02.000000000Z', '2026-11-30T11:00:00.000000000Z', '2026-11-30T10:05:00.000000000Z',
			'ssh4.vast.ai', 20001, 'ssh://root@ssh4.vast.ai:20001')`,
		`INSERT INTO state_events(instance_id, from_state, to_state, at) VALUES (9001, 'loading', 'running', '2026-11-30T10:05:00.000000000Z')`,
		"PRAGMA wal_checkpoint(TRUNCATE)",
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func TestUpgradeFromV1Fixture(t *testing.T) {
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join("testdata", "v1.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var v int
	if err := s.db.QueryRow("SELECT MAX(version) FROM schema_migrations").Scan(&v); err != nil || v != SchemaVersion() {
		t.Fatalf("version %d, %v; want %d", v, err, SchemaVersion())
	}
	inst, err := s.Instance(ctx, 9001)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Label != "vastfleet:old:1" || inst.State != "running" || inst.IntentID != 1 || inst.EstHours != nil || inst.Experiment != "" {
		t.Errorf("upgraded instance = %+v", inst)
	}
	if want := time.Date(2026, 11, 30, 10, 5, 0, 0, time.UTC); !inst.RunningSince.Equal(want) {
		t.Errorf("RunningSince = %v, want %v", inst.RunningSince, want)
	}
	p, err := s.PendingIntents(ctx)
	if err != nil || len(p) != 1 || p[0].Label != "vastfleet:old:2" {
		t.Errorf("PendingIntents = %+v, %v", p, err)
	}
	// The version-2 parts work on the upgraded file.
	if err := s.SetEstimate(ctx, 9001, 3, 1.5); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkBadHost(ctx, BadHost{MachineID: 222, FailedAt: t0, Until: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if ev, err := s.Events(ctx, 9001); err != nil || len(ev) != 1 {
		t.Errorf("Events = %+v, %v", ev, err)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("VASTFLEET_HOME", "/v")
	t.Setenv("XDG_DATA_HOME", "/x")
	t.Setenv("HOME", "/h")
	check := func(want string) {
		t.Helper()
		got, err := DefaultDir()
		if err != nil || got != want {
			t.Errorf("DefaultDir = %q, %v; want %q", got, err, want)
		}
	}
	check("/v")
	t.Setenv("VASTFLEET_HOME", "")
	check("/x/vastfleet")
	t.Setenv("XDG_DATA_HOME", "")
	check("/h/.local/share/vastfleet")
}

func TestMetaNotFound(t *testing.T) {
	s, _ := openTest(t)
	if _, err := s.GetMeta(context.Background(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	ctx := context.Background()
	s.SetMeta(ctx, "k", "1")
	s.SetMeta(ctx, "k", "2")
	if v, _ := s.GetMeta(ctx, "k"); v != "2" {
		t.Errorf("GetMeta = %q, want 2", v)
	}
}

func TestFleets(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	f := Fleet{Name: "b", CreatedAt: t0.Add(time.Second), Spec: json.RawMessage(`{"gpus":"4090"}`), EstDPH: 1.25, EstHours: 4, EstCost: 5}
	if err := s.CreateFleet(ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateFleet(ctx, Fleet{Name: "a", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateFleet(ctx, f); !errors.Is(err, ErrConflict) {
		t.Errorf("duplicate CreateFleet = %v, want ErrConflict", err)
	}
	got, err := s.GetFleet(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	f.State = FleetActive
	if diff := cmp.Diff(f, got); diff != "" {
		t.Errorf("GetFleet (-want +got):\n%s", diff)
	}
	if _, err := s.GetFleet(ctx, "zz"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetFleet missing = %v", err)
	}
	for name, want := range map[string]bool{"a": true, "b": true, "zz": false} {
		if ok, err := s.FleetExists(ctx, name); err != nil || ok != want {
			t.Errorf("FleetExists(%q) = %v, %v; want %v", name, ok, err, want)
		}
	}
	if err := s.SetFleetState(ctx, "b", FleetDone); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFleetState(ctx, "b", "weird"); err == nil {
		t.Error("bad state accepted")
	}
	if err := s.SetFleetState(ctx, "zz", FleetDone); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetFleetState missing = %v", err)
	}
	all, err := s.ListFleets(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "a" || all[1].State != FleetDone || string(all[0].Spec) != "{}" {
		t.Errorf("ListFleets = %+v, %v", all, err)
	}
}

func TestIntentLifecycle(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustFleet(t, s, "f")
	in, err := s.NewIntent(ctx, "f", 11, 22, []byte(`{"image":"x"}`), t0, label("f"))
	if err != nil {
		t.Fatal(err)
	}
	if in.ID == 0 || in.Label != fmt.Sprintf("vastfleet:f:%d", in.ID) || in.State != IntentPending || !in.CreatedAt.Equal(t0) {
		t.Fatalf("NewIntent = %+v", in)
	}
	byLabel, err := s.IntentByLabel(ctx, in.Label)
	if err != nil || byLabel.ID != in.ID || string(byLabel.Request) != `{"image":"x"}` {
		t.Fatalf("IntentByLabel = %+v, %v", byLabel, err)
	}
	if _, err := s.IntentByLabel(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("IntentByLabel missing = %v", err)
	}
	in2, err := s.CreateIntent(ctx, Intent{Fleet: "f", OfferID: 12, MachineID: 23, Label: "explicit", CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateIntent(ctx, Intent{Fleet: "f", OfferID: 12, Label: "explicit", CreatedAt: t0}); err == nil {
		t.Error("duplicate label accepted")
	}
	if _, err := s.NewIntent(ctx, "no-such-fleet", 1, 2, nil, t0, label("x")); err == nil {
		t.Error("intent for a missing fleet accepted")
	}
	p, _ := s.PendingIntents(ctx)
	if len(p) != 2 {
		t.Fatalf("PendingIntents = %+v", p)
	}

	now := t0.Add(time.Minute)
	if err := s.RecordCreated(ctx, in.ID, Instance{ID: 9001, GPUName: "RTX 4090", NumGPUs: 1, DPHTotal: 0.4}, now); err != nil {
		t.Fatal(err)
	}
	// Replays are harmless; a different instance is a conflict.
	if err := s.RecordCreated(ctx, in.ID, Instance{ID: 9001, GPUName: "RTX 4090", NumGPUs: 1, DPHTotal: 0.4}, now); err != nil {
		t.Errorf("replay: %v", err)
	}
	if err := s.ResolveIntent(ctx, in.ID, 9002, now); !errors.Is(err, ErrConflict) {
		t.Errorf("re-resolve to another instance = %v, want ErrConflict", err)
	}
	if err := s.FailIntent(ctx, in.ID, "x", now); !errors.Is(err, ErrConflict) {
		t.Errorf("FailIntent on created = %v, want ErrConflict", err)
	}
	if err := s.FailIntent(ctx, in2.ID, "no_such_ask", now); err != nil {
		t.Fatal(err)
	}
	if err := s.FailIntent(ctx, 12345, "x", now); !errors.Is(err, ErrNotFound) {
		t.Errorf("FailIntent missing = %v", err)
	}
	got, _ := s.Intent(ctx, in.ID)
	if got.State != IntentCreated || got.InstanceID != 9001 || !got.UpdatedAt.Equal(now) {
		t.Errorf("resolved intent = %+v", got)
	}
	got2, _ := s.Intent(ctx, in2.ID)
	if got2.State != IntentFailed || got2.Error != "no_such_ask" {
		t.Errorf("failed intent = %+v", got2)
	}
	if p, _ := s.PendingIntents(ctx); len(p) != 0 {
		t.Errorf("PendingIntents after resolve = %+v", p)
	}
	inst, err := s.Instance(ctx, 9001)
	if err != nil {
		t.Fatal(err)
	}
	want := Instance{ID: 9001, IntentID: in.ID, Fleet: "f", OfferID: 11, MachineID: 22, GPUName: "RTX 4090", NumGPUs: 1,
		DPHTotal: 0.4, Label: in.Label, Wanted: WantRunning, CreatedAt: now, LastSeenAt: now}
	if diff := cmp.Diff(want, inst); diff != "" {
		t.Errorf("instance (-want +got):\n%s", diff)
	}
	// A failed intent whose instance turns up later still resolves.
	if err := s.RecordCreated(ctx, in2.ID, Instance{ID: 9003}, now); err != nil {
		t.Errorf("late resolve of failed intent: %v", err)
	}
}

func TestInstanceLifecycleAndEvents(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustFleet(t, s, "f")
	in, _ := s.NewIntent(ctx, "f", 1, 2, nil, t0, label("f"))
	if err := s.RecordCreated(ctx, in.ID, Instance{ID: 7, State: ""}, t0); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		state string
		at    time.Duration
	}{{"loading", time.Minute}, {"loading", 2 * time.Minute}, {"running", 5 * time.Minute}, {"running", 6 * time.Minute}, {"stopped", 60 * time.Minute}}
	for _, st := range steps {
		if st.state == "stopped" {
			// The tool's own stop: dated at the listing that shows it.
			if err := s.SetWanted(ctx, 7, WantParked); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.UpdateSeen(ctx, 7, st.state, "127.0.0.1", 20007, "ssh://root@127.0.0.1:20007", t0.Add(st.at)); err != nil {
			t.Fatal(err)
		}
		if st.at == 6*time.Minute {
			i, _ := s.Instance(ctx, 7)
			if !i.RunningSince.Equal(t0.Add(3*time.Minute+30*time.Second)) || i.SSHURL != "ssh://root@127.0.0.1:20007" {
				t.Errorf("while running: %+v", i)
			}
		}
	}
	i, _ := s.Instance(ctx, 7)
	if !i.RunningSince.IsZero() || i.State != "stopped" || !i.LastSeenAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("after stop: %+v", i)
	}
	if at, err := s.LastListed(ctx); err != nil || !at.Equal(t0.Add(time.Hour)) {
		t.Errorf("LastListed = %v, %v; want the last listing, %v", at, err, t0.Add(time.Hour))
	}
	if err := s.SetEstimate(ctx, 7, 2, 0.8); err != nil {
		t.Fatal(err)
	}
	if err := s.RequestDestroy(ctx, 7, t0.Add(61*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.RequestDestroy(ctx, 7, t0.Add(62*time.Minute)); err != nil {
		t.Fatal(err)
	}
	i, _ = s.Instance(ctx, 7)
	if i.Wanted != WantDestroy || !i.DestroyRequestedAt.Equal(t0.Add(61*time.Minute)) || !i.Live() || *i.EstHours != 2 || *i.EstCost != 0.8 {
		t.Errorf("after destroy request: %+v", i)
	}
	if live, _ := s.LiveInstances(ctx); len(live) != 1 {
		t.Errorf("LiveInstances = %d rows, want 1 (destroy requested is still live)", len(live))
	}
	if err := s.MarkGone(ctx, 7, t0.Add(63*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkGone(ctx, 7, t0.Add(64*time.Minute)); err != nil {
		t.Fatal(err)
	}
	i, _ = s.Instance(ctx, 7)
	if !i.GoneAt.Equal(t0.Add(63 * time.Minute)) {
		t.Errorf("GoneAt = %v", i.GoneAt)
	}
	if live, _ := s.LiveInstances(ctx); len(live) != 0 {
		t.Errorf("LiveInstances = %+v, want none", live)
	}
	if all, _ := s.Instances(ctx, InstanceFilter{Fleet: "f", IncludeGone: true}); len(all) != 1 {
		t.Errorf("Instances(IncludeGone) = %d rows", len(all))
	}
	if other, _ := s.Instances(ctx, InstanceFilter{Fleet: "g", IncludeGone: true}); len(other) != 0 {
		t.Errorf("Instances(fleet g) = %d rows", len(other))
	}
	ev, err := s.Events(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	wantEv := []Event{
		{7, "", "loading", t0.Add(30 * time.Second)},                      // seen a minute after the insert: dated mid-window
		{7, "loading", "running", t0.Add(3*time.Minute + 30*time.Second)}, // into running after a 3-minute gap: mid-window too
		{7, "running", "stopped", t0.Add(time.Hour)},
		{7, "stopped", StateGone, t0.Add(63 * time.Minute)},
	}
	if diff := cmp.Diff(wantEv, ev); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// A listing that shows it again wins: live again.
	if err := s.UpdateSeen(ctx, 7, "running", "", 0, "", t0.Add(70*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if i, _ := s.Instance(ctx, 7); !i.Live() || !i.RunningSince.Equal(t0.Add(70*time.Minute)) {
		t.Errorf("resurrected: %+v", i)
	}
	for name, err := range map[string]error{
		"UpdateSeen":     s.UpdateSeen(ctx, 99, "running", "", 0, "", t0),
		"RequestDestroy": s.RequestDestroy(ctx, 99, t0),
		"MarkGone":       s.MarkGone(ctx, 99, t0),
		"SetEstimate":    s.SetEstimate(ctx, 99, 1, 1),
		"SetWanted":      s.SetWanted(ctx, 99, WantParked),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s on missing instance = %v, want ErrNotFound", name, err)
		}
	}
	if _, err := s.Instance(ctx, 99); !errors.Is(err, ErrNotFound) {
		t.Errorf("Instance missing = %v", err)
	}
}

func TestUpsertAdoptKeepsLifecycle(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if err := s.UpsertInstance(ctx, Instance{ID: 5, Label: "stray", State: "running", GPUName: "A100"}, t0); err != nil {
		t.Fatal(err)
	}
	s.RequestDestroy(ctx, 5, t0.Add(time.Minute))
	if err := s.UpsertInstance(ctx, Instance{ID: 5, State: "running", GPUName: "A100 SXM4"}, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	i, _ := s.Instance(ctx, 5)
	if i.Wanted != WantDestroy || i.Label != "stray" || i.GPUName != "A100 SXM4" || !i.RunningSince.Equal(t0) || !i.CreatedAt.Equal(t0) {
		t.Errorf("after re-upsert: %+v", i)
	}
}

func TestBadHosts(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for id, until := range map[int64]time.Duration{1: time.Hour, 2: 2 * time.Hour, 3: -time.Minute} {
		if err := s.MarkBadHost(ctx, BadHost{MachineID: id, Reason: "ssh timeout", FailedAt: t0, Until: t0.Add(until)}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(now time.Time) []int64 {
		hs, err := s.BadHosts(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, h := range hs {
			out = append(out, h.MachineID)
		}
		return out
	}
	if got := ids(t0); !cmp.Equal(got, []int64{1, 2}) {
		t.Errorf("BadHosts(t0) = %v", got)
	}
	if got := ids(t0.Add(90 * time.Minute)); !cmp.Equal(got, []int64{2}) {
		t.Errorf("BadHosts(t0+90m) = %v", got)
	}
	s.ClearBadHosts(ctx, 2)
	if got := ids(t0); !cmp.Equal(got, []int64{1}) {
		t.Errorf("after clear 2: %v", got)
	}
	s.ClearBadHosts(ctx)
	if got := ids(t0.Add(-time.Hour)); len(got) != 0 {
		t.Errorf("after clear all: %v", got)
	}
}

// A constraint violation part-way through a transaction leaves nothing.
func TestFailedCallWritesNothing(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustFleet(t, s, "f")
	a, _ := s.NewIntent(ctx, "f", 1, 2, nil, t0, label("f"))
	b, _ := s.NewIntent(ctx, "f", 1, 2, nil, t0, label("f"))
	if err := s.RecordCreated(ctx, a.ID, Instance{ID: 100}, t0); err != nil {
		t.Fatal(err)
	}
	// Resolving b succeeds inside the transaction, then the instance insert
	// fails its CHECK (bad wanted value): the resolve must roll back too.
	err := s.RecordCreated(ctx, b.ID, Instance{ID: 101, Wanted: "bogus"}, t0)
	if err == nil {
		t.Fatal("want constraint error")
	}
	got, _ := s.Intent(ctx, b.ID)
	if got.State != IntentPending || got.InstanceID != 0 {
		t.Errorf("intent after failed RecordCreated = %+v, want still pending", got)
	}
	if _, err := s.Instance(ctx, 101); !errors.Is(err, ErrNotFound) {
		t.Errorf("instance 101 exists after failed call: %v", err)
	}
	// NewIntent whose label collides: the insert happened, the label update
	// fails; no row may remain.
	if _, err := s.NewIntent(ctx, "f", 1, 2, nil, t0, func(int64) string { return a.Label }); err == nil {
		t.Fatal("want unique-label error")
	}
	var n int
	s.db.QueryRow("SELECT COUNT(*) FROM intents").Scan(&n)
	if n != 2 {
		t.Errorf("intents = %d, want 2", n)
	}
}

func TestConcurrentIntentWriters(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	mustFleet(t, s, "f")
	// A second handle on the same file, as another process would have.
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s
			if w%2 == 1 {
				st = s2
			}
			for k := range each {
				in, err := st.NewIntent(ctx, "f", int64(w*1000+k), 1, nil, t0, label("f"))
				if err != nil {
					errs <- err
					return
				}
				if err := st.RecordCreated(ctx, in.ID, Instance{ID: in.ID + 50000}, t0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	live, _ := s.LiveInstances(ctx)
	if len(live) != writers*each {
		t.Errorf("live = %d, want %d", len(live), writers*each)
	}
}

func TestIDIsDrawnOnceAndKept(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.ID(ctx)
	if err != nil || len(id) != 8 {
		t.Fatalf("ID() = %q, %v; want 8 hex digits", id, err)
	}
	again, _ := s.ID(ctx)
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reopened, _ := s.ID(ctx)
	if again != id || reopened != id {
		t.Errorf("ID changed: %q, then %q, after reopening %q", id, again, reopened)
	}
	other, err := Open(ctx, filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if oid, _ := other.ID(ctx); oid == id {
		t.Errorf("two stores drew the same id %q", id)
	}
}

// A change seen by a poll is dated mid-way since the previous sighting
// while the tool watched; after a long gap, at the sighting.
func TestChangedAt(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		last, now, want time.Time
	}{
		{t0, t0.Add(10 * time.Second), t0.Add(5 * time.Second)},
		{t0, t0.Add(time.Minute), t0.Add(30 * time.Second)},
		{t0, t0.Add(time.Hour), t0.Add(time.Hour)},
		{time.Time{}, t0, t0},
		{t0.Add(time.Second), t0, t0},
	} {
		if got := ChangedAt(c.last, c.now); !got.Equal(c.want) {
			t.Errorf("ChangedAt(%v, %v) = %v, want %v", c.last, c.now, got, c.want)
		}
	}
}

// TestRecordBandwidth: one transaction of reports updates each known
// instance, skips unknown ids, only ever raises the charge, and leaves an
// unchanged row alone.
func TestRecordBandwidth(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for _, id := range []int64{1, 2, 3} {
		if err := s.UpsertInstance(ctx, Instance{ID: id, State: "running", GPUName: "A100"}, t0); err != nil {
			t.Fatal(err)
		}
	}
	t1 := t0.Add(time.Minute)
	err := s.RecordBandwidth(ctx, []BandwidthReport{
		{ID: 1, DownCost: 0.01, UpCost: 0.02, DownMbps: 500, Billed: 0.5},
		{ID: 99, DownCost: 1, Billed: 7}, // not ours
		{ID: 2, DownCost: 0.03, Billed: 0.25},
	}, t1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]Bandwidth{
		1: {DownCost: 0.01, UpCost: 0.02, DownMbps: 500, Billed: ptr(0.5), BilledAt: t1},
		2: {DownCost: 0.03, Billed: ptr(0.25), BilledAt: t1},
		3: {},
	}
	check := func(when string) {
		t.Helper()
		for id, w := range want {
			got, err := s.Instance(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(w, got.Bandwidth); d != "" {
				t.Errorf("%s: instance %d bandwidth (-want +got):\n%s", when, id, d)
			}
		}
		if _, err := s.Instance(ctx, 99); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: a report made instance 99: %v", when, err)
		}
	}
	check("first reports")
	// A lower charge never lowers the record; the same report again
	// changes nothing, not even the time.
	t2 := t1.Add(time.Minute)
	if err := s.RecordBandwidth(ctx, []BandwidthReport{{ID: 1, DownCost: 0.01, UpCost: 0.02, DownMbps: 500, Billed: 0.5},
		{ID: 2, DownCost: 0.03, Billed: 0.1}}, t2); err != nil {
		t.Fatal(err)
	}
	want[2] = Bandwidth{DownCost: 0.03, Billed: ptr(0.25), BilledAt: t1}
	check("repeated reports")
	if err := s.RecordBandwidth(ctx, []BandwidthReport{{ID: 2, DownCost: 0.03, Billed: 0.75}}, t2); err != nil {
		t.Fatal(err)
	}
	want[2] = Bandwidth{DownCost: 0.03, Billed: ptr(0.75), BilledAt: t2}
	check("a higher charge")
}

func ptr[T any](v T) *T { return &v }

// A rate change keeps the old rates for the time before it, survives a
// reopen, and the same rates again record nothing; an unknown instance
// is an error that writes nothing.
func TestChangeRates(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	if err := s.UpsertInstance(ctx, Instance{ID: 5, State: "running", DPHTotal: 0.30, StorageDPH: 0.02}, t0); err != nil {
		t.Fatal(err)
	}
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	for _, c := range []struct {
		dph, storage float64
		at           time.Time
	}{{0.40, 0.02, t1}, {0.40, 0, t2}, {0.55, 0, t2}} {
		if err := s.ChangeRates(ctx, 5, c.dph, c.storage, c.at); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ChangeRates(ctx, 99, 1, 0, t2); !errors.Is(err, ErrNotFound) {
		t.Errorf("rates of an unknown instance: err %v, want ErrNotFound", err)
	}
	s.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.RateChanges(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []RateChange{
		{InstanceID: 5, At: t1, FromDPHTotal: 0.30, FromStorageDPH: 0.02, ToDPHTotal: 0.40, ToStorageDPH: 0.02},
		{InstanceID: 5, At: t2, FromDPHTotal: 0.40, FromStorageDPH: 0.02, ToDPHTotal: 0.55, ToStorageDPH: 0.02},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("rate changes (-want +got):\n%s", d)
	}
	in, err := s.Instance(ctx, 5)
	if err != nil || in.DPHTotal != 0.55 || in.StorageDPH != 0.02 {
		t.Errorf("instance after the changes: %+v, %v; want $0.55/hr with $0.02 storage", in, err)
	}
	if rc, err := s.RateChanges(ctx, 99); err != nil || len(rc) != 0 {
		t.Errorf("rate changes of 99: %v, %v", rc, err)
	}
}
