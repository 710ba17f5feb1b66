package launch

import (
	"encoding/json"
	"time"
)

// Event kinds.
const (
	EvStart       = "start"       // the launch begins (or resumes)
	EvRented      = "rented"      // an instance was rented
	EvRentFailed  = "rent-failed" // a rent failed (offer gone, ...); the next offer is tried
	EvSubstitute  = "substitute"  // about to rent other than the announced offer (Spec.Accepted), re-costed
	EvReady       = "ready"       // an instance runs for the first time
	EvParked      = "parked"      // stopped after booting, waiting for the release
	EvRelease     = "release"     // the release wave starts
	EvRunning     = "running"     // a released instance runs again
	EvFailed      = "failed"      // an instance failed (boot, stall, offline, release timeout, outbid)
	EvOutbid      = "outbid"      // a rival outbid an interruptible instance (stopped without notice)
	EvRebid       = "rebid"       // an outbid instance's bid was raised (change bid)
	EvDestroyed   = "destroyed"   // an instance was destroyed (failed, surplus, unready at the end)
	EvCap         = "cap"         // a cap stopped a rent or the launch
	EvDeadline    = "deadline"    // the deadline hit
	EvProgress    = "progress"    // one per status tick
	EvWarn        = "warn"        // a transient problem (listing failed, ...)
	EvInterrupted = "interrupted" // the context was cancelled
	EvSummary     = "summary"     // the last event
	// EvShortHardware: a node's boot probe measured less than its offer
	// advertised (Event.Hardware has the figures); EvProbeFailed: its
	// probe failed, timed out or never came.
	EvShortHardware = "short_hardware"
	EvProbeFailed   = "probe_failed"
)

// Event is one thing that happened during a launch. With --json the CLI
// prints one per line.
type Event struct {
	Event      string    `json:"event"`
	At         time.Time `json:"at"`
	InstanceID int64     `json:"instance_id,omitempty"`
	OfferID    int64     `json:"offer_id,omitempty"`
	MachineID  int64     `json:"machine_id,omitempty"`
	State      string    `json:"state,omitempty"`
	Msg        string    `json:"msg,omitempty"`
	Progress   *Progress `json:"progress,omitempty"`
	// Hardware is set on short_hardware and probe_failed events.
	Hardware *HardwareCheck `json:"hardware,omitempty"`
	// Summary is set on the final event only; it is then marshalled flat as
	// {"event":"summary", <Summary's fields>}.
	Summary *Summary `json:"-"`
}

// MarshalJSON writes the summary event flat, with exactly the summary's keys.
func (e Event) MarshalJSON() ([]byte, error) {
	if e.Summary != nil {
		return json.Marshal(struct {
			Event string `json:"event"`
			*Summary
		}{EvSummary, e.Summary})
	}
	type plain Event
	return json.Marshal(plain(e))
}

// Progress is the state of the launch at one tick: what a live view shows.
type Progress struct {
	Asked     int `json:"asked"`
	Booting   int `json:"booting"`
	Parked    int `json:"parked"`
	Releasing int `json:"releasing"`
	Ready     int `json:"ready"`
	Failed    int `json:"failed"`
	Rented    int `json:"rented"`
	// Stages counts the booting nodes by where their boot is: pulling,
	// extracting, loading, ssh, agent, probe (hardware.go).
	Stages map[string]int `json:"stages,omitempty"`
	DPH    float64        `json:"dph"`   // $/hr of the live instances now
	Spent  float64        `json:"spent"` // $ spent so far (estimated from observed states)
	// TimeLeft until the deadline; 0 without a deadline.
	TimeLeft time.Duration `json:"time_left_ns"`
}

// Summary is the end of a launch.
type Summary struct {
	Asked int `json:"asked"`
	Ready int `json:"ready"`
	// MinReady is the quorum the launch was asked for: a launch that ends
	// with fewer ready exits 3.
	MinReady  int `json:"min_ready"`
	Replaced  int `json:"replaced"`  // rents beyond the asked count
	Failed    int `json:"failed"`    // instances that failed to boot, stalled, went offline or did not restart
	Destroyed int `json:"destroyed"` // instances this launch destroyed (failed, surplus, unready)
	// BootSpend is what the fleet's instances cost from the first rent to
	// the end of the launch, from the recorded state timeline.
	BootSpend float64 `json:"boot_spend"`
	DPHTotal  float64 `json:"dph_total"` // $/hr of the ready instances
	VCPU      float64 `json:"vcpu"`
	RAMGB     float64 `json:"ram_gb"`
	GPUs      int     `json:"gpus"`
	// StoppedAtCap names the cap that stopped renting ("budget cap $12.00"),
	// or is empty.
	StoppedAtCap string `json:"stopped_at_cap"`
	Fleet        string `json:"fleet"`
	// ReadyIDs are the instances running and meant to run at the end, in
	// id order; never null in JSON, so scripts can iterate it.
	ReadyIDs []int64 `json:"ready_ids"`
	Rented   int     `json:"rented"` // instances rented into the fleet, replacements included
	// Outbid counts the times a rival stopped one of the launch's
	// interruptible instances; Rebids the change bids that answered them.
	Outbid int `json:"outbid,omitempty"`
	Rebids int `json:"rebids,omitempty"`
	// ShortHardware counts the nodes whose boot probe measured less than
	// their offer advertised, or failed (short_hardware and probe_failed
	// events).
	ShortHardware int `json:"short_hardware,omitempty"`
	// Interrupted: the launch was cancelled (exit 130); --resume continues it.
	Interrupted bool `json:"interrupted"`
	// PastDeadlineS is how many marketplace seconds after the deadline the
	// launch ended (negative: before it); absent without a deadline.
	PastDeadlineS *float64 `json:"past_deadline_s,omitempty"`
	// Clock names the time the events' at is in: "wall", or "market"
	// for a simulated market's clock, which runs ahead while vastfleet
	// waits on it.
	Clock string `json:"clock"`

	// Not part of the JSON line.
	Elapsed time.Duration `json:"-"` // marketplace time from start to end
	EndedAt time.Time     `json:"-"` // when the launch completed (or stopped)
}
