package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/clock/remoteclock"

	"github.com/spf13/cobra"
	"golang.org/x/time/rate"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/provider/vast"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

// simAPIKey is the key the in-process simulator and `sim serve` accept by
// default. It is not a secret: they listen on loopback while a command
// runs. The local market, which lives on between commands, draws its own
// (localmarket.KeyFile).
const simAPIKey = sim.DefaultAPIKey

// defaultAPIRate paces every call a command makes to vast.ai. Its limits
// are per endpoint and per key, stated as thresholds with no unit
// (vast-api.md §10): a few calls a second, in bursts of a few, stays under
// them, and 429s slow the client further.
const (
	defaultAPIRate  = 4
	defaultAPIBurst = 8
)

type globalOptions struct {
	Market    string
	APIKey    string
	APIURL    string
	DataDir   string
	SimSpeed  float64
	APIRate   float64
	SimFaults string
	SimLiars  float64 // < 0: the profile's share
	SimSpoof  float64 // < 0: the profile's share
	// SimEndpointLimits turns on vast's per-endpoint rate limits.
	SimEndpointLimits bool
	SimSeed           int64
	Verbose           bool
	// Server is the vastfleet server commands run on (--server URL);
	// "local" runs them here whatever the current context.
	Server string
}

// factory builds the adapters a command needs, lazily, and closes them when
// the process ends. It is the one place that names concrete adapters.
type factory struct {
	io   *iostreams.IOStreams
	opts globalOptions
	log  *slog.Logger
	// durable, set by `serve --replicate` for the jobs it runs, returns
	// once the coordinator's commits have reached the replica: nothing is
	// acknowledged to an agent before (coord.Config.Durable).
	durable func(ctx context.Context) error

	provider provider.Provider
	simMkt   *sim.Market
	// simHosts puts a machine (directory, onstart, SSH on loopback) behind
	// every running instance of the in-process simulator (--sim-hosts).
	// Commands that reach into instances may set it before Provider;
	// otherwise the machines stay off, so that a quick `ls` does not boot a
	// fleet (each in-process run is a reboot: onstart runs again).
	simHosts bool
	simClock *remoteclock.Clock
	// waitsOnMarket marks a command whose outcome depends on how long it
	// waits (launch): the in-process simulator then runs on a virtual
	// clock that moves only while the command waits, so its results do
	// not depend on how busy this machine is.
	waitsOnMarket bool
	virtual       *clock.Virtual
	// simSpeedSet: --sim-speed was given; on the virtual clock it is a
	// cap on speed, so a person can watch.
	simSpeedSet bool
	// simSet names the --sim-* market flags given, which a running local
	// market started with others does not apply.
	simSet map[string]bool
	// frozenAt is set when another process holds the data dir: views show
	// the store as of this time.
	frozenAt time.Time
	st       *store.Store
	lock     *store.Lock
	closers  []func() error
	// dataDirChecked is the data dir already made private, so the check
	// and its warning happen once per command.
	dataDirChecked string
	warned         map[string]bool
	// formerStores are the store ids this data dir has had (orphans.go);
	// lostStore is set when the store file was missing or empty although
	// the data dir had one; orphans are what the last refresh found.
	formerStores []string
	storeID      string
	lostStore    bool
	orphans      []fleet.Orphan
}

func newFactory(ios *iostreams.IOStreams) *factory {
	return &factory{io: ios, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func (f *factory) init(cmd *cobra.Command) error {
	if fl := cmd.Flags().Lookup("sim-speed"); fl != nil {
		f.simSpeedSet = fl.Changed
	}
	f.simSet = map[string]bool{}
	for _, name := range []string{"sim-seed", "sim-faults", "sim-liars", "sim-spoof", "sim-endpoint-limits"} {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			f.simSet[name] = true
		}
	}
	level := slog.LevelWarn
	if f.opts.Verbose {
		level = slog.LevelDebug
	}
	f.log = slog.New(slog.NewTextHandler(f.io.ErrOut, &slog.HandlerOptions{Level: level}))
	switch f.opts.Market {
	case "sim", "vast":
	default:
		return usagef("--market %q: use sim (the built-in simulator) or vast (real vast.ai)", f.opts.Market)
	}
	return nil
}

func (f *factory) dataDir() (string, error) {
	dir := f.opts.DataDir
	if dir == "" {
		if v := f.io.Getenv("VASTFLEET_HOME"); v != "" {
			dir = v
		} else {
			d, err := store.DefaultDir()
			if err != nil {
				return "", err
			}
			dir = d
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	if f.dataDirChecked != dir {
		if err := f.tightenDataDir(dir); err != nil {
			return "", err
		}
		f.dataDirChecked = dir
	}
	return dir, nil
}

// tightenDataDir makes an existing data dir private (0700): it holds the
// state store, the fleet's SSH key and launch secrets, and a directory
// others may enter exposes every file in it that was created before the
// files themselves were made 0600. It says so once, as a warning.
func (f *factory) tightenDataDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("data dir %s is accessible to other users (mode %#o) and could not be made private: %w", dir, perm, err)
		}
		fmt.Fprintf(f.io.ErrOut, "warning: data dir %s was accessible to other users (mode %#o); it is now 0700\n", dir, perm)
	}
	return nil
}

// Provider returns the marketplace client: the real vast.ai client, pointed
// either at vast.ai or at the simulator over loopback HTTP, so the code path
// users run is the one tests exercise.
func (f *factory) Provider(ctx context.Context) (provider.Provider, error) {
	if f.provider != nil {
		return f.provider, nil
	}
	endpoint := f.vastEndpoint
	if f.opts.Market == "sim" {
		endpoint = f.simEndpoint
	}
	baseURL, key, err := endpoint(ctx)
	if err != nil {
		return nil, err
	}
	// The real marketplace is reached over TLS only; the simulator, on
	// loopback or a trusted network, may be plain http.
	// The send times of stops and destroys date where billing ended, on
	// the clock the store's timeline is kept on (a simulator's own).
	opts := vast.Options{BaseURL: baseURL, APIKey: key, Logger: f.log, UserAgent: "vastfleet/" + Version,
		RequireTLS: f.opts.Market == "vast", SentClock: f.Clock()}
	if f.virtual != nil {
		// Requests take no market time, and the client's own back-offs
		// wait on the market's clock.
		opts.Clock = f.virtual
	}
	if f.opts.Market == "vast" {
		// The simulator draws its own 429s; the real API gets paced.
		opts.RateLimit, opts.Burst = rate.Limit(f.opts.APIRate), defaultAPIBurst
	}
	c, err := vast.New(opts)
	if err != nil {
		return nil, err
	}
	f.provider = c
	return c, nil
}

// simEndpoint is where the simulated market answers, and its key: the
// data dir's local market, this command's own, or --api-url's.
func (f *factory) simEndpoint(ctx context.Context) (baseURL, key string, err error) {
	baseURL, key = f.opts.APIURL, f.opts.APIKey
	switch {
	case baseURL == "" && f.usesLocalMarket():
		u, localKey, err := f.connectLocal(ctx)
		if err != nil {
			return "", "", err
		}
		baseURL = u
		if key == "" {
			key = localKey
		}
	case baseURL == "":
		u, err := f.startSim()
		if errors.Is(err, sim.ErrInUse) {
			// Another vastfleet has the market open (a coordinator, a
			// launch): talk to it where it serves the market.
			if served, ok := f.servedSim(); ok {
				c, cerr := remoteclock.New(ctx, served)
				if cerr == nil {
					f.simClock, u, err = c, served, nil
				}
			}
		}
		if err != nil {
			return "", "", f.howToShare(err)
		}
		baseURL = u
	default:
		c, err := remoteclock.New(ctx, baseURL)
		if err != nil {
			return "", "", fmt.Errorf("--market sim --api-url %s: reading the simulator's clock: %w (is it a `vastfleet sim serve`?)",
				vast.RedactURL(baseURL), vast.RedactError(err))
		}
		f.simClock = c
	}
	if key == "" {
		key = simAPIKey
	} else if key != simAPIKey && f.opts.APIKey != "" {
		f.warnOnce(vast.FlagKeyWarning)
	}
	return baseURL, key, nil
}

// vastEndpoint is vast.ai's address (VAST_URL may move it) and the key
// found for it.
func (f *factory) vastEndpoint(context.Context) (baseURL, key string, err error) {
	baseURL = f.opts.APIURL
	if baseURL == "" {
		baseURL = f.io.Getenv("VAST_URL")
	}
	rk, err := vast.ResolveAPIKey(f.opts.APIKey, f.io.Getenv, "")
	if err != nil {
		return "", "", err
	}
	if rk.Key == "" {
		return "", "", usagef("no vast.ai API key: set VAST_API_KEY, run `vastai set api-key KEY`, or pass --api-key")
	}
	for _, w := range rk.Warnings {
		f.warnOnce(w)
	}
	return baseURL, rk.Key, nil
}

// warnOnce prints a warning to stderr the first time it is given.
func (f *factory) warnOnce(msg string) {
	if f.warned == nil {
		f.warned = map[string]bool{}
	}
	if !f.warned[msg] {
		f.warned[msg] = true
		fmt.Fprintf(f.io.ErrOut, "warning: %s\n", msg)
	}
}

// Clock is the time the marketplace lives in, to read and to wait on: for
// --market sim the simulator's clock (virtual: waits move it; scaled or
// served elsewhere: a wait of d takes d/scale of wall time), wall time
// otherwise, and the newest recorded time for a view of a store another
// process holds.
func (f *factory) Clock() clock.Clock {
	switch {
	case !f.frozenAt.IsZero():
		return clock.Fixed{At: f.frozenAt}
	case f.simMkt != nil:
		return f.simMkt.Clock()
	case f.virtual != nil: // a session on the local market
		return f.virtual
	case f.simClock != nil:
		return f.simClock
	}
	return clock.Wall{}
}

// Store opens the state store; writers also take the data dir's lock so
// that two terminals never launch into the same fleet at once.
func (f *factory) Store(ctx context.Context, write bool, holder string) (*store.Store, error) {
	dir, err := f.dataDir()
	if err != nil {
		return nil, err
	}
	if write && f.lock == nil {
		l, err := acquireLock(ctx, dir, holder)
		if err != nil {
			return nil, f.howToShare(err)
		}
		f.lock = l
		f.closers = append(f.closers, func() error { return l.Unlock() })
	}
	if f.st != nil {
		return f.st, nil
	}
	path := filepath.Join(dir, "state.db")
	f.checkStoreFile(dir, path)
	st, err := store.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	f.st = st
	f.closers = append(f.closers, st.Close)
	if write {
		f.noteStore(ctx, dir, st)
	}
	return st, nil
}

// howToShare adds, to a refusal because another process holds the data
// dir or its simulated market, how two commands can use one simulated
// market at once: one serves it, the others reach it with --api-url.
func (f *factory) howToShare(err error) error {
	if f.opts.Market != "sim" || f.opts.APIURL != "" || !(errors.Is(err, store.ErrLocked) || errors.Is(err, sim.ErrInUse)) {
		return err
	}
	if f.usesLocalMarket() {
		// The market is shared already; the lock keeps two writers off
		// one data dir's fleets.
		return fmt.Errorf("%w; meanwhile `vastfleet ls`, `cost` and ssh through an exported ssh-config reach the same market without it", err)
	}
	return fmt.Errorf("%w; to share one simulated market, run `vastfleet sim serve` and pass its URL with --api-url and a data dir of its own (--data-dir) to each command", err)
}

// Close releases everything in reverse order of acquisition.
func (f *factory) Close() error {
	var errs []error
	for i := len(f.closers) - 1; i >= 0; i-- {
		errs = append(errs, f.closers[i]())
	}
	f.closers = nil
	return errors.Join(errs...)
}
