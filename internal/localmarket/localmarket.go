// Package localmarket keeps a data dir's simulated marketplace open
// between commands, in a process of its own, as a real market lives on
// between a user's commands: instances keep running, their machines
// answer SSH through an exported config, and two terminals see one
// market. Its clock (clock.Shared) runs at 1x between commands and moves
// faster only while a command waits on it.
//
// Serve is that process's body. Ensure finds it, or starts it, for a
// command; Stop ends it.
package localmarket

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/procgroup"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// URLFile, in the simulator's directory, holds the URL where the process
// that has the market open serves it (this package's, or a command's).
const URLFile = "served-url"

// LogFile, in the simulator's directory, is the local market's own log.
const LogFile = "market.log"

// KeyFile, in the simulator's directory (0600), holds the API key the
// local market accepts. It is drawn per data dir, not the simulator's
// well-known default: the market lives on loopback between commands, and
// its API runs commands on its machines as this user, so another user of
// this computer must not be able to call it.
const KeyFile = "api-key"

// Key is the API key of the local market in dir.
func Key(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, KeyFile))
	if err != nil {
		return "", fmt.Errorf("reading the local market's API key: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// ensureKey draws the market's key the first time and keeps it.
func ensureKey(dir string) (string, error) {
	if k, err := Key(dir); err == nil && k != "" {
		return k, nil
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	k := hex.EncodeToString(b)
	if err := atomicfile.WriteFile(filepath.Join(dir, KeyFile), []byte(k+"\n"), 0o600); err != nil {
		return "", err
	}
	return k, nil
}

// SettingsFile, in the simulator's directory, holds the Settings of the
// process serving the market, so that a command asking for others can
// say they are not applied.
const SettingsFile = "settings.json"

// Settings are what a served market was started with. Seed is the
// market's own (a saved market keeps its seed).
type Settings struct {
	Seed           int64   `json:"seed"`
	Faults         string  `json:"faults"`
	Liars          float64 `json:"liars"`
	Spoof          float64 `json:"spoof"`
	EndpointLimits bool    `json:"endpoint_limits"`
	CapacityScale  float64 `json:"capacity_scale,omitempty"`
	Pace           float64 `json:"pace"`
}

// ReadSettings reads the settings of the market served for dir.
func ReadSettings(dir string) (Settings, error) {
	var s Settings
	b, err := os.ReadFile(filepath.Join(dir, SettingsFile))
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

// DefaultIdle is how long the local market waits without a request or a
// session before it saves and ends (its machines stop with it; a later
// command starts it again, and running instances boot again).
const DefaultIdle = time.Hour

// Options are the local market's.
type Options struct {
	// Dir is the simulator's directory (DATA/sim).
	Dir string
	// Config is the market's; its Clock, HostDir and Stop are set here.
	Config sim.Config
	// Pace is market seconds per wall second between commands (<= 0: 1).
	Pace float64
	// Idle ends the market after that long with no request and no
	// session (0: DefaultIdle).
	Idle time.Duration
	Log  *slog.Logger
	// Settings are recorded in SettingsFile (Seed and Pace filled here).
	Settings Settings
}

// Serve opens the market in o.Dir and serves it on loopback until ctx
// ends, POST /sim/stop asks, it has been idle for o.Idle, or o.Dir is
// removed. Another process holding the market gives sim.ErrInUse.
func Serve(ctx context.Context, o Options) error {
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	sc := clock.NewShared(time.Now().UTC().Truncate(time.Second), o.Pace)
	defer sc.Close()
	cfg := o.Config
	cfg.Clock = sc
	cfg.HostDir = sim.HostsDir(o.Dir)
	cfg.Stop = stop
	key, err := ensureKey(o.Dir)
	if err != nil {
		return err
	}
	cfg.APIKey = key
	m, err := sim.Open(o.Dir, cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		m.Close()
		return err
	}
	u := "http://" + ln.Addr().String()
	o.Settings.Seed, o.Settings.Pace = m.Seed(), sc.Pace()
	if b, err := json.Marshal(o.Settings); err == nil {
		if err := atomicfile.WriteFile(filepath.Join(o.Dir, SettingsFile), b, 0o600); err != nil {
			o.Log.Warn("recording the market's settings", "err", err)
		}
	}
	urlFile := filepath.Join(o.Dir, URLFile)
	if err := atomicfile.WriteFile(urlFile, []byte(u+"\n"), 0o600); err != nil {
		ln.Close()
		m.Close()
		return err
	}
	o.Log.Info("local market serving", "url", u, "pid", os.Getpid(), "pace", sc.Pace(), "idle", o.Idle)
	served := make(chan error, 1)
	go func() { served <- m.ServeListener(ctx, ln) }()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var serveErr error
wait:
	for {
		select {
		case serveErr = <-served:
			break wait
		case <-t.C:
		}
		if _, err := os.Stat(o.Dir); errors.Is(err, os.ErrNotExist) {
			o.Log.Info("local market ends: its directory is gone")
			stop()
		} else if sc.Sessions() == 0 && m.Idle() > o.Idle {
			o.Log.Info("local market ends: idle", "for", m.Idle().Round(time.Second))
			stop()
		}
	}
	// Saved and unlocked before the address goes, so that whoever sees it
	// gone may open the market at once. Only our own address goes: a
	// market started after us keeps its.
	err = m.Close()
	if b, rerr := os.ReadFile(urlFile); rerr == nil && strings.TrimSpace(string(b)) == u {
		os.Remove(urlFile)
	}
	return errors.Join(serveErr, err)
}

// Alive reports whether a market answers at u (its clock).
func Alive(ctx context.Context, u string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(u, "/")+"/sim/clock", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var r struct {
		Now time.Time `json:"now"`
	}
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&r) == nil && !r.Now.IsZero()
}

// Served is the URL where a live process serves the market in dir.
func Served(ctx context.Context, dir string) (string, bool) {
	u, ok := ServedAt(dir)
	return u, ok && Alive(ctx, u)
}

// ServedAt is the URL that URLFile gives for the market in dir, alive or
// not: a process that holds the market open serves it on loopback there.
func ServedAt(dir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, URLFile))
	u := strings.TrimSpace(string(b))
	if err != nil || !strings.HasPrefix(u, "http://127.0.0.1:") {
		return "", false
	}
	return u, true
}

// startTimeout bounds how long Ensure waits for a market it started.
const startTimeout = 30 * time.Second

// Ensure returns the URL of the market served for dir, starting one with
// cmd (a `vastfleet sim daemon` for this data dir) when none answers.
// The process is detached: it outlives the command. Its output goes to
// LogFile. started says this call started it (a market started by
// another command in the same moment may be the one that serves).
func Ensure(ctx context.Context, dir string, cmd *exec.Cmd) (u string, started bool, err error) {
	if u, ok := Served(ctx, dir); ok {
		return u, false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", false, err
	}
	defer logf.Close()
	before, _ := logf.Seek(0, 2)
	cmd.Stdout, cmd.Stderr = logf, logf
	procgroup.Detach(cmd)
	if err := cmd.Start(); err != nil {
		return "", false, fmt.Errorf("starting the local market: %w", err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if u, ok := Served(ctx, dir); ok {
			return u, true, nil
		}
		select {
		case <-ctx.Done():
			return "", false, ctx.Err()
		case <-deadline.C:
			return "", false, fmt.Errorf("the local market did not start within %s; see %s", startTimeout, filepath.Join(dir, LogFile))
		case err := <-ended:
			// Lost a race with another command's market: that one serves.
			if u, ok := waitServed(ctx, dir, 5*time.Second); ok {
				return u, false, nil
			}
			return "", false, fmt.Errorf("the local market ended at start (%v): %s", err, tail(filepath.Join(dir, LogFile), before))
		case <-tick.C:
		}
	}
}

func waitServed(ctx context.Context, dir string, within time.Duration) (string, bool) {
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if u, ok := Served(ctx, dir); ok {
			return u, true
		}
	}
	return "", false
}

// tail is what the log got from offset on, trimmed to its last lines.
func tail(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return "(no log)"
	}
	b = bytes.TrimSpace(b[offset:])
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return string(b)
}

// Stop ends the market served for dir and waits until it has saved and
// let go. It reports whether one was running.
func Stop(ctx context.Context, dir string) (bool, error) {
	u, ok := Served(ctx, dir)
	if !ok {
		return false, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u+"/sim/stop", nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return true, errors.New("the market here is held by a running command, not the local market; end that command")
	}
	if resp.StatusCode != http.StatusNoContent {
		return true, fmt.Errorf("stopping the local market: HTTP %d", resp.StatusCode)
	}
	for {
		if !Alive(ctx, u) {
			if _, err := os.Stat(filepath.Join(dir, URLFile)); errors.Is(err, os.ErrNotExist) {
				return true, nil
			}
		}
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
