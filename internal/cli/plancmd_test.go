package cli

import (
	"strings"
	"testing"
)

// A 70B full fine-tune fits no machine on offer: plan says what it needs,
// how far the biggest machine is from it, and the ways out the planner
// knows with the flags that take them; each way out then plans.
func TestPlanExplainsAJobNoMachineHolds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.fails("plan", "--model", "70b", "--full", "--precision", "bf16", "--hours", "10")
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	for _, want := range []string{"needs 1347.9 GB VRAM, 17 GPUs", "no machine on offer has them",
		"the most GPU memory one machine on offer has is", "a LoRA fine-tune (≈ 185.3 GB, 3 GPUs): --mode finetune without --full",
		"int4 quantization (≈ 59.3 GB): --mode finetune --precision int4 without --full", "nothing was rented"} {
		if !strings.Contains(r.err, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.err)
		}
	}
	for _, never := range []string{"widen the search", "reliability", "tiers"} {
		if strings.Contains(r.err, never) {
			t.Errorf("stderr suggests %q, which plan has no flag for:\n%s", never, r.err)
		}
	}
	for _, way := range [][]string{
		{"--precision", "bf16"},
		{"--precision", "int4"},
	} {
		args := append([]string{"plan", "--model", "70b", "--mode", "finetune", "--hours", "10", "--json"}, way...)
		got := decode[map[string]any](t, e.ok(args...).out)
		if opts, _ := got["options"].([]any); len(opts) == 0 {
			t.Errorf("plan %v: no options, yet the error offered it as a way out", way)
		}
	}
}
