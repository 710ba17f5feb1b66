package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func fp(v float64) *float64 { return &v }

func seedForExport(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	mustFleet(t, s, "f")
	in, _ := s.NewIntent(ctx, "f", 501, 601, nil, t0, label("f"))
	if err := s.RecordCreated(ctx, in.ID, Instance{ID: 9001, GPUName: "RTX 4090", NumGPUs: 2, DPHTotal: 0.75,
		State: "running", SSHHost: "ssh4.vast.ai", SSHPort: 20001, SSHURL: "ssh://root@ssh4.vast.ai:20001",
		Experiment: "sweep-a", EstHours: fp(3), EstCost: fp(2.25), CreatedAt: t0.Add(1500 * time.Millisecond)}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertInstance(ctx, Instance{ID: 9002, OfferID: 502, GPUName: "H100 SXM", NumGPUs: 8, DPHTotal: 20,
		State: "loading", CreatedAt: t0.Add(time.Minute)}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertInstance(ctx, Instance{ID: 9003, OfferID: 503, GPUName: "A100", NumGPUs: 1, State: "exited", CreatedAt: t0}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkGone(ctx, 9003, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
}

const wantExport = `[
  {
    "instance_id": 9001,
    "offer_id": 501,
    "gpu_name": "RTX 4090",
    "num_gpus": 2,
    "dph": 0.75,
    "ssh_url": "ssh://root@ssh4.vast.ai:20001",
    "ssh_host": "ssh4.vast.ai",
    "ssh_port": 20001,
    "created_at": "2026-12-02T14:00:01Z",
    "status": "running",
    "experiment": "sweep-a",
    "estimated_hours": 3,
    "estimated_cost": 2.25
  },
  {
    "instance_id": 9002,
    "offer_id": 502,
    "gpu_name": "H100 SXM",
    "num_gpus": 8,
    "dph": 20,
    "ssh_url": "",
    "ssh_host": "",
    "ssh_port": 0,
    "created_at": "2026-12-02T14:01:00Z",
    "status": "loading",
    "experiment": "",
    "estimated_hours": null,
    "estimated_cost": null
  }
]
`

func TestExportVastInstances(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	seedForExport(t, s)
	var buf bytes.Buffer
	if err := s.ExportVastInstances(ctx, &buf, false); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantExport, buf.String()); diff != "" {
		t.Errorf("export (-want +got):\n%s", diff)
	}
	// Exactly the thirteen keys, on every entry.
	var entries []map[string]any
	json.Unmarshal(buf.Bytes(), &entries)
	want := []string{"created_at", "dph", "estimated_cost", "estimated_hours", "experiment", "gpu_name", "instance_id",
		"num_gpus", "offer_id", "ssh_host", "ssh_port", "ssh_url", "status"}
	for _, e := range entries {
		var keys []string
		for k := range e {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, want) {
			t.Errorf("keys %v, want %v", keys, want)
		}
	}
	buf.Reset()
	s.ExportVastInstances(ctx, &buf, true)
	if !strings.Contains(buf.String(), `"instance_id": 9003`) {
		t.Error("includeGone export lacks the gone instance")
	}
	empty, _ := openTest(t)
	buf.Reset()
	empty.ExportVastInstances(ctx, &buf, true)
	if buf.String() != "[]\n" {
		t.Errorf("empty export = %q", buf.String())
	}
}

func TestImportRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	seedForExport(t, s)
	var first bytes.Buffer
	s.ExportVastInstances(ctx, &first, true)

	dst, _ := openTest(t)
	n, err := dst.ImportVastInstances(ctx, bytes.NewReader(first.Bytes()), t0.Add(2*time.Hour))
	if err != nil || n != 3 {
		t.Fatalf("import = %d, %v", n, err)
	}
	var second bytes.Buffer
	dst.ExportVastInstances(ctx, &second, true)
	if diff := cmp.Diff(first.String(), second.String()); diff != "" {
		t.Errorf("round trip (-first +second):\n%s", diff)
	}
	i, _ := dst.Instance(ctx, 9001)
	if i.Fleet != "" || i.Experiment != "sweep-a" || i.State != "running" || !i.LastSeenAt.Equal(t0.Add(2*time.Hour)) || !i.Live() {
		t.Errorf("imported row = %+v", i)
	}
	// Importing into the original store keeps what only it knows.
	if _, err := s.ImportVastInstances(ctx, bytes.NewReader(first.Bytes()), t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	i, _ = s.Instance(ctx, 9001)
	if i.Fleet != "f" || i.IntentID == 0 || i.Label != "vastfleet:f:1" || i.MachineID != 601 {
		t.Errorf("re-import clobbered local fields: %+v", i)
	}
	if g, _ := s.Instance(ctx, 9003); g.Live() {
		t.Error("re-import resurrected a gone instance")
	}
}

const goodEntry = `{"instance_id": 1, "offer_id": 2, "gpu_name": "RTX 3090", "num_gpus": 1, "dph": 0.2, "ssh_url": "", "ssh_host": "", "ssh_port": 0, "created_at": "2026-12-01T10:00:00Z", "status": "running", "experiment": "", "estimated_hours": null, "estimated_cost": null}`

func entryWith(id int, edit func(m map[string]any)) string {
	var m map[string]any
	json.Unmarshal([]byte(goodEntry), &m)
	m["instance_id"] = id
	if edit != nil {
		edit(m)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func TestImportMalformedWritesNothing(t *testing.T) {
	ctx := context.Background()
	good := func(id int) string { return entryWith(id, nil) }
	arr := func(entries ...string) string { return "[" + strings.Join(entries, ",") + "]" }
	tests := []struct {
		name, in, want string
	}{
		{"bad created_at", arr(good(11), good(12), good(13), entryWith(14, func(m map[string]any) { m["created_at"] = "yesterday" })),
			`vast-instances.json: entry 3: "created_at": parsing time "yesterday": want RFC 3339 like 2026-12-02T14:00:00Z`},
		{"not an array", `{"instance_id": 1}`, `vast-instances.json: want a JSON array of instances, got {"instance_id": 1}`},
		{"null", `null`, `vast-instances.json: want a JSON array of instances, got null`},
		{"truncated", `[` + good(11), `vast-instances.json: not valid JSON: unexpected EOF`},
		{"empty file", ``, `vast-instances.json: not valid JSON: EOF`},
		{"trailing", arr(good(11)) + ` []`, `vast-instances.json: trailing data`},
		{"entry not object", arr(good(11), `42`), `vast-instances.json: entry 1: want a JSON object, got 42`},
		{"unknown key", arr(entryWith(11, func(m map[string]any) { m["label"] = "x" })), `vast-instances.json: entry 0: "label": unknown key`},
		{"missing key", arr(entryWith(11, func(m map[string]any) { delete(m, "offer_id") })), `vast-instances.json: entry 0: "offer_id": required key is missing or null`},
		{"null required", arr(entryWith(11, func(m map[string]any) { m["status"] = nil })), `vast-instances.json: entry 0: "status": required key`},
		{"string id", arr(entryWith(11, func(m map[string]any) { m["offer_id"] = "2" })), `vast-instances.json: entry 0: "offer_id": want an integer, got "2"`},
		{"fractional gpus", arr(entryWith(11, func(m map[string]any) { m["num_gpus"] = 1.5 })), `vast-instances.json: entry 0: "num_gpus": want an integer, got 1.5`},
		{"zero id", arr(entryWith(0, nil)), `vast-instances.json: entry 0: "instance_id": want an id > 0, got 0`},
		{"negative offer", arr(entryWith(11, func(m map[string]any) { m["offer_id"] = -3 })), `vast-instances.json: entry 0: "offer_id": want an id > 0`},
		{"duplicate id", arr(good(11), good(12), good(11)), `vast-instances.json: entry 2: "instance_id": instance 11 is already listed at entry 0`},
		{"negative cost", arr(entryWith(11, func(m map[string]any) { m["estimated_cost"] = -1 })), `vast-instances.json: entry 0: "estimated_cost": want >= 0 or null`},
		{"date only", arr(entryWith(11, func(m map[string]any) { m["created_at"] = "2026-12-01" })), `vast-instances.json: entry 0: "created_at": parsing time "2026-12-01": want RFC 3339`},
		// Imported at t0 + 1 h: a creation time a day later would give
		// negative uptime, one from 1970 decades of cost.
		{"future created_at", arr(good(11), entryWith(12, func(m map[string]any) { m["created_at"] = t0.Add(25 * time.Hour).Format(time.RFC3339) })),
			`vast-instances.json: entry 1: "created_at": ` + t0.Add(25*time.Hour).Format(time.RFC3339) + ` is in the future`},
		{"year 1970", arr(entryWith(11, func(m map[string]any) { m["created_at"] = "1970-01-01T00:00:00Z" })),
			`vast-instances.json: entry 0: "created_at": 1970-01-01T00:00:00Z is before 2015`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openTest(t)
			seedForExport(t, s)
			var before bytes.Buffer
			s.ExportVastInstances(ctx, &before, true)
			n, err := s.ImportVastInstances(ctx, strings.NewReader(tc.in), t0.Add(time.Hour))
			if err == nil || n != 0 {
				t.Fatalf("import = %d, %v; want error", n, err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error\n %q\nwant prefix\n %q", err, tc.want)
			}
			var ie *ImportError
			if !errors.As(err, &ie) {
				t.Errorf("error is %T, want *ImportError", err)
			}
			var after bytes.Buffer
			s.ExportVastInstances(ctx, &after, true)
			if before.String() != after.String() {
				t.Error("store changed by a failed import")
			}
			for _, id := range []int64{11, 12, 13, 14} {
				if _, err := s.Instance(ctx, id); !errors.Is(err, ErrNotFound) {
					t.Errorf("instance %d written by failed import", id)
				}
			}
		})
	}
}

func TestImportOptionalNullsAndAbsent(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	in := "[" + entryWith(21, func(m map[string]any) {
		m["ssh_url"], m["ssh_host"], m["ssh_port"], m["experiment"] = nil, nil, nil, nil
		delete(m, "estimated_hours")
		delete(m, "estimated_cost")
	}) + "]"
	if n, err := s.ImportVastInstances(ctx, strings.NewReader(in), t0); err != nil || n != 1 {
		t.Fatalf("import = %d, %v", n, err)
	}
	i, _ := s.Instance(ctx, 21)
	if i.EstHours != nil || i.SSHPort != 0 || !i.CreatedAt.Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("imported = %+v", i)
	}
	if n, err := s.ImportVastInstances(ctx, strings.NewReader("[]"), t0); err != nil || n != 0 {
		t.Errorf("empty import = %d, %v", n, err)
	}
}

// FuzzDecodeVastInstances: the strict decoder never panics, and whatever it
// accepts satisfies the checks it promises.
func FuzzDecodeVastInstances(f *testing.F) {
	f.Add("[" + goodEntry + "]")
	f.Add(wantExport)
	f.Add(`[{"instance_id": 1}]`)
	f.Add(`[` + goodEntry + `,` + goodEntry + `]`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, in string) {
		recs, err := decodeVastInstances(strings.NewReader(in))
		if err != nil {
			var ie *ImportError
			if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), "vast-instances.json: ") {
				t.Fatalf("error %v is not a named ImportError", err)
			}
			return
		}
		seen := map[int64]bool{}
		for _, r := range recs {
			if r.InstanceID <= 0 || r.OfferID <= 0 || seen[r.InstanceID] {
				t.Fatalf("accepted bad record %+v", r)
			}
			seen[r.InstanceID] = true
			if _, err := time.Parse(time.RFC3339, r.CreatedAt); err != nil {
				t.Fatalf("accepted created_at %q", r.CreatedAt)
			}
		}
	})
}

func TestCheckCreatedAt(t *testing.T) {
	for _, tc := range []struct {
		created time.Time
		ok      bool
	}{
		{t0, true}, {t0.Add(-48 * time.Hour), true}, {t0.Add(2 * time.Minute), true}, // within the skew
		{t0.Add(MaxClockSkew + time.Second), false}, {time.Date(2014, 12, 31, 0, 0, 0, 0, time.UTC), false}, {time.Time{}, false},
	} {
		if err := CheckCreatedAt(tc.created, t0); (err == nil) != tc.ok {
			t.Errorf("CheckCreatedAt(%s): %v, want ok=%v", tc.created, err, tc.ok)
		}
	}
}
