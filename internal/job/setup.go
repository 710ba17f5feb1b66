package job

import (
	"cmp"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// CheckChoice checks a Ctrl+C choice given ahead ("" asks then).
func CheckChoice(choice string) error {
	switch choice {
	case "", Keep, Collect, Destroy:
		return nil
	}
	return usage.Error{Err: fmt.Errorf("--on-interrupt %q: use keep, collect or destroy", choice)}
}

// CheckCoordAddr checks where the job's coordinator is to listen, and
// says whether that is loopback: instances on vast.ai could not reach it.
func CheckCoordAddr(addr string, vast bool) (loopback bool, err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, usage.Error{Err: fmt.Errorf("--coord-addr %q: want HOST:PORT", addr)}
	}
	loopback = host == "localhost" || net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback()
	if vast && loopback {
		return false, usage.Error{Err: fmt.Errorf("instances on vast.ai cannot reach a coordinator on %s: run up on a machine with a public address and pass --coord-addr 0.0.0.0:8470", addr)}
	}
	return loopback, nil
}

// AdvertisedAddr is the coordinator's address as the agents dial it: the
// host asked for, with the port it got ("" when either is not HOST:PORT).
func AdvertisedAddr(asked, listening string) string {
	host, _, err := net.SplitHostPort(asked)
	if err != nil {
		return ""
	}
	_, port, err := net.SplitHostPort(listening)
	if err != nil {
		return ""
	}
	return net.JoinHostPort(host, port)
}

// AskChoice is what to do after Ctrl+C: given (the flag), else the
// answer on a terminal, else Collect.
func AskChoice(given string, in io.Reader, out io.Writer, tty bool) string {
	if given != "" {
		return given
	}
	if !tty {
		return Collect
	}
	fmt.Fprintf(out, "\nJob interrupted. [k]eep the nodes running, [c]ollect results and destroy, [d]estroy now? [k/c/d] ")
	var answer string
	fmt.Fscanln(in, &answer)
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "k", "keep":
		return Keep
	case "d", "destroy":
		return Destroy
	}
	return Collect
}

// HeartbeatInterval is how often the job's agents report: a market
// minute on the simulator, whose nodes all run on this machine, keeps
// fifty agents from crowding its cores.
func HeartbeatInterval(sim bool) time.Duration {
	if sim {
		return time.Minute
	}
	return 10 * time.Second
}

// LaunchRequest is the launch a job's file asks for, its fleet named
// id: backfilled, with the launch engine's default timeouts, a 10-minute
// deadline and a 20 GB disk unless the file says otherwise.
func LaunchRequest(jf *jobfile.Job, id string) launch.Request {
	return launch.Request{Count: jf.Count, MinReady: jf.MinReady, Deadline: cmp.Or(jf.Deadline, 10*time.Minute), Park: jf.Park, Backfill: true,
		MaxDPH: jf.MaxDPH, Budget: jf.Budget, BudgetSet: jf.Budget > 0, ImageGB: jf.ImageGB,
		Image: jf.Image, Disk: cmp.Or(jf.Disk, 20), Fleet: id,
		BootTimeout: launch.DefaultBootTimeout, ReleaseTimeout: launch.DefaultReleaseTimeout, BadHostTTL: launch.DefaultBadHostTTL}
}

// Ladder is the teardown ladder a job's file asks its agents for.
func Ladder(jf *jobfile.Job) fleet.Ladder {
	return fleet.Ladder{MaxLifetime: jf.MaxLifetime, IdleAfter: jf.IdleAfter, IdleBelow: jf.IdleBelow, StoppedFor: jf.StoppedFor}
}

// NodeEnv is what the job sets in its nodes' environment: its env, and
// its ports opened (vast's way of opening one is an env entry).
func NodeEnv(jf *jobfile.Job) map[string]string {
	env := make(map[string]string, len(jf.Env)+len(jf.Ports))
	for k, v := range jf.Env {
		env[k] = v
	}
	for _, p := range jf.Ports {
		env[fmt.Sprintf("-p %d:%d", p, p)] = "1"
	}
	return env
}

// JudgesHardware says whether the launch judges the nodes' hardware
// probes. A parked job's nodes are probed at their first boot and then
// stopped until the release; judging them there holds the park up, and
// the job's watch would count their silence. Their probes are reported
// (dashboard); on_short_hardware turns judging on.
func JudgesHardware(jf *jobfile.Job) bool {
	return !jf.Park || jf.OnShortHardware != ""
}

// DepthQuery is the dashboard's market-depth plot for a search job: its
// own query ("" for a planned job).
func DepthQuery(jf *jobfile.Job) string {
	if jf.Planned() {
		return ""
	}
	return jf.Query
}

// Resuming is what `up --resume` continues the job rec with, refused
// unless it can be (CheckResumable): its task file, and the address its
// coordinator listens on: the one its agents know, unless the user gave
// one (addr, given).
func Resuming(rec *Record, addr string, given bool) (file, coordAddr string, err error) {
	if err := CheckResumable(rec); err != nil {
		return "", "", err
	}
	if rec.CoordAddr != "" && !given {
		addr = rec.CoordAddr
	}
	return rec.File, addr, nil
}

// CheckResumable says whether the job can be resumed: one that is done
// has nothing left to run.
func CheckResumable(rec *Record) error {
	if rec.State == StateDone {
		return usage.Error{Err: fmt.Errorf("job %s is done (`vastfleet status %s`; its report: `vastfleet down %s`)", rec.ID, rec.ID, rec.ID)}
	}
	return nil
}
