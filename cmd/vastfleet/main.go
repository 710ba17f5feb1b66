// Command vastfleet turns GPU marketplaces such as vast.ai into cheap,
// safe clusters. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vastfleet/vastfleet/internal/cli"
	"github.com/vastfleet/vastfleet/internal/iostreams"
)

func main() { os.Exit(run()) }

// run is the command, its exit code returned.
func run() int {
	// Ctrl+C, kill (SIGTERM), a closed terminal (SIGHUP) and a closed
	// output pipe (`vastfleet launch ... | head`) all get the same clean
	// stop: ctx is cancelled, commands stop, a launch decides what to keep,
	// and the state stays consistent.
	ctx, cancel := context.WithCancel(context.Background())
	stops := make(chan os.Signal, 1)
	signal.Notify(stops, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	// SIGPIPE stays caught for the whole run: with it caught, a write to
	// the closed pipe fails with EPIPE instead of killing the process
	// half-way through its cleanup.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	go func() {
		for stop := false; !stop; {
			select {
			case <-stops:
				stop = true
			case <-pipe:
				// With SIGPIPE caught, every broken socket raises it too
				// (an agent that hung up mid-download on the coordinator):
				// only a closed stdout or stderr stops the command.
				stop = outputClosed()
			}
		}
		cancel()
		// After the first stop signal, a second Ctrl+C (or hangup) has its
		// default action again and ends the process at once (every store
		// write is a transaction, and intents precede rentals). SIGTERM
		// stays caught: it comes from programs, which escalate with
		// SIGKILL, and the kernel repeats a parent-death SIGTERM once per
		// thread of a dying parent (bench scale's market and coordinator),
		// which would otherwise kill the child before it stops its work.
		signal.Reset(os.Interrupt, syscall.SIGHUP)
	}()
	code := cli.Main(ctx, iostreams.System(), os.Args[1:])
	cancel()
	return code
}
