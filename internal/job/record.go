package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// A job's states.
const (
	StateLaunching = "launching"
	StateRunning   = "running"
	StateKept      = "kept"
	StateDone      = "done"
)

// ErrNotFound: no job of that name.
var ErrNotFound = errors.New("job not found")

// Record is what status and down know of a job.
type Record struct {
	ID string `json:"id"` // the fleet's name
	// PID is the up process running the job; it holds jobs/<job>/up.lock
	// while it lives.
	PID         int       `json:"pid,omitempty"`
	File        string    `json:"file"`
	State       string    `json:"state"`
	StartedAt   time.Time `json:"started_at"`
	Results     string    `json:"results,omitempty"` // on the nodes
	LocalDir    string    `json:"local_results"`
	AutoDestroy bool      `json:"auto_destroy"`
	RunIDs      []int64   `json:"run_ids,omitempty"` // the instances that ran it
	Estimate    float64   `json:"estimate"`
	EstimateOf  string    `json:"estimate_of"`
	Dashboard   string    `json:"dashboard,omitempty"`
	// CoordAddr is where the job's coordinator listened: the agents have
	// its address, so a resumed up listens there again.
	CoordAddr string `json:"coord_addr,omitempty"`
	// Started: the go marker is on every node of RunIDs (the run began).
	Started bool `json:"started,omitempty"`
	// Culls are the nodes the cull policy destroyed during the run.
	Culls []Cull `json:"culls,omitempty"`
	// Ended is why the run ended, naming the nodes it ended without.
	Ended string `json:"ended,omitempty"`
}

// Records keeps job records in the store and exports each, as it is
// saved, to Dir/<job>/job.json.
type Records struct {
	Store *store.Store
	// Dir is the data dir's jobs/.
	Dir string
	// Clock stamps updates (default: wall time).
	Clock clock.Clock
}

// JobDir is the job's own directory (logs, exports), made if need be.
func (r *Records) JobDir(id string) (string, error) {
	d := filepath.Join(r.Dir, id)
	return d, os.MkdirAll(d, 0o700)
}

// Save writes the record to the store, then its export.
func (r *Records) Save(ctx context.Context, rec *Record) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	var now time.Time
	if r.Clock != nil {
		now = r.Clock.Now()
	} else {
		now = time.Now()
	}
	if err := r.Store.SaveJob(ctx, store.JobRow{ID: rec.ID, State: rec.State, StartedAt: rec.StartedAt, UpdatedAt: now, Record: b}); err != nil {
		return fmt.Errorf("job %s: %w", rec.ID, err)
	}
	d, err := r.JobDir(rec.ID)
	if err != nil {
		return fmt.Errorf("job %s: %w", rec.ID, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(d, "job.json"), b, 0o600); err != nil {
		return fmt.Errorf("job %s: exporting its record: %w", rec.ID, err)
	}
	return nil
}

// Load reads a job's record: the store's, else (a job from before the
// store kept jobs) its job.json.
func (r *Records) Load(ctx context.Context, id string) (*Record, error) {
	row, err := r.Store.Job(ctx, id)
	if err == nil {
		return decode(id, row.Record)
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(r.Dir, id, "job.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("job %q: %w (see `vastfleet status`)", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return decode(id, b)
}

func decode(id string, b []byte) (*Record, error) {
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	return &rec, nil
}

// List is every job, the store's and those only a job.json knows.
func (r *Records) List(ctx context.Context) ([]*Record, error) {
	rows, err := r.Store.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Record
	var ids []string
	for _, row := range rows {
		rec, err := decode(row.ID, row.Record)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
		ids = append(ids, row.ID)
	}
	ents, err := os.ReadDir(r.Dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range ents {
		if !e.IsDir() || slices.Contains(ids, e.Name()) {
			continue
		}
		rec, err := r.Load(ctx, e.Name())
		if errors.Is(err, ErrNotFound) {
			continue // a job dir made before its record (a detach starting)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// Find is the record of job id, as Load; no such job is the user's
// mistake (usage.Error).
func (r *Records) Find(ctx context.Context, id string) (*Record, error) {
	rec, err := r.Load(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, usage.Error{Err: err}
	}
	return rec, err
}

// ResultsDir is where a local up or down collected the job's results.
func (rec *Record) ResultsDir() (string, error) {
	if rec.LocalDir == "" {
		return "", fmt.Errorf("job %s has collected no results here yet (they land at its end, or with `vastfleet down %s`)", rec.ID, rec.ID)
	}
	return rec.LocalDir, nil
}

// State is the job's state, "" for a job with no record (the server asks
// of jobs it queued before they start).
func (r *Records) State(ctx context.Context, id string) (string, error) {
	rec, err := r.Load(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return rec.State, nil
}

// Dashboard is the job's live dashboard link; an error until it has one.
func (r *Records) Dashboard(ctx context.Context, id string) (string, error) {
	rec, err := r.Load(ctx, id)
	if err != nil {
		return "", err
	}
	if rec.Dashboard == "" {
		return "", fmt.Errorf("job %s has no dashboard yet", id)
	}
	return rec.Dashboard, nil
}
