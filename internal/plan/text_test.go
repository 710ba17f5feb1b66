package plan

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/usage"
)

func TestWriteTextShowsNeedsOptionsWarningsAndNotes(t *testing.T) {
	req := Req{VRAMGB: 20, NumGPUs: 1, Hours: 2, DiskGB: 50, CUDA: 12, Reasons: []string{"fp16 weights: 14 GB"}}
	res := Result{Options: []Option{{Rank: 1, Label: "cheapest", OfferID: 42, GPUName: "RTX 3090", NumGPUs: 1, DPHTotal: 0.2,
		EstHours: 2.5, EstTotal: 0.5, Reliability: 0.99, Warnings: []string{"slow pull"}, Offer: market.Offer{GPURAM: 24576}}},
		Notes: []string{"no CN"}}
	for _, explain := range []bool{false, true} {
		var b bytes.Buffer
		WriteText(&b, req, res, explain)
		got := b.String()
		for _, want := range []string{"Needs: 20.0 GB VRAM on 1 GPU(s), ~2.0 h on one RTX 3090 (incl. 30% overhead), 50 GB disk, CUDA >= 12.0\n",
			"1\t1x RTX 3090\t25 GB\t0.200\t2.50\t$0.50\t0.990\t42\tcheapest\n", "option 1: slow pull\n", "note: no CN\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("explain=%v: no %q in\n%s", explain, want, got)
			}
		}
		if strings.Contains(got, "  - fp16 weights") != explain {
			t.Errorf("explain=%v: reasons shown %v:\n%s", explain, !explain, got)
		}
	}
}

func TestInputPlanRefusalsAreTheUsersInput(t *testing.T) {
	_, _, err := Input{Flags: Task{Model: "no-such-model-xyz"}, Given: []string{"model"}}.Plan()
	if err == nil || !errors.As(err, new(usage.Error)) {
		t.Errorf("unknown model: %v, want a usage error", err)
	}
	if _, req, err := (Input{Flags: Task{Model: "7b"}, Given: []string{"model"}}).Plan(); err != nil || req.VRAMGB <= 0 {
		t.Errorf("7b: %+v, %v", req, err)
	}
}
