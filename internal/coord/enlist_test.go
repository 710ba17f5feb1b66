package coord

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/usage"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// TestJoinRefusesACoordinatorTheInstancesCannotReach: a fleet on the
// internet is not enlisted with a coordinator on a private address or
// without TLS: the refusal is the user's input (exit 2) and comes before
// anything is written to the data dir.
func TestJoinRefusesACoordinatorTheInstancesCannotReach(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ coord, want string }{
		{"http://127.0.0.1:8470", "cannot reach this address"},
		{"http://10.1.2.3:8470", "cannot reach this address"},
		{"http://coord.example:8470", "https://"},
		{"ftp://coord.example", "want auto or the coordinator's"},
	} {
		dir := t.TempDir()
		_, err := Join(context.Background(), Joining{Dir: dir, Coord: tc.coord, Fleet: "f", Remote: true,
			OrphanAfter: time.Minute, OrphanPolicy: wire.PolicyStop})
		var ue usage.Error
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--coord %s: %v, want a usage error saying %q", tc.coord, err, tc.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "coord.db")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--coord %s: the fleet was enlisted before the refusal (%v)", tc.coord, err)
		}
	}
}
