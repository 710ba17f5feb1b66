package market

import (
	"slices"
	"testing"
)

func TestDepthCellsShowVCPUPerDollar(t *testing.T) {
	if got, want := (Depth{N: 10, VCPU: 320, RAMGB: 1024.4, GPUs: 3, DPH: 1.6}).Cells(), []string{"10", "320", "1024", "3", "1.600", "200.0"}; !slices.Equal(got, want) {
		t.Errorf("cells %q, want %q", got, want)
	}
	if got := (Depth{N: 1}).Cells(); got[5] != "0.0" || len(got) != len(DepthHeader) {
		t.Errorf("no price: cells %q", got)
	}
}
