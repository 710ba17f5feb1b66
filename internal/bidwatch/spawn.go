package bidwatch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/procgroup"
)

// Process is the detached watcher to start: `Exe [flags] watch-bids`.
type Process struct {
	Exe     string // the vastfleet binary
	DataDir string
	Market  string
	APIURL  string
	APIRate float64
	Verbose bool
	// APIKey reaches the watcher as VAST_API_KEY in its environment,
	// never in its argv, which every user of the machine may read (ps).
	APIKey string
	// Env is the rest of its environment.
	Env []string
}

// command is the watcher's command line and environment.
func (p Process) command() *exec.Cmd {
	args := []string{"--data-dir", p.DataDir, "--market", p.Market, "--api-rate", strconv.FormatFloat(p.APIRate, 'g', -1, 64)}
	if p.APIURL != "" {
		args = append(args, "--api-url", p.APIURL)
	}
	if p.Verbose {
		args = append(args, "--verbose")
	}
	cmd := exec.Command(p.Exe, append(args, "watch-bids")...)
	cmd.Env = append([]string(nil), p.Env...)
	if p.APIKey != "" {
		cmd.Env = append(cmd.Env, "VAST_API_KEY="+p.APIKey)
	}
	return cmd
}

// start starts the watcher, detached, its output appended to LogFile.
func (p Process) start() (*exec.Cmd, error) {
	cmd := p.command()
	log, err := os.OpenFile(filepath.Join(p.DataDir, LogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	fmt.Fprintf(log, "%s: started by pid %d\n", clock.Wall{}.Now().UTC().Format(time.RFC3339), os.Getpid())
	cmd.Stdout, cmd.Stderr = log, log
	procgroup.Detach(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// Spawn starts the data dir's detached watcher; it outlives the caller.
// A watcher already running for the data dir keeps it, and the new one
// ends at once (Detached).
func Spawn(p Process) error {
	cmd, err := p.start()
	if err != nil {
		return err
	}
	return cmd.Process.Release()
}
