package fleet

import (
	"context"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// Overlay shows recs as the marketplace lists them now, in memory only: it
// is for looking at a fleet while another process holds the data dir (a
// launch in another terminal), so it never writes the store and never
// sends anything but the listing. A record the listing does not show (or
// shows under another label) is left as the store has it: one listing is
// no proof that an instance is gone.
func (m *Manager) Overlay(ctx context.Context, recs []store.Instance, now time.Time) ([]store.Instance, error) {
	l, err := m.P.ListInstances(ctx)
	if err != nil {
		return recs, err
	}
	listed := byID(l)
	out := make([]store.Instance, len(recs))
	for i, r := range recs {
		out[i] = r
		row, ok := listed[r.ID]
		if !ok || !sameInstance(r, row) {
			continue
		}
		st := row.Status()
		// The same rule as Store.UpdateSeen: uptime counts from the
		// first listing seen running.
		switch {
		case st != "running":
			r.RunningSince = time.Time{}
		case !r.GoneAt.IsZero():
			r.RunningSince = now
		case r.State != "running" || r.RunningSince.IsZero():
			r.RunningSince = store.ChangedAt(r.LastSeenAt, now)
		}
		r.State, r.SSHHost, r.SSHPort, r.LastSeenAt, r.GoneAt = st, sshHost(row), sshPort(row), now, time.Time{}
		if u := provider.SSHURL(row); u != "" {
			r.SSHURL = u
		}
		out[i] = r
	}
	return out, nil
}
