package sim

import (
	"sort"
	"strings"
)

// DepthRow is the sum over the top N offers of a ranking.
type DepthRow struct {
	N     int     `json:"n"`
	VCPU  float64 `json:"vcpu"`
	RAMGB float64 `json:"ram_gb"`
	DPH   float64 `json:"dph"`
}

// PublishedDepth is market-facts.md's depth table: the offers matching
// DepthFilter ranked by vCPUs per $/hr, summed over the top N. The
// simulator's default market is calibrated to land near it.
var PublishedDepth = []DepthRow{
	{10, 676, 1146, 1.120},
	{30, 1748, 4197, 3.142},
	{50, 4012, 8469, 8.293},
	{100, 8272, 26301, 21.220},
	{200, 14967, 51809, 51.179},
	{300, 20564, 69625, 85.973},
}

// DepthFilter is the published table's query: `-n rentable=True
// inet_up>=200 inet_down>=200 cpu_cores_effective>16 dph_total<=5`, CN and
// HK excluded. It is written out by hand so that the calibration (and the
// launch tests' candidates, launchsim.Candidates) do not depend on the
// query engine they are used to test.
func DepthFilter(o *Offer) bool {
	c := strings.ToUpper(o.country())
	return o.Rentable && o.InetUp >= 200 && o.InetDown >= 200 && o.CPUCoresEffective > 16 &&
		c != "CN" && c != "HK" && o.DPHTotal <= 5
}

// Depth ranks the offers matching DepthFilter by vCPUs per $/hr and sums
// the top N of each of ns (RAM in GB of 1024 MB, as cpu_ram is in MB).
func Depth(offers []Offer, ns ...int) []DepthRow {
	var pool []Offer
	for i := range offers {
		if DepthFilter(&offers[i]) {
			pool = append(pool, offers[i])
		}
	}
	sort.SliceStable(pool, func(i, j int) bool {
		return pool[i].CPUCoresEffective/pool[i].DPHTotal > pool[j].CPUCoresEffective/pool[j].DPHTotal
	})
	out := make([]DepthRow, 0, len(ns))
	for _, n := range ns {
		row := DepthRow{N: n}
		for i := 0; i < n && i < len(pool); i++ {
			row.VCPU += pool[i].CPUCoresEffective
			row.RAMGB += pool[i].CPURAM / 1024
			row.DPH += pool[i].DPHTotal
		}
		out = append(out, row)
	}
	return out
}
