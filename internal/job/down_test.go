package job

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// downRecord records job id as an up that was killed (kill -9) while its
// nodes ran would have left it.
func (e *env) downRecord(id string, runIDs []int64, results string) *Record {
	e.t.Helper()
	rec := &Record{ID: id, State: StateRunning, StartedAt: e.clock.Now(), Results: results,
		LocalDir: filepath.Join(e.dir, "results", id), AutoDestroy: true, RunIDs: runIDs, Started: true}
	if err := e.deps(nil).Records.Save(context.Background(), rec); err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// TestDownAfterACrashWritesTheResults: after up was killed, down writes
// findings.jsonl and items.jsonl from the coordinator's database and
// reports the real counts, as a clean finish does.
func TestDownAfterACrashWritesTheResults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := e.rent("crashed", 2)
	e.report("crashed", ids[0], 60, 10, 7)
	rec := e.downRecord("crashed", ids, "")
	// Why the run ended, with the node it ended without, is the report's.
	rec.Ended = fmt.Sprintf("run exited on 1 node(s); 1 node(s) stopped reporting; never heard from since the run began: instance %d", ids[1])
	rep, err := Down(context.Background(), e.deps(nil), rec, false)
	if err != nil {
		t.Fatal(err)
	}
	if saved, ok := SavedReport(e.deps(nil).Records, "crashed"); !ok || rep.Ended != rec.Ended || saved.Ended != rec.Ended {
		t.Errorf("report says the run ended %q (saved: %v), want %q", rep.Ended, saved, rec.Ended)
	}
	if rep.Findings != 60 || rep.ItemsDone != 7 || rep.ItemsLeft != 3 || rep.Live != 0 || rep.Ran != 2 {
		t.Errorf("report %+v", rep)
	}
	// Each node names its hardware as rented; the one that delivered
	// is the whole delivery summary.
	for _, n := range rep.Nodes {
		i := slices.Index(ids, n.ID)
		if want := fmt.Sprintf("%dx %s", e.offers[i].NumGPUs, e.offers[i].GPUName); n.Model != want {
			t.Errorf("instance %d: model %q, want %q", n.ID, n.Model, want)
		}
	}
	if d := rep.Delivery; d == nil || d.Instances != 1 || d.Best.ID != ids[0] || d.Worst.ID != ids[0] ||
		len(d.ByModel) != 1 || d.ByModel[0].ItemsDone != 7 || d.ByModel[0].Model != d.Best.Model {
		t.Errorf("delivery %+v", rep.Delivery)
	}
	if saved, ok := SavedReport(e.deps(nil).Records, "crashed"); !ok || !reflect.DeepEqual(saved.Delivery, rep.Delivery) {
		t.Errorf("saved delivery %+v, want %+v", saved.Delivery, rep.Delivery)
	}
	for file, lines := range map[string]int{"findings.jsonl": 60, "items.jsonl": 7} {
		b, err := os.ReadFile(filepath.Join(rec.LocalDir, file))
		if err != nil || strings.Count(string(b), "\n") != lines {
			t.Errorf("%s: %d lines, %v; want %d", file, strings.Count(string(b), "\n"), err, lines)
		}
	}
	if e.live() != 0 {
		t.Errorf("%d instances still bill", e.live())
	}
	got, err := e.deps(nil).Records.Load(context.Background(), "crashed")
	if err != nil || got.State != StateDone {
		t.Errorf("record after down: %+v, %v", got, err)
	}
}

// brokenCollect collects from every node but one, whose collect fails.
type brokenCollect struct{ bad int64 }

func (n brokenCollect) Select(_ context.Context, ids []int64) ([]Node, error) {
	var out []Node
	for _, id := range ids {
		out = append(out, Node{ID: id, Name: "node"})
	}
	return out, nil
}

func (brokenCollect) Sync(context.Context, []Node, string, string) (int, []StepResult, error) {
	return 0, nil, errors.New("not used")
}

func (brokenCollect) Exec(context.Context, []Node, string, string) ([]StepResult, error) {
	return nil, errors.New("not used")
}

func (n brokenCollect) Collect(_ context.Context, nodes []Node, _, _ string) ([]StepResult, error) {
	var out []StepResult
	for _, nd := range nodes {
		r := StepResult{ID: nd.ID, Node: nd.Name, Files: 1}
		if nd.ID == n.bad {
			r = StepResult{ID: nd.ID, Node: nd.Name, Error: "ssh: connection reset"}
		}
		out = append(out, r)
	}
	return out, nil
}

// TestDownDestroysWhenACollectFails: one node's collect fails; down still
// destroys every instance, then reports what it could not collect, and the
// outcome is partial (exit 3), not a fleet left billing.
func TestDownDestroysWhenACollectFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := e.rent("flaky", 4)
	rec := e.downRecord("flaky", ids, "/workspace/project/results")
	rep, err := Down(context.Background(), e.deps(brokenCollect{bad: ids[2]}), rec, false)
	if !errors.Is(err, ErrPartial) || !strings.Contains(err.Error(), "collect failed on 1 of 4") {
		t.Errorf("err %v, want partial: collect failed on 1 of 4", err)
	}
	if e.live() != 0 || rep == nil || rep.Live != 0 {
		t.Fatalf("%d instances still bill; report %+v", e.live(), rep)
	}
	missed := 0
	for _, ev := range e.events {
		if m, ok := ev.(CollectMissed); ok && m.ID == ids[2] {
			missed++
		}
	}
	if missed != 1 {
		t.Errorf("the node not collected was named %d times; events %v", missed, e.events)
	}
}

// TestDownAfterAKillDuringDestroy: up was killed after the marketplace
// destroyed an instance but before the store knew; down's first try
// counts the instance as destroyed instead of failing on its absence.
func TestDownAfterAKillDuringDestroy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := e.rent("halfgone", 3)
	if err := e.client.DestroyInstance(context.Background(), ids[0]); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	rec := e.downRecord("halfgone", ids, "/workspace/project/results")
	rep, err := Down(context.Background(), e.deps(brokenCollect{}), rec, false)
	if err != nil {
		t.Fatalf("down: %v", err)
	}
	if e.live() != 0 || rep.Live != 0 {
		t.Errorf("%d instances still bill; report %+v", e.live(), rep)
	}
}
