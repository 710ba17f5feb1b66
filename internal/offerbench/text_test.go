package offerbench

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteTextRanksOnlyPassedProbes(t *testing.T) {
	share := 0.5
	res := Result{Rows: []Row{
		{Rank: 1, OfferID: 10, Model: "RTX 4090", CPU: "i9", VCPU: 32, DPH: 0.1, UnitsPerS: 60, UnitsPerDollar: 2160000, ListingRank: 2, Status: StatusOK},
		{OfferID: 11, Model: "RTX 3060", CPU: "EPYC", VCPU: 90, DPH: 0.2, ListingRank: 1, Status: "failed", Error: "exit 1\x1b[2J"},
	}, ListingPick: 11}
	var b bytes.Buffer
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{"1\t10\tRTX 4090\ti9\t32\t0.1000\t60.00\t2160000.0\t2\tok\n",
		"-\t11\tRTX 3060\tEPYC\t90\t0.2000\t-\t-\t1\tfailed: exit 1\\x1b[2J\n",
		"the listing's $/vCPU pick (offer 11) has no measurement\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	res.ListingPickShare = &share
	b.Reset()
	res.WriteText(&b)
	if !strings.Contains(b.String(), "(offer 11) measured 50% of the best units per dollar") {
		t.Errorf("share not shown:\n%s", b.String())
	}
}
