package job

import (
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// Event is one thing that happened to a job. The command line renders
// events as the live view, log lines or JSON.
type Event interface{ JobID() string }

// About names the job an event is about.
type About struct {
	Job string `json:"job"`
}

// JobID is the job the event is about.
func (a About) JobID() string { return a.Job }

// Dashboard: the job's live dashboard.
type Dashboard struct {
	About
	URL string `json:"url"`
}

// LaunchResumed: a launch cut off is resumed within its deadline.
type LaunchResumed struct{ About }

// Launched: the launch is over and these nodes are ready.
type Launched struct {
	About
	Ready, Asked, Rented, Failed int
	DPH                          float64
}

// StepFailed: a step failed on a node, which is left out of the run.
type StepFailed struct {
	About
	Step, Node string
	ID         int64
	Why        string
}

// Synced: the workdir reached the nodes.
type Synced struct {
	About
	Dir   string
	Files int
	Sent  int64
	Nodes int
}

// SetupDone: one setup command ran on the nodes.
type SetupDone struct {
	About
	Index, Of, Nodes int
	Command          string
}

// Started: the go marker is on every node; the sessions run.
type Started struct {
	About
	Nodes int
	// Clock names the time the progress lines show: "market" on a
	// simulated market, whose clock runs ahead while vastfleet waits.
	Clock string
}

// Resumed: a job cut off while it ran is watched again.
type Resumed struct {
	About
	Running, Of int
}

// Progress: the run as the coordinator sees it.
type Progress struct {
	About
	At      time.Time
	Elapsed time.Duration
	Totals  wire.Totals
	Ended   int // nodes whose run exited
	Nodes   int
}

// Ended: why the run is over.
type Ended struct {
	About
	Why string
}

// CollectMissed: results not collected from a node, and why.
type CollectMissed struct {
	About
	ID  int64
	Why string
}

// Collected: results came back from the nodes.
type Collected struct {
	About
	Files, Nodes int
	Dir          string
}

// ResultsWritten: findings or item results written to a local file.
type ResultsWritten struct {
	About
	Kind  string // "finding" or "item result"
	Count int
	Path  string
}

// Destroyed: the job's instances were destroyed.
type Destroyed struct {
	About
	Count int
}

// KeptRunning: the nodes keep running (and billing), and why.
type KeptRunning struct {
	About
	Interrupted bool // the user chose keep; else auto_destroy is false
}
