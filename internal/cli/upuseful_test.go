package cli

import (
	"context"
	"io"
	"math"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
)

// TestUpRanksUsefulForItsOwnTask: a task file with `by: useful` ranks
// its offers for its own image and deadline (the demo's: ubuntu, about
// 0.3 GB, 45 minutes), not for the default launch's 8 GB image under 10
// minutes, which pays for fast downloads the task never needs: on the
// demo's task that rented a fleet 1.75x as dear per hour as --by vcpu.
func TestUpRanksUsefulForItsOwnTask(t *testing.T) {
	t.Parallel()
	f := factory.New(&iostreams.IOStreams{ErrOut: io.Discard, Getenv: func(k string) string {
		if k == "VASTFLEET_SIM_LOCAL" {
			return "off"
		}
		return ""
	}}, Version)
	f.Opts = factory.Options{Market: "sim", DataDir: t.TempDir(), SimSeed: 1, SimFaults: "none", SimSpeed: 60, SimLiars: -1, SimSpoof: -1}
	ctx := context.Background()
	jf := &jobfile.Job{Query: "rentable=True cpu_cores_effective>=4", By: "useful", Image: "ubuntu:22.04", Count: 50, Deadline: 45 * time.Minute}
	spec := launch.DefaultSpec("job", jf.Count, jf.Deadline, true)
	spec.Create.Image = jf.Image
	cands, _, _, err := upCandidates(ctx, f, jf, &spec)
	if err != nil {
		t.Fatal(err)
	}
	own, err := launch.UsefulScorer(ctx, nil, spec, f.Clock().Now())
	if err != nil {
		t.Fatal(err)
	}
	def, err := launch.UsefulScorer(ctx, nil, launch.DefaultSpec("", 1, 10*time.Minute, false), f.Clock().Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(cands) < 50 {
		t.Fatalf("%d candidates", len(cands))
	}
	differ := 0
	for i := range cands[:50] {
		o := &cands[i].Offer
		if want := own.Score(o); math.Abs(cands[i].Score-want) > 1e-9*max(1, want) {
			t.Fatalf("offer %d scored %.4f, want %.4f (the task's image and deadline)", o.ID, cands[i].Score, want)
		}
		if math.Abs(def.Score(o)-cands[i].Score) > 1e-9*max(1, cands[i].Score) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("the default launch scores the task's offers the same: the test tells nothing")
	}
}
