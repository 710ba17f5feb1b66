// Command vastfleet-agent is the agent that runs on every instance of a
// fleet (package internal/agent). The onstart that installs it sets its
// environment (see internal/wire: VASTFLEET_COORD_URL, VASTFLEET_FLEET,
// VASTFLEET_AGENT_TOKEN, …) and starts it as `vastfleet-agent agent`; the
// word "agent" is accepted and optional, so the same line works for this
// binary and for `vastfleet agent`.
//
// It is kept small on purpose (stdlib and internal/wire only): build it with
//
//	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' ./cmd/vastfleet-agent
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/vastfleet/vastfleet/internal/agent"
)

// version is set at build time with -ldflags '-X main.version=v1.2.3'.
var version = ""

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("vastfleet-agent", flag.ContinueOnError)
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: vastfleet-agent [-version] [agent]\n\nConfigured by the environment (VASTFLEET_COORD_URL, VASTFLEET_FLEET, VASTFLEET_AGENT_TOKEN, …).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Println("vastfleet-agent", versionString())
		return 0
	}
	if rest := fs.Args(); len(rest) > 1 || (len(rest) == 1 && rest[0] != "agent") {
		fs.Usage()
		return 2
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := agent.FromEnv(os.Getenv)
	if err != nil {
		log.Error("vastfleet-agent: configuration", "err", err)
		return 2
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stops := []os.Signal{os.Interrupt, syscall.SIGTERM}
	// Started under nohup, a hangup must stay ignored: asking for SIGHUP
	// would turn it back on.
	if !signal.Ignored(syscall.SIGHUP) {
		stops = append(stops, syscall.SIGHUP)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, stops...)
	go func() {
		s := <-sig
		log.Info("vastfleet-agent: stopping", "signal", s.String())
		cancel()
		signal.Reset(stops...) // a second signal ends the process at once
	}()

	err = agent.Run(ctx, cfg, log)
	switch {
	case err == nil:
		return 0
	case agent.StoppedItself(err):
		log.Error("vastfleet-agent", "err", err)
		return 3
	default:
		log.Error("vastfleet-agent", "err", err)
		return 1
	}
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
