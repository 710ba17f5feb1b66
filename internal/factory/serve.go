package factory

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/replica"
	"github.com/vastfleet/vastfleet/internal/server"
	"github.com/vastfleet/vastfleet/internal/store"
)

// restoreForServing brings an empty data dir back from the replica at
// url (serve --restore-from), its databases dbs, and says so.
func (f *Factory) restoreForServing(ctx context.Context, url string, dbs []string) error {
	dir, err := f.DataDir()
	if err != nil {
		return err
	}
	if err := replica.Restore(ctx, dir, url, dbs, f.Log); err != nil {
		return fmt.Errorf("serve --restore-from: %w", err)
	}
	fmt.Fprintf(f.IO.ErrOut, "restored %s from %s\n", dir, url)
	return nil
}

// HoldForServing opens what a server holds for its whole life: the
// market (on the simulator its machines run in this process, and each
// command the server runs reaches the market where this process serves
// it), and the store, made and migrated before any command runs, so that
// no client's command opens it while a job's up is still creating it
// (seen once, under load, as a status failing with SQLITE_BUSY).
func (f *Factory) HoldForServing(ctx context.Context) error {
	if _, err := f.Provider(ctx); err != nil {
		return err
	}
	_, err := f.Store(ctx, false, "")
	return err
}

// replicateForServing starts replicating the data dir to url (serve
// --replicate), once every database exists, so that each is replicated
// from its first write. It returns what sends the last changes at the
// end, and what the jobs' coordinators wait on before they acknowledge.
func (f *Factory) replicateForServing(ctx context.Context, url string, dbs []string) (flush func(), durable func(context.Context) error, err error) {
	dir, err := f.DataDir()
	if err != nil {
		return nil, nil, err
	}
	cdb, err := f.CoordDB(ctx)
	if err != nil {
		return nil, nil, err
	}
	cdb.Close()
	rep, err := replica.Start(ctx, dir, url, dbs, f.Log)
	if err != nil {
		return nil, nil, fmt.Errorf("serve --replicate: %w", err)
	}
	// A job's coordinator acknowledges findings and results only once
	// they are in the replica: a server lost the next moment and
	// restored from it has every one it acknowledged.
	durable = func(ctx context.Context) error { return rep.Wait(ctx, "coord.db") }
	fmt.Fprintf(f.IO.ErrOut, "replicating the data dir to %s\n", url)
	// At the end the last changes go out; Litestream's own connections
	// go with the process.
	return func() {
		if err := rep.FlushWithin(ctx, 30*time.Second); err != nil {
			fmt.Fprintf(f.IO.ErrOut, "serve: the last changes did not reach the replica: %v\n", err)
		}
	}, durable, nil
}

// Server is the vastfleet server of this data dir (server.New): run runs
// its commands, jobs' states and dashboards come from the data dir's
// records, opened at each question, and a replica taking a job over waits
// until the up of the one that lost it has let the data dir go.
func (f *Factory) Server(db *server.DB, run server.Runner) (*server.Server, error) {
	dir, err := f.DataDir()
	if err != nil {
		return nil, err
	}
	return server.New(server.Config{
		DB: db, Run: run, Dir: filepath.Join(dir, "serve"), ResultsDir: filepath.Join(dir, "serve", "results"),
		Version: f.Version, Log: f.Log,
		JobState: f.jobAnswer((*job.Records).State), Dashboard: f.jobAnswer((*job.Records).Dashboard),
		Busy: func() bool { return store.Held(dir) },
	}), nil
}

func (f *Factory) jobAnswer(ask func(*job.Records, context.Context, string) (string, error)) func(context.Context, string) (string, error) {
	return func(ctx context.Context, id string) (string, error) {
		recs, err := f.JobRecords(ctx)
		if err != nil {
			return "", err
		}
		return ask(recs, ctx, id)
	}
}

// serveListen listens on addr (server.Listen), with withTLS on HTTPS
// with a self-signed certificate kept in the data dir whose pin it
// prints, and says where the server serves.
func (f *Factory) serveListen(addr string, withTLS bool) (net.Listener, error) {
	dir, err := f.DataDir()
	if err != nil {
		return nil, err
	}
	var cert func() (tls.Certificate, string, error)
	if withTLS {
		cert = func() (tls.Certificate, string, error) { return coord.SelfSigned(filepath.Join(dir, "serve-tls")) }
	}
	ln, scheme, pin, err := server.Listen(addr, cert)
	if err != nil {
		return nil, err
	}
	if pin != "" {
		fmt.Fprintf(f.IO.ErrOut, "certificate sha256 pin: %s (clients: `vastfleet context add NAME URL --pin %s`)\n", pin, pin)
	}
	fmt.Fprintf(f.IO.Out, "vastfleet %s serving on %s://%s (data dir %s)\n", f.Version, scheme, ln.Addr(), dir)
	fmt.Fprintf(f.IO.ErrOut, "make tokens with `vastfleet serve token create NAME --role viewer|operator`; Ctrl+C stops the server (running jobs keep their nodes and resume at the next start)\n")
	return ln, nil
}

// ServedArgs are the global flags of a command a server runs in its own
// process (serve's runner): here (--server local), on the server's data
// dir and market, with its key.
func (o Options) ServedArgs(dataDir string) []string {
	args := []string{"--server", server.Local, "--data-dir", dataDir, "--market", o.Market,
		"--sim-speed", strconv.FormatFloat(o.SimSpeed, 'g', -1, 64), "--sim-faults", o.SimFaults,
		"--sim-seed", strconv.FormatInt(o.SimSeed, 10), "--api-rate", strconv.FormatFloat(o.APIRate, 'g', -1, 64)}
	if o.APIKey != "" {
		args = append(args, "--api-key", o.APIKey)
	}
	if o.APIURL != "" {
		args = append(args, "--api-url", o.APIURL)
	}
	if o.Verbose {
		args = append(args, "-v")
	}
	return args
}

// Serving is how `serve` runs: where it listens, its database (sqlite:PATH
// or postgres://..., "" for the data dir's), the replica it is restored
// from and replicates to, and the --agent-bin and --coord-addr of the
// jobs it runs.
type Serving struct {
	Addr                   string
	TLS                    bool
	DB                     string
	Replicate, RestoreFrom string
	AgentBin, CoordAddr    string
}

// Serve runs the vastfleet server of this data dir until ctx ends. An
// empty data dir is brought back from RestoreFrom first, which it then
// goes on replicating to unless Replicate says where; what the server
// holds for its life is opened before it replicates, and each command a
// client asks for is run by main, a command line in this process on the
// server's data dir and market, with its key, whose jobs acknowledge
// nothing before the replica has it.
func (f *Factory) Serve(ctx context.Context, o Serving, main func(ctx context.Context, ios *iostreams.IOStreams, args []string, durable func(context.Context) error) int) error {
	if err := server.CheckAddr(o.Addr, o.TLS); err != nil {
		return err
	}
	dir, err := f.DataDir()
	if err != nil {
		return err
	}
	dbs, err := server.ReplicatedDBs(o.DB, o.Replicate != "" || o.RestoreFrom != "")
	if err != nil {
		return err
	}
	if o.RestoreFrom != "" {
		if err := f.restoreForServing(ctx, o.RestoreFrom, dbs); err != nil {
			return err
		}
		o.Replicate = cmp.Or(o.Replicate, o.RestoreFrom)
	}
	db, err := server.OpenSpec(ctx, o.DB, f.DataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := f.HoldForServing(ctx); err != nil {
		return err
	}
	var durable func(context.Context) error
	if o.Replicate != "" {
		flush, d, err := f.replicateForServing(ctx, o.Replicate, dbs)
		if err != nil {
			return err
		}
		defer flush()
		durable = d
	}
	globals, getenv := f.Opts.ServedArgs(dir), f.IO.Getenv
	srv, err := f.Server(db, func(ctx context.Context, args []string, out, errOut io.Writer) int {
		args = server.CommandArgs(args, o.AgentBin, o.CoordAddr)
		ios := &iostreams.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut, Getenv: getenv}
		return main(ctx, ios, append(slices.Clone(globals), args...), durable)
	})
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	defer srv.Stop()
	ln, err := f.serveListen(o.Addr, o.TLS)
	if err != nil {
		return err
	}
	return srv.ServeUntil(ctx, ln)
}
