package nodes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/termsafe"
)

// Ops runs operations on nodes over one pool of SSH connections: the
// fleet key, host keys accepted once per instance, and the key attached
// through the marketplace to instances that lack it.
type Ops struct {
	key  *Key
	p    provider.Provider
	pool *remote.Pool
	cfg  Config
}

// Config is what every operation of an Ops shares.
type Config struct {
	// Parallel bounds the SSH handshakes in flight.
	Parallel int
	// Sim maps /workspace and /root to a simulated instance's directory.
	Sim bool
	// Out takes nodes' live output, each line prefixed with its node;
	// ErrOut takes progress notes. Nil discards them.
	Out, ErrOut io.Writer
}

// New starts an Ops; Close ends its connections.
func New(key *Key, p provider.Provider, cfg Config) *Ops {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.ErrOut == nil {
		cfg.ErrOut = io.Discard
	}
	o := &Ops{key: key, p: p, cfg: cfg}
	o.pool = remote.NewPool(remote.Options{
		MaxHandshakes: min(max(cfg.Parallel, 1), 64),
		Jitter:        50 * time.Millisecond,
		OnNewHostKey: func(t remote.Target, k ssh.PublicKey) error {
			id, err := strconv.ParseInt(t.Name[strings.LastIndex(t.Name, "#")+1:], 10, 64)
			if err != nil {
				return err
			}
			return key.Remember(id, k)
		},
	})
	return o
}

// Close ends the pool's connections.
func (o *Ops) Close() error { return o.pool.Close() }

// Key is the fleet key the operations use.
func (o *Ops) Key() *Key { return o.key }

// Pool is the SSH connection pool, for tunnels kept over it.
func (o *Ops) Pool() *remote.Pool { return o.pool }

// Target is how the pool reaches n, with the host key learned for it.
func (o *Ops) Target(n Node, known map[string]ssh.PublicKey) remote.Target {
	// The name carries the instance id after '#' for OnNewHostKey.
	return remote.Target{Name: fmt.Sprintf("%s #%d", n.Name, n.ID), Host: n.Host, Port: n.Port, User: "root",
		Signer: o.key.Signer, HostKey: known[HostKeyAlias(n.ID)]}
}

// Run runs jobs (one per node, in the nodes' order) and, for nodes that
// refused the fleet key, attaches it through the marketplace and runs
// those again.
func (o *Ops) Run(ctx context.Context, nodes []Node, jobs []remote.Job, parallel int) []remote.Result {
	res := o.pool.RunAll(ctx, jobs, parallel)
	km, ok := o.p.(provider.KeyManager)
	if !ok {
		return res
	}
	var again []int
	for i, r := range res {
		if errors.Is(r.Err, remote.ErrAuth) {
			if err := km.AttachSSHKey(ctx, nodes[i].ID, o.key.Authorized); err != nil {
				res[i].Err = fmt.Errorf("%w; attaching the fleet key failed: %v", r.Err, err)
				continue
			}
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return res
	}
	retry := make([]remote.Job, len(again))
	for k, i := range again {
		retry[k] = jobs[i]
	}
	for k, r := range o.pool.RunAll(ctx, retry, parallel) {
		r.Duration += res[again[k]].Duration
		res[again[k]] = r
	}
	return res
}

// prefixWriter writes whole lines as "[name] line" to a shared output,
// safe for the terminal (termsafe.Text).
type prefixWriter struct {
	mu     *sync.Mutex
	out    io.Writer
	prefix string
	buf    bytes.Buffer
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			return len(b), nil
		}
		if _, err := fmt.Fprintf(w.out, "%s%s", w.prefix, termsafe.Text(string(w.buf.Next(i+1)))); err != nil {
			return len(b), err
		}
	}
}

func (w *prefixWriter) flush() {
	if w.buf.Len() > 0 {
		w.mu.Lock()
		fmt.Fprintf(w.out, "%s%s\n", w.prefix, termsafe.Text(w.buf.String()))
		w.mu.Unlock()
		w.buf.Reset()
	}
}
