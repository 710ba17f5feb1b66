package factory

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"strconv"

	"github.com/vastfleet/vastfleet/internal/coord"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/replica"
	"github.com/vastfleet/vastfleet/internal/server"
	"github.com/vastfleet/vastfleet/internal/store"
)

// Restore brings an empty data dir back from the replica at url (serve
// --restore-from), its databases dbs.
func (f *Factory) Restore(ctx context.Context, url string, dbs []string) error {
	dir, err := f.DataDir()
	if err != nil {
		return err
	}
	return replica.Restore(ctx, dir, url, dbs, f.Log)
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

// Replicate starts replicating the data dir to url (serve --replicate),
// once every database exists, so that each is replicated from its first
// write.
func (f *Factory) Replicate(ctx context.Context, url string, dbs []string) (*replica.Replicator, error) {
	dir, err := f.DataDir()
	if err != nil {
		return nil, err
	}
	cdb, err := f.CoordDB(ctx)
	if err != nil {
		return nil, err
	}
	cdb.Close()
	return replica.Start(ctx, dir, url, dbs, f.Log)
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

// ServeListen listens on addr (server.Listen), with withTLS on HTTPS
// with a self-signed certificate kept in the data dir, whose pin it
// gives.
func (f *Factory) ServeListen(addr string, withTLS bool) (ln net.Listener, scheme, pin string, err error) {
	dir, err := f.DataDir()
	if err != nil {
		return nil, "", "", err
	}
	var cert func() (tls.Certificate, string, error)
	if withTLS {
		cert = func() (tls.Certificate, string, error) { return coord.SelfSigned(filepath.Join(dir, "serve-tls")) }
	}
	return server.Listen(addr, cert)
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
