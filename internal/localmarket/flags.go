package localmarket

import (
	"fmt"
	"os/exec"
	"strconv"
)

// Flags are the market flags a command was given. A command that starts
// the local market passes them on (they apply when the market's state is
// created: a saved market keeps its seed); one that finds it running is
// told which it does not apply (Settings.NotApplied).
type Flags struct {
	Seed           int64
	Faults         string
	Liars, Spoof   float64
	EndpointLimits bool
	CapacityScale  float64
	// Speed is passed on only when given (SpeedSet).
	Speed    float64
	SpeedSet bool
}

// DaemonCommand is the local market's process for the data dir:
// `exe --data-dir dataDir --market sim FLAGS sim daemon`, with env.
func DaemonCommand(exe, dataDir string, fl Flags, env []string) *exec.Cmd {
	args := []string{"--data-dir", dataDir, "--market", "sim",
		"--sim-seed", strconv.FormatInt(fl.Seed, 10), "--sim-faults", fl.Faults,
		"--sim-liars", strconv.FormatFloat(fl.Liars, 'g', -1, 64),
		"--sim-spoof", strconv.FormatFloat(fl.Spoof, 'g', -1, 64)}
	if fl.EndpointLimits {
		args = append(args, "--sim-endpoint-limits")
	}
	if fl.CapacityScale > 0 {
		args = append(args, "--sim-capacity-scale", strconv.FormatFloat(fl.CapacityScale, 'g', -1, 64))
	}
	if fl.SpeedSet {
		args = append(args, "--sim-speed", strconv.FormatFloat(fl.Speed, 'g', -1, 64))
	}
	cmd := exec.Command(exe, append(args, "sim", "daemon")...)
	cmd.Env = env
	return cmd
}

// NotApplied names the flags given (set, by flag name) that differ from
// the settings the running market was started with, each with both
// values.
func (s Settings) NotApplied(fl Flags, set map[string]bool) []string {
	flags := []struct {
		flag, format string
		asked, runs  any
	}{
		{"sim-seed", "--sim-seed %v (it has seed %v)", fl.Seed, s.Seed},
		{"sim-faults", "--sim-faults %v (it has %v)", fl.Faults, s.Faults},
		{"sim-liars", "--sim-liars %v (it has %v)", fl.Liars, s.Liars},
		{"sim-spoof", "--sim-spoof %v (it has %v)", fl.Spoof, s.Spoof},
		{"sim-endpoint-limits", "--sim-endpoint-limits=%v (it has %v)", fl.EndpointLimits, s.EndpointLimits},
		{"sim-capacity-scale", "--sim-capacity-scale %v (it has %v)", fl.CapacityScale, s.CapacityScale},
	}
	var differ []string
	for _, f := range flags {
		if set[f.flag] && f.asked != f.runs {
			differ = append(differ, fmt.Sprintf(f.format, f.asked, f.runs))
		}
	}
	return differ
}
