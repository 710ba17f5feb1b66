package job

import (
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
)

// TestLaunchRequestFromTheFile: a job's launch takes its count, park,
// caps, image and ladder from the file, its fleet from the job's id, and
// the defaults (10-minute deadline, 20 GB disk, backfill, the engine's
// timeouts) where the file is silent.
func TestLaunchRequestFromTheFile(t *testing.T) {
	t.Parallel()
	jf := &jobfile.Job{Count: 4, MinReady: 3, Park: true, MaxDPH: 0.5, Budget: 12, Image: "ubuntu:22.04", ImageGB: 2,
		MaxLifetime: time.Hour, IdleAfter: 5 * time.Minute, IdleBelow: 3, StoppedFor: 10 * time.Minute}
	r := LaunchRequest(jf, "job-1")
	if r.Count != 4 || r.MinReady != 3 || !r.Park || r.MaxDPH != 0.5 || r.Budget != 12 || !r.BudgetSet || r.Image != "ubuntu:22.04" ||
		r.ImageGB != 2 || r.Fleet != "job-1" || !r.Backfill {
		t.Errorf("from the file: %+v", r)
	}
	if r.Deadline != 10*time.Minute || r.Disk != 20 || r.BootTimeout != launch.DefaultBootTimeout ||
		r.ReleaseTimeout != launch.DefaultReleaseTimeout || r.BadHostTTL != launch.DefaultBadHostTTL {
		t.Errorf("defaults: %+v", r)
	}
	jf.Deadline, jf.Disk, jf.Budget = 30*time.Minute, 50, 0
	if r := LaunchRequest(jf, "job-1"); r.Deadline != 30*time.Minute || r.Disk != 50 || r.BudgetSet {
		t.Errorf("the file's own deadline and disk, no budget: %+v", r)
	}
	if l := Ladder(jf); l.MaxLifetime != time.Hour || l.IdleAfter != 5*time.Minute || l.IdleBelow != 3 || l.StoppedFor != 10*time.Minute {
		t.Errorf("ladder: %+v", l)
	}
}
