package sim

import (
	"math"
	"time"
)

// Host failures belong to machines, as on vast: a machine's reliability
// score, its verification and what it did to earlier renters say how likely
// the next rental is to hang in loading, exit at boot or drop offline. The
// profile's shares stay the market-wide averages; a machine's risk scales
// the odds of each up or down around them.

// machineRiskBase is the part of a machine's risk its listing shows: the
// unreliable share (1 - reliability, with a floor, since even 0.999 hosts
// fail) weighted by verification.
func machineRiskBase(o *Offer) float64 {
	r := 1.01 - o.Reliability
	switch o.Verification {
	case "verified":
		r *= 0.8
	case "deverified":
		r *= 3
	default:
		r *= 1.5
	}
	return r
}

// meanRiskBase is the population mean of machineRiskBase, so that risks
// average 1 and the profile's shares keep their meaning.
func meanRiskBase(offers []Offer) float64 {
	if len(offers) == 0 {
		return 1
	}
	sum := 0.0
	for i := range offers {
		sum += machineRiskBase(&offers[i])
	}
	return sum / float64(len(offers))
}

// machineRisk is the factor on the odds of a host fault for a new rental
// of o at now: the listing's part, a hidden per-machine part (a lemon is a
// lemon for every renter; exponential, mean 1) and the machine's own record
// (each earlier rental on it that failed, before now, doubles the odds once
// more, up to 4×). Everything is keyed by machine, never by arrival order
// within one instant.
func (m *Market) machineRisk(o *Offer, now time.Time) float64 {
	listed := machineRiskBase(o) / m.riskNorm
	hidden := 0.4 + 0.6*-math.Log(1-draw(m.st.Seed, drawMachine, o.MachineID, 0))
	failed := 0
	for _, in := range m.st.Instances {
		if !in.CreatedAt.Before(now) || (in.Fault != "stuck" && in.Fault != "bootfail" && in.Fault != "offline") {
			continue
		}
		if i, ok := m.byID[in.OfferID]; ok && m.offers[i].MachineID == o.MachineID {
			failed++
		}
	}
	return listed * hidden * math.Min(4, math.Pow(2, float64(failed)))
}

// scaleOdds returns p with its odds multiplied by k; 0 and 1 stay put, so a
// profile that says "always" or "never" still means it.
func scaleOdds(p, k float64) float64 {
	if p <= 0 || p >= 1 {
		return p
	}
	return p * k / (1 - p + p*k)
}
