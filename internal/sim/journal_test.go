package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/clock"
)

// openHarness serves a market persisted in dir.
func openHarness(t testing.TB, dir string, cfg Config) *harness {
	t.Helper()
	clk := clock.NewManual(t0)
	cfg.Clock = clk
	if cfg.APIKey == "" {
		cfg.APIKey = testKey
	}
	if cfg.Offers == 0 {
		cfg.Offers = 800
	}
	m, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	tt, _ := t.(*testing.T)
	return &harness{t: tt, m: m, clock: clk, srv: srv, key: cfg.APIKey}
}

// stateJSON is the market's state as it was last saved.
func stateJSON(t testing.TB, m *Market) string {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := json.MarshalIndent(m.st, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// loadedJSON is the state read back from dir's files.
func loadedJSON(t testing.TB, dir string) string {
	t.Helper()
	st, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		t.Fatalf("no market in %s", dir)
	}
	b, err := json.MarshalIndent(st, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// crashCopy copies the market's files as a crash at this moment would
// leave them: no Close, so the journal is whatever was appended.
func crashCopy(t testing.TB, dir string) string {
	t.Helper()
	dst := t.TempDir()
	for _, name := range []string{stateFile, journalFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func sameState(t testing.TB, what, got, want string) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("%s: state read back differs (-saved +read):\n%s", what, d)
	}
}

// journalWorkload makes every kind of change the market persists, calling
// after with each mutating request's name once it is answered.
func journalWorkload(h *harness, after func(string)) {
	t := h.t
	offers := h.search(`{"rentable":{"eq":true},"num_gpus":{"eq":"1"},"order":[["dph_total","asc"]],"type":"on-demand","allocated_storage":20,"limit":4}`)
	if len(offers) < 4 {
		t.Fatalf("%d offers", len(offers))
	}
	var ids []int64
	for i, o := range offers[:3] {
		ids = append(ids, h.create(o.ID, fmt.Sprintf("j%d", i)))
		after("create")
	}
	h.clock.Advance(10 * time.Minute) // they run, and bill
	h.do("PUT", fmt.Sprintf("/api/v0/instances/%d/", ids[0]), map[string]string{"label": "relabelled"}, nil)
	after("relabel")
	for i := range 5 { // past MaxLogs: the oldest are evicted
		h.do("PUT", fmt.Sprintf("/api/v0/instances/request_logs/%d/", ids[i%3]), map[string]string{"tail": "10"}, nil)
		after("request_logs")
	}
	line, _ := publicKeyLine(t)
	var key struct {
		Key sshKey `json:"key"`
	}
	h.do("POST", "/api/v0/ssh/", map[string]string{"ssh_key": line}, &key)
	after("create key")
	line2, _ := publicKeyLine(t)
	h.do("PUT", fmt.Sprintf("/api/v0/ssh/%d/", key.Key.ID), map[string]string{"ssh_key": line2}, nil)
	after("update key")
	h.do("POST", fmt.Sprintf("/api/v0/instances/%d/ssh/", ids[1]), map[string]string{"ssh_key": line}, nil)
	after("attach key")
	h.do("DELETE", fmt.Sprintf("/api/v0/ssh/%d/", key.Key.ID), nil, nil)
	after("delete key")
	h.clock.Advance(3 * time.Minute)
	h.setState(ids[1], "stopped")
	after("stop")
	h.clock.Advance(time.Minute)
	h.do("POST", "/sim/advance?d=7m", nil, nil)
	after("advance")
	h.setState(ids[1], "running")
	after("start")
	h.do("PUT", fmt.Sprintf("/api/v0/instances/reboot/%d/", ids[2]), nil, nil)
	after("reboot")
	h.clock.Advance(time.Minute)
	h.do("DELETE", fmt.Sprintf("/api/v0/instances/%d/", ids[2]), nil, nil)
	after("destroy")
	ids = append(ids, h.create(offers[3].ID, "late"))
	after("create")
	h.clock.Advance(time.Hour)
	h.do("PUT", fmt.Sprintf("/api/v0/instances/%d/", ids[3]), map[string]string{"label": "last"}, nil)
	after("relabel")
}

// TestJournalReplaysWritesWithoutClose: each mutating request appends one
// line and syncs once, the snapshot stays as Open wrote it, and the files
// a crash would leave read back as the state that was saved.
func TestJournalReplaysWritesWithoutClose(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir, Config{Seed: 5, MaxLogs: 3})
	defer h.m.Close()
	snap, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	syncs, lines := h.m.jr.cost.syncs, 1
	journalWorkload(h, func(what string) {
		t.Helper()
		lines++
		if got := h.m.jr.cost.syncs - syncs; got != 1 {
			t.Fatalf("%s: %d fsyncs, want 1", what, got)
		}
		syncs = h.m.jr.cost.syncs
		if b, _ := os.ReadFile(filepath.Join(dir, stateFile)); !bytes.Equal(b, snap) {
			t.Fatalf("%s rewrote the snapshot", what)
		}
		j, _ := os.ReadFile(filepath.Join(dir, journalFile))
		if n := bytes.Count(j, []byte("\n")); n != lines {
			t.Fatalf("%s: journal has %d lines, want %d", what, n, lines)
		}
		sameState(t, what, loadedJSON(t, crashCopy(t, dir)), stateJSON(t, h.m))
	})

	// The workload wrote every kind of change there is in a journal line
	// (those it cannot reach: TestJournalRareChanges).
	j, _ := os.ReadFile(filepath.Join(dir, journalFile))
	for _, field := range []string{`"instances":[{`, `"ledger_ext":[{`, `"ledger_from":`, `"logs":{`, `":null`, `"log_drop":`, `"log_add":[`, `"creates":{`, `"ssh_keys":[{`, `"ssh_keys":[]`} {
		if !bytes.Contains(j, []byte(field)) {
			t.Errorf("no journal line has %s", field)
		}
	}

	// The crashed copy opens, and goes on from where it was.
	cp := crashCopy(t, dir)
	want := stateJSON(t, h.m)
	h2 := openHarness(t, cp, Config{})
	if got := h2.m.st.Instances; len(got) != 4 || got[3].Label == nil || *got[3].Label != "last" {
		t.Fatalf("reopened: %d instances", len(got))
	}
	h2.m.Close()
	var a, b state
	json.Unmarshal([]byte(want), &a)
	json.Unmarshal([]byte(loadedJSON(t, cp)), &b)
	if d := cmp.Diff(a.body(), b.body()); d != "" {
		t.Errorf("reopened and closed: (-crashed +reopened)\n%s", d)
	}
}

// TestJournalRareChanges: changes no request makes today (an instance
// removed or reordered, a ledger entry rewritten, the ledger shrunk, a
// create count dropped) still read back as saved.
func TestJournalRareChanges(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir, Config{Seed: 5, MaxLogs: 3})
	defer h.m.Close()
	journalWorkload(h, func(string) {})
	edit := func(what string, f func(st *state)) {
		t.Helper()
		h.m.mu.Lock()
		f(h.m.st)
		h.m.mu.Unlock()
		if err := h.m.Save(); err != nil {
			t.Fatal(err)
		}
		sameState(t, what, loadedJSON(t, crashCopy(t, dir)), stateJSON(t, h.m))
	}
	edit("reorder", func(st *state) {
		st.Instances[0], st.Instances[1] = st.Instances[1], st.Instances[0]
	})
	edit("remove", func(st *state) {
		st.Instances = append(st.Instances[:1:1], st.Instances[2:]...)
	})
	edit("rewrite an entry", func(st *state) {
		st.Ledger[1].Kind, st.Ledger[2].From = "bandwidth", st.Ledger[2].From.Add(-time.Second)
	})
	edit("shrink the ledger", func(st *state) { st.Ledger = st.Ledger[:len(st.Ledger)-2] })
	edit("empty the ledger", func(st *state) { st.Ledger = nil })
	edit("drop a create count", func(st *state) {
		for k := range st.Creates {
			delete(st.Creates, k)
			break
		}
	})
	edit("all logs go", func(st *state) { clear(st.Logs); st.LogOrder = nil })
	edit("remove every instance", func(st *state) { st.Instances = nil })
	j, _ := os.ReadFile(filepath.Join(dir, journalFile))
	for _, field := range []string{`"order":[`, `"order":[]`, `"ledger_set":[{`, `"ledger_from":0`, `"creates":{"`} {
		if !bytes.Contains(j, []byte(field)) {
			t.Errorf("no journal line has %s", field)
		}
	}
}

// TestJournalTornLastLine: a crash mid-append leaves part of a line, which
// is ignored; a bad line before the end is an error naming it.
func TestJournalTornLastLine(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir, Config{Seed: 5, MaxLogs: 3})
	defer h.m.Close()
	var before, last string
	journalWorkload(h, func(string) { before, last = last, stateJSON(t, h.m) })

	cp := crashCopy(t, dir)
	path := filepath.Join(cp, journalFile)
	j, _ := os.ReadFile(path)
	cut := bytes.LastIndexByte(j[:len(j)-1], '\n') + 1
	lastLine := j[cut:]

	// The last append cut short: the state before it.
	os.WriteFile(path, append(j[:cut:cut], lastLine[:len(lastLine)/2]...), 0o600)
	sameState(t, "torn last line", loadedJSON(t, cp), before)
	// Cut just before its newline: still not a line.
	os.WriteFile(path, j[:len(j)-1], 0o600)
	sameState(t, "last line without its newline", loadedJSON(t, cp), before)
	// Garbage after the last whole line.
	os.WriteFile(path, append(j[:len(j):len(j)], "\x00\x00{\"sta"...), 0o600)
	sameState(t, "garbage after the last line", loadedJSON(t, cp), last)

	// Reopened after the torn line: its writes read back, not glued to
	// the torn part.
	os.WriteFile(path, append(j[:cut:cut], lastLine[:len(lastLine)/2]...), 0o600)
	h2 := openHarness(t, cp, Config{})
	h2.do("PUT", fmt.Sprintf("/api/v0/instances/%d/", h2.m.Instances()[0].ID), map[string]string{"label": "after the crash"}, nil)
	sameState(t, "written after reopening", loadedJSON(t, crashCopy(t, cp)), stateJSON(t, h2.m))
	h2.m.Close()

	// A bad line that is not the last is corruption, not a torn append.
	cp = crashCopy(t, dir)
	path = filepath.Join(cp, journalFile)
	lines := bytes.SplitAfter(j, []byte("\n"))
	lines[3] = []byte("{\"state\":{\"version\":1,\n")
	os.WriteFile(path, bytes.Join(lines, nil), 0o600)
	if _, err := loadState(cp); err == nil || !strings.Contains(err.Error(), journalFile+" line 4") {
		t.Fatalf("corrupt line 4: %v", err)
	}
	if _, err := Open(cp, Config{Clock: clock.NewManual(t0)}); err == nil || !strings.Contains(err.Error(), journalFile+" line 4") {
		t.Fatalf("Open with corrupt line 4: %v", err)
	}
}

// TestJournalCompaction: past its bound the journal becomes a snapshot and
// an empty journal, and so on Close; what was saved reads back each time.
func TestJournalCompaction(t *testing.T) {
	defer func(n int64) { journalMinBytes = n }(journalMinBytes)
	journalMinBytes = 0 // compact whenever the journal outgrows the snapshot
	dir := t.TempDir()
	h := openHarness(t, dir, Config{Seed: 5, MaxLogs: 3})
	journalWorkload(h, func(what string) {
		t.Helper()
		sameState(t, what, loadedJSON(t, crashCopy(t, dir)), stateJSON(t, h.m))
	})
	if h.m.st.Gen < 3 {
		t.Fatalf("generation %d: the journal was not compacted", h.m.st.Gen)
	}
	if err := h.m.Close(); err != nil {
		t.Fatal(err)
	}
	j, _ := os.ReadFile(filepath.Join(dir, journalFile))
	if want := fmt.Sprintf("{\"gen\":%d}\n", h.m.st.Gen); string(j) != want {
		t.Errorf("journal after Close: %q, want %q", j, want)
	}
	sameState(t, "after Close", loadedJSON(t, dir), stateJSON(t, h.m))
}

// TestJournalStaleNotReplayed: a crash after a compaction's snapshot but
// before its new journal leaves the old journal, which must not be
// replayed over the newer snapshot (it would undo what came after it).
func TestJournalStaleNotReplayed(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir, Config{Seed: 5, MaxLogs: 3})
	journalWorkload(h, func(string) {})
	old, _ := os.ReadFile(filepath.Join(dir, journalFile))
	id := h.m.Instances()[0].ID
	h.do("PUT", fmt.Sprintf("/api/v0/instances/%d/", id), map[string]string{"label": "newer"}, nil)
	h.m.mu.Lock()
	h.m.jr.compact = true
	if err := h.m.saveLocked(); err != nil {
		t.Fatal(err)
	}
	h.m.mu.Unlock()
	want := stateJSON(t, h.m)

	cp := crashCopy(t, dir)
	os.WriteFile(filepath.Join(cp, journalFile), old, 0o600)
	got := loadedJSON(t, cp)
	sameState(t, "stale journal", got, want)
	if !strings.Contains(got, `"label": "newer"`) {
		t.Fatal("the stale journal undid a later change")
	}
	h.m.Close()

	// A journal that claims a newer snapshot than there is: an error.
	os.WriteFile(filepath.Join(cp, journalFile), []byte("{\"gen\":99}\n"), 0o600)
	if _, err := loadState(cp); err == nil || !strings.Contains(err.Error(), "generation 99") {
		t.Fatalf("journal ahead of its snapshot: %v", err)
	}

	// A journal without a snapshot (a reset cut short) is not the new
	// market's.
	fresh := t.TempDir()
	os.WriteFile(filepath.Join(fresh, journalFile), old, 0o600)
	h3 := openHarness(t, fresh, Config{Seed: 5})
	if n := len(h3.m.Instances()); n != 0 {
		t.Fatalf("a new market has %d instances from a journal left behind", n)
	}
	h3.m.Close()
	sameState(t, "new market", loadedJSON(t, fresh), stateJSON(t, h3.m))
}

// TestResetRemovesJournal: sim reset forgets the journal with the
// snapshot, and starts the next market after the journaled sim time.
func TestResetRemovesJournal(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir, Config{Seed: 5})
	h.create(h.cheapOffer().ID, "x")
	h.clock.Advance(5 * time.Hour)
	h.do("PUT", fmt.Sprintf("/api/v0/instances/%d/", h.m.Instances()[0].ID), map[string]string{"label": "y"}, nil)
	simNow := h.clock.Now()
	cp := crashCopy(t, dir) // as a crash leaves it: the sim time only in the journal
	h.m.Close()
	if err := Reset(cp); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{stateFile, journalFile} {
		if _, err := os.Stat(filepath.Join(cp, name)); !os.IsNotExist(err) {
			t.Errorf("%s after reset: %v", name, err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(cp, resetFile))
	if want, _ := simNow.Add(time.Hour).MarshalText(); string(b) != string(want) {
		t.Errorf("reset-after %s, want %s", b, want)
	}
}

// benchMarket is a market in dir with n running instances.
func benchMarket(b *testing.B, dir string, n int) *harness {
	b.Helper()
	h := openHarness(b, dir, Config{Seed: 5, Offers: 3 * n, Balance: 1e9})
	made := 0
	for _, o := range h.m.Offers() {
		if made == n {
			break
		}
		st, _, _ := serve(h.m, "PUT", fmt.Sprintf("/api/v0/asks/%d/", o.ID), map[string]any{
			"client_id": "me", "image": "pytorch/pytorch:latest", "disk": 20, "label": fmt.Sprint("bench", made),
			"runtype": "ssh_direc ssh_proxy", "price": nil,
		})
		if st == 200 {
			made++
		}
	}
	if made < n {
		b.Fatalf("made %d instances of %d", made, n)
	}
	h.clock.Advance(time.Hour)
	serve(h.m, "POST", "/sim/advance?d=1s", nil)
	return h
}

// serve sends one request straight to the market's handler.
func serve(m *Market, method, path string, body any) (int, http.Header, []byte) {
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req := httptest.NewRequest(method, path, rd)
	req.RemoteAddr = "127.0.0.1:1"
	req.Header.Set("Authorization", "Bearer "+testKey)
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, req)
	return w.Code, w.Header(), w.Body.Bytes()
}

// BenchmarkJournal measures what one mutating request (a relabel) costs to
// persist in a market of 300 running instances: the whole snapshot as
// before (snapshot), or a journal line (journal); with the clock still
// between requests, or moving a second, so that every running instance's
// ledger entries grow. bytes/write and fsyncs/write are the figures.
//
//	go test -run '^$' -bench Journal ./internal/sim
func BenchmarkJournal(b *testing.B) {
	for _, step := range []time.Duration{0, time.Second} {
		for _, mode := range []string{"snapshot", "journal"} {
			b.Run(fmt.Sprintf("%s/clock+%v", mode, step), func(b *testing.B) {
				dir := b.TempDir()
				h := benchMarket(b, dir, 300)
				defer h.m.Close()
				ids := h.m.Instances()
				if mode == "snapshot" {
					h.m.dir = "" // the handler saves nothing; the loop saves as before
				}
				before := h.m.jr.cost
				var snapBytes int64
				b.ResetTimer()
				for i := range b.N {
					h.clock.Advance(step)
					if st, _, body := serve(h.m, "PUT", fmt.Sprintf("/api/v0/instances/%d/", ids[i%len(ids)].ID), map[string]string{"label": fmt.Sprint("l", i)}); st != 200 {
						b.Fatalf("relabel: %d %s", st, body)
					}
					if mode == "snapshot" {
						h.m.mu.Lock()
						s, err := json.Marshal(h.m.st)
						if err == nil {
							err = atomicfile.WriteFile(filepath.Join(dir, stateFile), s, 0o600)
						}
						h.m.mu.Unlock()
						if err != nil {
							b.Fatal(err)
						}
						snapBytes += int64(len(s))
					}
				}
				b.StopTimer()
				if mode == "snapshot" {
					h.m.dir = dir
					b.ReportMetric(float64(snapBytes)/float64(b.N), "bytes/write")
					b.ReportMetric(2, "fsyncs/write")
					b.ReportMetric(1, "snapshots/write")
					return
				}
				c := h.m.jr.cost
				b.ReportMetric(float64(c.written-before.written)/float64(b.N), "bytes/write")
				b.ReportMetric(float64(c.syncs-before.syncs)/float64(b.N), "fsyncs/write")
				b.ReportMetric(float64(c.snapshots-before.snapshots)/float64(b.N), "snapshots/write")
				if n := c.lines - before.lines; n > 0 {
					b.ReportMetric(float64(c.lineBytes-before.lineBytes)/float64(n), "bytes/line")
				}
			})
		}
	}
}
