package sim

import (
	"slices"
	"testing"
)

func TestDepthComparisonCells(t *testing.T) {
	got := DepthComparison{Seed: 3, N: 10, VCPU: 1234.4, PubVCPU: 1200, VCPUDevPct: 2.87, RAMGB: 50, PubRAMGB: 60, RAMGBDevPct: -16.7,
		DPH: 1.234, PubDPH: 1.2, DPHDevPct: 2.8}.Cells()
	want := []string{"3", "10", "1234", "1200", "+3%", "50", "60", "-17%", "1.23", "1.20", "+3%"}
	if !slices.Equal(got, want) || len(got) != len(DepthHeader) {
		t.Errorf("cells %q, want %q", got, want)
	}
}
