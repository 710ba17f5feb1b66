package nodes

import (
	"context"
	"errors"
	"fmt"

	"github.com/vastfleet/vastfleet/internal/provider"
)

// Route is an instance's SSH route as ssh-url and scp-url show it.
type Route struct {
	// URL is scheme://root@HOST:PORT, derived as the vastai CLI does.
	URL  string
	Host string
	Port int
}

// RouteOf is instance id's route, as an ssh:// or scp:// (scheme) URL.
func RouteOf(ctx context.Context, p provider.Provider, id int64, scheme string) (Route, error) {
	urlOf := provider.SSHURL
	if scheme == "scp" {
		urlOf = provider.SCPURL
	}
	inst, err := p.ShowInstance(ctx, id)
	if errors.Is(err, provider.ErrNotFound) {
		return Route{}, &UsageError{fmt.Sprintf("instance %d: not found on the marketplace (see `vastfleet ls`)", id)}
	}
	if err != nil {
		return Route{}, fmt.Errorf("instance %d: %w", id, err)
	}
	host, port, ok := provider.SSHAddr(inst)
	if !ok {
		return Route{}, fmt.Errorf("instance %d has no ssh address yet (state %q): try again once it runs", id, inst.Status())
	}
	return Route{URL: urlOf(inst), Host: host, Port: port}, nil
}
