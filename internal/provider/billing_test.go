package provider

import "testing"

func TestBillingRules(t *testing.T) {
	for _, tc := range []struct {
		state            string
		compute, storage bool
	}{
		{StateRunning, true, true},
		{StateRebooting, true, true},
		{StateFrozen, true, true},
		{StateLoading, false, true},
		{StateStopped, false, true},
		{StateExited, false, true},
		{"", false, true}, // provisioning: the disk is allocated
		{StateOffline, false, false},
	} {
		c, s := Bills(tc.state)
		if c != tc.compute || s != tc.storage {
			t.Errorf("Bills(%q) = compute %v storage %v, want %v %v", tc.state, c, s, tc.compute, tc.storage)
		}
	}
	// $0.10/GB/month for 73 GB is $7.30 a month: a cent an hour.
	if got := StorageRate(0.10, 73); got < 0.00999999 || got > 0.01000001 {
		t.Errorf("StorageRate(0.10, 73) = %v, want 0.01", got)
	}
}
