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
	code := cli.Main(ctx, cli.System(), os.Args[1:])
	stop()
	os.Exit(code)
}
