package nodes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/bootstrap"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/store"
)

// tunnelSyncEvery is how often the coordinator looks for instances that
// came up or went away, to open or close their tunnels.
const tunnelSyncEvery = 2 * time.Second

// Tunnels keeps one reverse tunnel per running instance of the store's
// fleets: the node's 127.0.0.1:TunnelPort(Base, id) is carried over
// vastfleet's SSH connection to the coordinator on this machine.
type Tunnels struct {
	Store    func(context.Context) (*store.Store, error)
	Provider provider.Provider
	Ops      *Ops
	Log      *slog.Logger
	Base     int
	Local    string   // the coordinator's address on this machine
	Fleets   []string // empty: every fleet
	runs     map[int64]*tunnelRun
}

type tunnelRun struct {
	addr     string // the node's SSH address; a new one means a new tunnel
	cancel   context.CancelFunc
	attached bool // the fleet key was attached after a refusal
}

// Keep keeps the tunnels until ctx ends.
func (k *Tunnels) Keep(ctx context.Context) error {
	k.runs = map[int64]*tunnelRun{}
	defer func() {
		for _, r := range k.runs {
			r.cancel()
		}
	}()
	t := time.NewTicker(tunnelSyncEvery)
	defer t.Stop()
	for {
		if err := k.sync(ctx); err != nil && ctx.Err() == nil {
			k.Log.Warn("tunnels: listing instances", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sync opens a tunnel to each running instance that has none and closes
// those of instances gone, stopped or moved.
func (k *Tunnels) sync(ctx context.Context) error {
	st, err := k.Store(ctx)
	if err != nil {
		return err
	}
	recs, err := st.Instances(ctx, store.InstanceFilter{})
	if err != nil {
		return err
	}
	listing, err := k.Provider.ListInstances(ctx)
	if err != nil {
		return err
	}
	listed := map[int64]provider.Instance{}
	for _, in := range listing.Instances {
		listed[in.ID] = in
	}
	known, err := k.Ops.Key().HostKeys()
	if err != nil {
		return err
	}
	want := map[int64]Node{}
	for _, r := range recs {
		if !r.GoneAt.IsZero() || (len(k.Fleets) > 0 && !slices.Contains(k.Fleets, r.Fleet)) {
			continue
		}
		in, ok := listed[r.ID]
		if !ok || in.ActualStatus == nil || *in.ActualStatus != "running" {
			continue
		}
		host, port, ok := provider.SSHAddr(in)
		if !ok {
			continue
		}
		want[r.ID] = Node{Name: fmt.Sprintf("%s tunnel", r.Fleet), ID: r.ID, Host: host, Port: port}
	}
	for id, run := range k.runs {
		if n, ok := want[id]; !ok || run.addr != net.JoinHostPort(n.Host, fmt.Sprint(n.Port)) {
			run.cancel()
			delete(k.runs, id)
		}
	}
	for id, n := range want {
		if k.runs[id] == nil {
			k.start(ctx, n, known)
		}
	}
	return nil
}

func (k *Tunnels) start(ctx context.Context, n Node, known map[string]ssh.PublicKey) {
	rctx, cancel := context.WithCancel(ctx)
	run := &tunnelRun{addr: net.JoinHostPort(n.Host, fmt.Sprint(n.Port)), cancel: cancel}
	k.runs[n.ID] = run
	nodeAddr := net.JoinHostPort("127.0.0.1", fmt.Sprint(bootstrap.TunnelPort(k.Base, n.ID)))
	log := k.Log.With("instance", n.ID, "node_addr", nodeAddr)
	km, canAttach := k.Provider.(provider.KeyManager)
	go k.Ops.Pool().KeepForward(rctx, remote.Tunnel{
		Target:     k.Ops.Target(n, known),
		RemoteAddr: nodeAddr,
		Dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", k.Local)
		},
		OnUp: func(net.Addr) { log.Info("tunnel up: the agent reaches the coordinator") },
		OnDown: func(err error) {
			log.Warn("tunnel down; reconnecting", "err", err)
			// The fleet key is attached on first need, as exec does.
			if errors.Is(err, remote.ErrAuth) && canAttach && !run.attached {
				run.attached = true
				if aerr := km.AttachSSHKey(rctx, n.ID, k.Ops.Key().Authorized); aerr != nil {
					log.Warn("tunnel: attaching the fleet key", "err", aerr)
				}
			}
		},
		MaxBackoff: 30 * time.Second,
	})
}

// LoopbackOf is the address to dial for a listener's address: an
// unspecified host (0.0.0.0, ::) is reached on loopback.
func LoopbackOf(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
	}
	return tcp.String()
}
