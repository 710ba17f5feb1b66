package benchrank

import "testing"

// A row holds each side's median; the ratio says how many times better
// vastfleet is, and is left out when vastfleet measured nothing.
func TestPairRowMediansAndRatio(t *testing.T) {
	r := pairRow("m", []float64{1, 3, 2}, []float64{10, 30, 20}, "s")
	if r.Vastfleet != 2 || r.Recipe != 20 || r.Ratio != 10 || r.Unit != "s" {
		t.Errorf("row %+v: want medians 2 and 20, ratio 10", r)
	}
	if r := pairRow("m", []float64{0}, []float64{5}, "s"); r.Ratio != 0 {
		t.Errorf("ratio %v with nothing measured, want 0", r.Ratio)
	}
}
