// Command vastfleet turns GPU marketplaces such as vast.ai into cheap, safe
// clusters. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vastfleet/vastfleet/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first Ctrl+C cancels ctx: commands stop cleanly and may ask what
	// to do next. After it, signals get their default action again, so a
	// second Ctrl+C ends the process at once (the store stays consistent:
	// every write is a transaction, and intents precede rentals).
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := cli.Main(ctx, cli.System(), os.Args[1:])
	stop()
	os.Exit(code)
}
