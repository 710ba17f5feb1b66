package localmarket

import (
	"context"
	"net"
	"os"
	"path/filepath"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// Held is a market opened in a command's own process instead of the
// local market's (VASTFLEET_SIM_LOCAL=off, or a server that holds the
// market for its whole life), served on loopback so that other commands
// meanwhile reach it where URLFile says.
type Held struct {
	URL    string
	Market *sim.Market
	stop   func()
	served chan error
	dir    string
}

// Hold opens the market in dir with cfg and serves it until Close. The
// serving outlives any command context on purpose: cleanup after Ctrl+C
// still talks to the market.
func Hold(dir string, cfg sim.Config) (*Held, error) {
	m, err := sim.Open(dir, cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		m.Close()
		return nil, err
	}
	u := "http://" + ln.Addr().String()
	if err := atomicfile.WriteFile(filepath.Join(dir, URLFile), []byte(u+"\n"), 0o600); err != nil {
		ln.Close()
		m.Close()
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	h := &Held{URL: u, Market: m, stop: stop, served: make(chan error, 1), dir: dir}
	go func() { h.served <- m.ServeListener(ctx, ln) }()
	return h, nil
}

// Close stops serving, then saves and unlocks the market.
func (h *Held) Close() error {
	os.Remove(filepath.Join(h.dir, URLFile))
	h.stop()
	<-h.served
	return h.Market.Close()
}
