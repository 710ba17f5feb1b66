package job

import (
	"fmt"
	"time"
)

// Payback is whether a replacement for a culled node is expected to pay
// for itself before the job ends, and the figures it was judged on.
//
// The replacement is expected to cost its $/hr for the time left, plus
// its image pull, and to deliver the fleet's median per dollar once it
// has loaded (Load: rented, booted, prepared): Median × DPH × (Left −
// Load) units. Those units are valued at the dearest price the cull
// policy lets a node charge, 1/(Below × Median) dollars a unit (a node
// dearer than that is culled). It pays when that value covers its cost:
//
//	Median × DPH × (Left − Load) / (Below × Median) ≥ DPH × Left + Pull
//
// that is, its own units per dollar over its whole stay, the load and
// the pull delivering nothing, stay at or above the cull's share of the
// median. Left is the time the job has left: until max_duration, or
// sooner the items left at the rate the fleet has done them so far; with
// neither, it is unknown and a replacement is rented (the job may run
// on for long).
type Payback struct {
	DPH    float64       `json:"dph"`
	Pull   float64       `json:"pull"`
	Load   time.Duration `json:"load_ns"`
	Left   time.Duration `json:"left_ns"`
	LeftOf string        `json:"left_of"`
	Median float64       `json:"median_per_dph"`
	Below  float64       `json:"below"`
	// Cost and Worth are the two sides ($); Share is the replacement's
	// units per dollar over its stay as a share of the median (it pays
	// at Below or more). All 0 when Left is unknown.
	Cost  float64 `json:"cost"`
	Worth float64 `json:"worth"`
	Share float64 `json:"share"`
	Pays  bool    `json:"pays"`
}

// payback judges a replacement at dph $/hr with an image pull of pull $,
// expected to load in load, with left of the job left (known says it
// is; of says where it comes from), against the fleet's median per $/hr
// and the cull's share below.
func payback(dph, pull float64, load, left time.Duration, known bool, of string, median, below float64) Payback {
	p := Payback{DPH: dph, Pull: pull, Load: load, Left: left, LeftOf: of, Median: median, Below: below}
	if !known {
		p.Pays = true
		return p
	}
	p.Cost = dph*left.Hours() + pull
	units := median * dph * max(left-load, 0).Hours()
	if median > 0 && below > 0 {
		p.Worth = units / (below * median)
	}
	if p.Cost > 0 && median > 0 {
		p.Share = units / p.Cost / median
	}
	p.Pays = left > load && p.Worth >= p.Cost
	return p
}

// timeLeft is how long the job has left elapsed into its run: until
// maxDuration (0: none), or sooner the items left at the rate done so
// far; known is false with neither.
func timeLeft(maxDuration, elapsed time.Duration, itemsDone, itemsLeft int64) (left time.Duration, known bool, of string) {
	if maxDuration > 0 {
		left, known, of = max(maxDuration-elapsed, 0), true, fmt.Sprintf("max_duration %s", maxDuration)
	}
	if itemsDone > 0 && itemsLeft > 0 && elapsed > 0 {
		eta := time.Duration(float64(elapsed) / float64(itemsDone) * float64(itemsLeft))
		if !known || eta < left {
			left, known, of = eta, true, fmt.Sprintf("%d item(s) left at %d done in %s", itemsLeft, itemsDone, elapsed.Round(time.Second))
		}
	}
	if !known {
		of = "unknown: no max_duration, no items"
	}
	return left, known, of
}

// Line is the payback in words.
func (p Payback) Line() string {
	if p.Cost == 0 && p.Pays {
		return fmt.Sprintf("time left %s", p.LeftOf)
	}
	return fmt.Sprintf("%s left (%s), %s to load: at $%.3f/hr and a $%.4f pull it would cost $%.4f and deliver %.0f%% of the median per dollar over its stay (it pays at %.0f%%)",
		p.Left.Round(time.Second), p.LeftOf, p.Load.Round(time.Second), p.DPH, p.Pull, p.Cost, 100*p.Share, 100*p.Below)
}
