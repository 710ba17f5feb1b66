package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// DefaultAPIKey is the key the simulator accepts unless told another; it
// is published, so a market other machines reach needs its own.
const DefaultAPIKey = "vastfleet-sim-key"

// ServeOptions is what `vastfleet sim serve` asks of a standalone market.
type ServeOptions struct {
	Addr string
	// Clock is "scaled" (wall time × --time-scale) or "manual" (still
	// until POST /sim/advance?d=DURATION moves it).
	Clock  string
	Seed   int64
	Offers int
	// Balance is the account's starting credit in dollars (0: sim's
	// default, $1,000).
	Balance float64
	Speed   float64
	Faults  string
	State   string
	APIKey  string
	// Public allows a non-loopback --addr (with a non-default key).
	Public bool
	// Knobs override single shares of the fault profile; <0 means unset.
	Stuck, BootFail, Offline, Slow, Rate429, Rate5xx, LostCreate   float64
	SSHLate, SSHHang, SSHDrop, OnstartFail, DarkHang, Liars, Spoof float64
	OddRows                                                        float64
	// Cap answers every search with at most this many offers (0: no cap).
	Cap                       int
	AuthAs404, EndpointLimits bool
	// NoHosts serves rows only: no machine behind the instances.
	NoHosts bool
	// Links paces each machine's SSH traffic at its offer's bandwidth.
	Links bool
	// CapacityScale: Config.CapacityScale.
	CapacityScale float64
}

// checkServeExposure refuses what would open the simulator to strangers:
// no key (auth cannot be turned off), or an address other machines reach
// without --public and a key of the user's own (the default is published).
func checkServeExposure(opts *ServeOptions) error {
	if strings.TrimSpace(opts.APIKey) == "" {
		return usage.Errorf("--api-key '': the simulator always checks a key; give one, or leave the flag out for the default")
	}
	host, _, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return usage.Errorf("--addr %q: want HOST:PORT (%v)", opts.Addr, err)
	}
	if loopbackHost(host) {
		return nil
	}
	if !opts.Public {
		return usage.Errorf("--addr %s listens beyond this machine: pass --public if other machines should reach it (and a key of your own with --api-key)", opts.Addr)
	}
	if opts.APIKey == DefaultAPIKey {
		return usage.Errorf("--public with the default API key: the default is published; choose your own with --api-key")
	}
	return nil
}

// loopbackHost reports whether host names this machine only: "localhost"
// or a loopback IP. An empty host (":8765") is every interface.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// keyNote says which key the simulator accepts without printing it: a
// banner lands in terminals, logs and screen shares.
func keyNote(key string) string {
	if key == DefaultAPIKey {
		return "the built-in default key"
	}
	return fmt.Sprintf("the key given with --api-key (%d characters)", len(key))
}

// ServeStandalone runs the market opts describe on opts.Addr until ctx
// ends, telling errOut where it serves. It refuses what would open the
// market to strangers, and shares outside 0-1.
func ServeStandalone(ctx context.Context, opts *ServeOptions, log *slog.Logger, errOut io.Writer) error {
	if err := checkServeExposure(opts); err != nil {
		return err
	}
	if opts.Speed <= 0 {
		return usage.Errorf("--time-scale %v: must be positive", opts.Speed)
	}
	faults, err := Profile(opts.Faults)
	if err != nil {
		return usage.Errorf("--faults: %v", err)
	}
	for _, k := range []struct {
		name string
		v    float64
		dst  *float64
	}{
		{"--stuck", opts.Stuck, &faults.StuckLoading}, {"--boot-fail", opts.BootFail, &faults.BootFail},
		{"--offline", opts.Offline, &faults.HostOffline}, {"--slow", opts.Slow, &faults.SlowBoot},
		{"--rate-429", opts.Rate429, &faults.Rate429}, {"--rate-5xx", opts.Rate5xx, &faults.Rate5xx},
		{"--lost-create", opts.LostCreate, &faults.LostCreate},
		{"--ssh-late", opts.SSHLate, &faults.SSHLate}, {"--ssh-hang", opts.SSHHang, &faults.SSHHang},
		{"--ssh-drop", opts.SSHDrop, &faults.SSHDrop}, {"--onstart-fail", opts.OnstartFail, &faults.OnstartFail},
		{"--dark-hang", opts.DarkHang, &faults.DarkHang}, {"--spoof", opts.Spoof, &faults.Spoof},
		{"--liars", opts.Liars, &faults.Liars},
		{"--odd-rows", opts.OddRows, &faults.OddRows},
	} {
		if k.v == -1 {
			continue
		}
		if k.v < 0 || k.v > 1 {
			return usage.Errorf("%s %v: a share is between 0 and 1", k.name, k.v)
		}
		*k.dst = k.v
	}
	faults.AuthAs404 = faults.AuthAs404 || opts.AuthAs404
	faults.EndpointLimits = faults.EndpointLimits || opts.EndpointLimits
	cfg := Config{Seed: opts.Seed, Offers: opts.Offers, Balance: opts.Balance, APIKey: opts.APIKey, Faults: faults, TimeScale: opts.Speed, Log: log, AnswerCap: opts.Cap, Links: opts.Links, CapacityScale: opts.CapacityScale}
	pace := fmt.Sprintf("%gx time", opts.Speed)
	switch opts.Clock {
	case "scaled":
	case "manual":
		if opts.State != "" {
			return usage.Errorf("--clock manual with --state: a kept market's time runs on from where it was; leave out --state, or use --clock scaled")
		}
		cfg.Clock = clock.NewManual(time.Now().UTC().Truncate(time.Second))
		pace = "manual time: POST /sim/advance?d=DURATION moves it"
	default:
		return usage.Errorf("--clock %q: use scaled or manual", opts.Clock)
	}
	if !opts.NoHosts {
		// Instance directories live with the state, or for a memory-only
		// market in a directory removed on exit.
		if opts.State != "" {
			cfg.HostDir = HostsDir(opts.State)
		} else {
			tmp, err := os.MkdirTemp("", "vastfleet-sim-hosts-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			cfg.HostDir = tmp
		}
	}
	var m *Market
	if opts.State != "" {
		m, err = Open(opts.State, cfg)
	} else {
		m, err = New(cfg)
	}
	if err != nil {
		return err
	}
	defer m.Close()
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", opts.Addr, err)
	}
	fmt.Fprintf(errOut, "simulated marketplace on http://%s (seed %d, faults %s, %s; it accepts %s)\n",
		ln.Addr(), opts.Seed, opts.Faults, pace, keyNote(opts.APIKey))
	if cfg.HostDir != "" {
		fmt.Fprintf(errOut, "instances run in %s and answer SSH on 127.0.0.1\n", cfg.HostDir)
	}
	if err := m.ServeListener(ctx, ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
