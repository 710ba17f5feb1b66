// Package factory is vastfleet's composition root, as gh's pkg/cmd/factory:
// it builds the adapters a command needs (the marketplace client, pointed at
// vast.ai or at the simulator, the store, the clock, node operations, a
// job's dependencies) lazily, once per process, and closes them when the
// process ends. The choice between the simulator and vast.ai is made here
// and nowhere else; commands (internal/cli) only parse flags, call what
// the factory gives them, and print.
package factory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/vastfleet/vastfleet/internal/bidwatch"
	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/clock/remoteclock"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/provider/vast"
	"github.com/vastfleet/vastfleet/internal/server"
	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// DefaultAPIRate paces every call a command makes to vast.ai. Its limits
// are per endpoint and per key, stated as thresholds with no unit
// (vast-api.md §10): a few calls a second, in bursts of a few, stays under
// them, and 429s slow the client further.
const (
	DefaultAPIRate  = 4
	defaultAPIBurst = 8
)

// Options are the global flags, bound by the command tree.
type Options struct {
	Market    string
	APIKey    string
	APIURL    string
	DataDir   string
	SimSpeed  float64
	APIRate   float64
	SimFaults string
	SimLiars  float64 // < 0: the profile's share
	SimSpoof  float64 // < 0: the profile's share
	// SimCapacityScale > 0: sim.Config.CapacityScale.
	SimCapacityScale float64
	// SimEndpointLimits turns on vast's per-endpoint rate limits.
	SimEndpointLimits bool
	SimSeed           int64
	Verbose           bool
	// Server is the vastfleet server commands run on (--server URL);
	// "local" runs them here whatever the current context.
	Server string
	// SimHosts is --sim-hosts: machines behind the in-process
	// simulator's instances for every command (Needs.SimHosts).
	SimHosts bool
}

// Needs is what a command needs of the factory beyond the global flags,
// declared as the command is built (Declare) and worked out from its
// parsed flags when Init reads it: the factory's settings are fixed
// before it builds any adapter, and no command changes them after.
type Needs struct {
	// SimHosts puts a machine (directory, onstart, SSH on loopback)
	// behind every running instance of the in-process simulator, for a
	// command that reaches into instances; otherwise the machines stay
	// off, so that a quick `ls` does not boot a fleet (each in-process run
	// is a reboot: onstart runs again).
	SimHosts bool
	// WaitsOnMarket marks a command whose outcome depends on how long it
	// waits (launch): the simulator then runs on a virtual clock that
	// moves only while the command waits, so its results do not depend
	// on how busy this machine is.
	WaitsOnMarket bool
	// Paced runs the virtual clock at --sim-speed even when it was not
	// given (up: the agents' wall-scaled timers keep in step).
	Paced bool
	// APIKeyFile is a secret file holding the marketplace's API key (serve
	// --api-key-file), given to this command and those it runs as
	// VAST_API_KEY.
	APIKeyFile string
	// Market, SimSpeed and DataDir stand for --market, --sim-speed and
	// --data-dir when the user did not give them ("" or 0: the flag's
	// default): up runs on the market its task file chooses, the demo at
	// its own speed in a data dir it made.
	Market   string
	SimSpeed float64
	DataDir  string
	// SimCapacityScale stands for --sim-capacity-scale likewise: the
	// demo's fleet delivers by its true cores.
	SimCapacityScale float64
	// Out and ErrOut are the streams the command writes to in place of
	// the process's (nil: those): the demo leaves out lines that would
	// point into its scratch data dir once it is gone. The log keeps the
	// process's.
	Out, ErrOut io.Writer
}

// Factory builds the adapters a command needs, lazily, and closes them when
// the process ends. It is the one place that names concrete adapters.
type Factory struct {
	IO   *iostreams.IOStreams
	Opts Options
	Log  *slog.Logger
	// Version is the binary's, sent as the user agent.
	Version string
	// durable, given by `serve --replicate` to the jobs it runs, returns
	// once the coordinator's commits have reached the replica: nothing is
	// acknowledged to an agent before (coord.Config.Durable).
	durable func(ctx context.Context) error

	// declared is what each command needs, keyed by the command, as the
	// command tree was built (Declare).
	declared map[any]func(args []string) (Needs, error)
	// initialised is set by Init: the settings below are fixed from then.
	initialised bool
	// applied are the declared Market, SimSpeed, DataDir, Out and ErrOut
	// that took effect (Settings).
	applied Needs
	// simHosts: --sim-hosts or Needs.SimHosts.
	simHosts bool
	// waitsOnMarket is Needs.WaitsOnMarket.
	waitsOnMarket bool
	// simSpeedSet: --sim-speed was given, or Needs.Paced; on the virtual
	// clock it is a cap on speed, so a person can watch.
	simSpeedSet bool

	provider provider.Provider
	simMkt   *sim.Market
	simClock *remoteclock.Clock
	virtual  *clock.Virtual
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
	// formerStores are the store ids this data dir has had (fleet.go);
	// lostStore is set when the store file was missing or empty although
	// the data dir had one; orphans are what the last refresh found.
	formerStores []string
	storeID      string
	lostStore    bool
	orphans      []fleet.Orphan
}

// New is the factory for one process, before its flags are parsed.
func New(ios *iostreams.IOStreams, version string) *Factory {
	return &Factory{IO: ios, Version: version, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// ServeDurable makes the jobs this process runs for a server acknowledge
// nothing before durable returns (coord.Config.Durable). It is part of
// building the factory: once initialised, the factory refuses it.
func (f *Factory) ServeDurable(durable func(ctx context.Context) error) *Factory {
	f.mustNotBeInitialised("ServeDurable")
	f.durable = durable
	return f
}

// Durable is what a job's coordinator waits on before it acknowledges
// (nil: nothing).
func (f *Factory) Durable() func(ctx context.Context) error { return f.durable }

// ErrInitialised refuses a second Init: a command's settings are fixed
// once, before any adapter is built.
var ErrInitialised = errors.New("factory: already initialised; its settings are fixed")

func (f *Factory) mustNotBeInitialised(what string) {
	if f.initialised {
		panic(fmt.Sprintf("factory: %s after Init: %v", what, ErrInitialised))
	}
}

// Declare records, as the command tree is built, what the command cmd
// (the command-line library's) needs beyond the global flags, worked out
// from its parsed flags and arguments: Init reads it for the command that
// runs; an error it returns is Init's. It is part of building the
// factory: once initialised, the factory refuses it.
func (f *Factory) Declare(cmd any, needs func(args []string) (Needs, error)) {
	f.mustNotBeInitialised("Declare")
	if f.declared == nil {
		f.declared = map[any]func(args []string) (Needs, error){}
	}
	f.declared[cmd] = needs
}

// Init takes the parsed global flags (changed says which were given) and
// the command that runs with its arguments, and fixes the factory's
// settings from them and what the command declared it needs, once.
func (f *Factory) Init(changed func(flag string) bool, cmd any, args []string) error {
	if f.initialised {
		return ErrInitialised
	}
	f.initialised = true
	var needs Needs
	if declared := f.declared[cmd]; declared != nil {
		var err error
		if needs, err = declared(args); err != nil {
			return err
		}
	}
	f.apply(changed, needs)
	f.simSpeedSet = changed("sim-speed") || needs.Paced
	f.simHosts = f.Opts.SimHosts || needs.SimHosts
	f.waitsOnMarket = needs.WaitsOnMarket
	f.simSet = map[string]bool{}
	for _, name := range []string{"sim-seed", "sim-faults", "sim-liars", "sim-spoof", "sim-endpoint-limits", "sim-capacity-scale"} {
		if changed(name) {
			f.simSet[name] = true
		}
	}
	level := slog.LevelWarn
	if f.Opts.Verbose {
		level = slog.LevelDebug
	}
	f.Log = slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{Level: level}))
	if needs.Out != nil || needs.ErrOut != nil {
		ios := *f.IO
		ios.Out = cmp.Or(needs.Out, ios.Out)
		ios.ErrOut = cmp.Or(needs.ErrOut, ios.ErrOut)
		f.IO = &ios
		f.applied.Out, f.applied.ErrOut = needs.Out, needs.ErrOut
	}
	switch f.Opts.Market {
	case "sim", "vast":
	default:
		return usage.Errorf("--market %q: use sim (the built-in simulator) or vast (real vast.ai)", f.Opts.Market)
	}
	return f.useAPIKeyFile(needs.APIKeyFile)
}

// apply makes the command's declared Market, SimSpeed and DataDir the
// options', where the user gave no flag for them.
func (f *Factory) apply(changed func(flag string) bool, needs Needs) {
	if needs.Market != "" && !changed("market") {
		f.Opts.Market, f.applied.Market = needs.Market, needs.Market
	}
	if needs.SimSpeed != 0 && !changed("sim-speed") {
		f.Opts.SimSpeed, f.applied.SimSpeed = needs.SimSpeed, needs.SimSpeed
	}
	if needs.SimCapacityScale != 0 && !changed("sim-capacity-scale") {
		f.Opts.SimCapacityScale, f.applied.SimCapacityScale = needs.SimCapacityScale, needs.SimCapacityScale
	}
	if needs.DataDir != "" && !changed("data-dir") {
		f.Opts.DataDir, f.applied.DataDir = needs.DataDir, needs.DataDir
	}
}

// Settings are what Init fixed from the global flags and the command's
// Needs: SimHosts with --sim-hosts too, Paced when --sim-speed was given
// (on the virtual clock it is then a cap on speed, so a person can watch),
// and the declared Market, SimSpeed, DataDir, Out and ErrOut that took
// effect.
func (f *Factory) Settings() Needs {
	s := f.applied
	s.SimHosts, s.WaitsOnMarket, s.Paced = f.simHosts, f.waitsOnMarket, f.simSpeedSet
	return s
}

// useAPIKeyFile makes the key in a secret file the one this command and
// every command it runs use, given to them as VAST_API_KEY inside this
// process: it is on no command line and in no file of the data dir. A
// file others may read is refused, as is an empty one.
func (f *Factory) useAPIKeyFile(path string) error {
	if path == "" {
		return nil
	}
	if f.Opts.APIKey != "" {
		return usage.Errorf("give the API key once: --api-key or serve --api-key-file, not both")
	}
	key, warning, err := vast.ReadKeyFile(path)
	switch {
	case err != nil:
		return usage.Errorf("--api-key-file: %v", err)
	case warning != "":
		return usage.Errorf("--api-key-file: %s; a server's key must be readable by its owner only", warning)
	case key == "":
		return usage.Errorf("--api-key-file %s is empty: write the vast.ai API key in it", path)
	}
	ios := *f.IO
	getenv := ios.Getenv
	ios.Getenv = func(k string) string {
		if k == "VAST_API_KEY" {
			return key
		}
		return getenv(k)
	}
	f.IO = &ios
	return nil
}

// DataDir is the data dir, made and made private the first time.
func (f *Factory) DataDir() (string, error) {
	dir := f.Opts.DataDir
	if dir == "" {
		if v := f.IO.Getenv("VASTFLEET_HOME"); v != "" {
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
func (f *Factory) tightenDataDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("data dir %s is accessible to other users (mode %#o) and could not be made private: %w", dir, perm, err)
		}
		fmt.Fprintf(f.IO.ErrOut, "warning: data dir %s was accessible to other users (mode %#o); it is now 0700\n", dir, perm)
	}
	return nil
}

// Provider returns the marketplace client: the real vast.ai client, pointed
// either at vast.ai or at the simulator over loopback HTTP, so the code path
// users run is the one tests exercise.
func (f *Factory) Provider(ctx context.Context) (provider.Provider, error) {
	if f.provider != nil {
		return f.provider, nil
	}
	endpoint := f.vastEndpoint
	if f.Opts.Market == "sim" {
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
	opts := vast.Options{BaseURL: baseURL, APIKey: key, Logger: f.Log, UserAgent: "vastfleet/" + f.Version,
		RequireTLS: f.Opts.Market == "vast", SentClock: f.Clock()}
	if f.virtual != nil {
		// Requests take no market time, and the client's own back-offs
		// wait on the market's clock.
		opts.Clock = f.virtual
	}
	if f.Opts.Market == "vast" {
		// The simulator draws its own 429s; the real API gets paced.
		opts.RateLimit, opts.Burst = rate.Limit(f.Opts.APIRate), defaultAPIBurst
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
func (f *Factory) simEndpoint(ctx context.Context) (baseURL, key string, err error) {
	baseURL, key = f.Opts.APIURL, f.Opts.APIKey
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
		key = sim.DefaultAPIKey
	} else if key != sim.DefaultAPIKey && f.Opts.APIKey != "" {
		f.warnOnce(vast.FlagKeyWarning)
	}
	return baseURL, key, nil
}

// vastEndpoint is vast.ai's address (VAST_URL may move it) and the key
// found for it.
func (f *Factory) vastEndpoint(context.Context) (baseURL, key string, err error) {
	baseURL = f.Opts.APIURL
	if baseURL == "" {
		baseURL = f.IO.Getenv("VAST_URL")
	}
	rk, err := vast.ResolveAPIKey(f.Opts.APIKey, f.IO.Getenv, "")
	if err != nil {
		return "", "", err
	}
	if rk.Key == "" {
		return "", "", usage.Errorf("no vast.ai API key: set VAST_API_KEY, run `vastai set api-key KEY`, or pass --api-key")
	}
	for _, w := range rk.Warnings {
		f.warnOnce(w)
	}
	return baseURL, rk.Key, nil
}

// warnOnce prints a warning to stderr the first time it is given.
func (f *Factory) warnOnce(msg string) {
	if f.warned == nil {
		f.warned = map[string]bool{}
	}
	if !f.warned[msg] {
		f.warned[msg] = true
		fmt.Fprintf(f.IO.ErrOut, "warning: %s\n", msg)
	}
}

// Clock is the time the marketplace lives in, to read and to wait on: for
// --market sim the simulator's clock (virtual: waits move it; scaled or
// served elsewhere: a wait of d takes d/scale of wall time), wall time
// otherwise, and the newest recorded time for a view of a store another
// process holds.
func (f *Factory) Clock() clock.Clock {
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
func (f *Factory) Store(ctx context.Context, write bool, holder string) (*store.Store, error) {
	dir, err := f.DataDir()
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
func (f *Factory) howToShare(err error) error {
	if f.Opts.Market != "sim" || f.Opts.APIURL != "" || !(errors.Is(err, store.ErrLocked) || errors.Is(err, sim.ErrInUse)) {
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
func (f *Factory) Close() error {
	var errs []error
	for i := len(f.closers) - 1; i >= 0; i-- {
		errs = append(errs, f.closers[i]())
	}
	f.closers = nil
	return errors.Join(errs...)
}

// ReapHolder names a coordinator's reaping pass in the data dir's lock.
var ReapHolder = HolderName("coord", "(reaping silent instances)")

// lockWaitFor bounds how long a command waits for a background pass to
// let go of the lock.
const lockWaitFor = time.Minute

// acquireLock takes the data dir's writer lock for a command: held by a
// background pass (a bid watcher's or a coordinator's listing), the
// command waits for it, up to lockWaitFor; held by another command, it
// is refused at once.
func acquireLock(ctx context.Context, dir, holder string) (*store.Lock, error) {
	wall := clock.Wall{}
	deadline := wall.Now().Add(lockWaitFor)
	return store.AcquireLockBehind(ctx, dir, holder, []string{bidwatch.Holder, ReapHolder}, func(ctx context.Context) (bool, error) {
		return wall.Now().Before(deadline), wall.Sleep(ctx, 100*time.Millisecond)
	})
}

// HolderName names a command in the data dir's lock: who holds it.
func HolderName(args ...string) string { return "vastfleet " + strings.Join(args, " ") }

// ContextsPath is the client's contexts file (server.ContextsPath).
func (f *Factory) ContextsPath() (string, error) { return server.ContextsPath(f.IO.Getenv) }

// ServerClient is the server this command talks to, if any (server.ClientFor):
// --server URL, else the current context; VASTFLEET_TOKEN overrides a token.
func (f *Factory) ServerClient() (*server.Client, error) {
	if f.Opts.Server == server.Local {
		return nil, nil
	}
	path, err := f.ContextsPath()
	if err != nil {
		return nil, err
	}
	return server.ClientFor(path, f.Opts.Server, f.IO.Getenv("VASTFLEET_TOKEN"), f.Version)
}
