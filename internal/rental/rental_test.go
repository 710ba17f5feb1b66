package rental

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// refusingEnv fails the test if a rental reaches the data dir's manager.
type refusingEnv struct{ t *testing.T }

func (e refusingEnv) Manager(context.Context, string) (*fleet.Manager, error) {
	e.t.Error("bad input reached the manager: the data dir was taken before the input was checked")
	return nil, errors.New("refused")
}
func (refusingEnv) RegisterFleetKey(context.Context, provider.Provider) {}
func (refusingEnv) StartBidWatcher()                                    {}

// TestRentOneRefusesBadInputBeforeTakingTheDataDir: a request the market
// would refuse, or a fleet name the labels cannot carry, is a usage error
// (exit 2) found before the data dir is held and anything is rented.
func TestRentOneRefusesBadInputBeforeTakingTheDataDir(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]One{
		"disk below the minimum": {Rent: launch.Rent{Image: "ubuntu:22.04", Disk: 4}, OfferID: 1, Fleet: "f"},
		"fleet name with a dot":  {Rent: launch.Rent{Image: "ubuntu:22.04", Disk: 10}, OfferID: 1, Fleet: "a.b"},
		"a port that is no port": {Rent: launch.Rent{Image: "ubuntu:22.04", Disk: 10, Env: "TCP_PORTS=99999"}, OfferID: 1, Fleet: "f"},
	} {
		_, err := RentOne(context.Background(), refusingEnv{t}, "test", o, io.Discard)
		var ue usage.Error
		if !errors.As(err, &ue) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
}
