package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/shell"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// leased is what a lease request brought: an item, or a wait before the
// next request, or the news that every item is done.
type leased struct {
	item  *wire.Item
	lease string
	wait  time.Duration // wall time; with no item
	done  bool
}

// itemSource is what an item-worker session needs from the agent.
type itemSource interface {
	lease(ctx context.Context, session string) (leased, error)
	// finished keeps a result on disk, then sends it.
	finished(ctx context.Context, r wire.ItemResult)
	// itemLine takes a structured stdout line of an item run; n counts
	// the run's findings from 1.
	itemLine(session string, item int64, n int64, l wire.Line)
}

// itemCommand is the session's command for one item.
func itemCommand(command, value string) string {
	return strings.ReplaceAll(command, wire.ItemPlaceholder, shell.Quote(value))
}

// runItems is an item worker's life: lease an item, run the command for
// it, report the result, and again, until the coordinator says every item
// is done (or ctx ends). An item whose run is cut short by ctx reports
// nothing: its lease runs out, and it goes to another node or to this
// one's next agent.
func (s *session) runItems(ctx context.Context) {
	name := s.spec.Name
	backoff := s.base
	for {
		s.set(func(st *wire.SessionState) { st.State, st.PID, st.Item = stateStarting, 0, 0 })
		l, err := s.items.lease(ctx, name)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.set(func(st *wire.SessionState) { st.State = stateBackoff })
			s.log.Warn("no item lease", "session", name, "retry_in", backoff, "err", err)
			if !sleep(ctx, jitter(backoff)) {
				return
			}
			backoff = min(2*backoff, maxSendBackoff)
			continue
		}
		backoff = s.base
		if l.done {
			s.set(func(st *wire.SessionState) { c := 0; st.State, st.ExitCode = stateExited, &c })
			fmt.Fprintf(s.out, "[vastfleet] session %s: every item is done\n", name)
			return
		}
		if l.item == nil {
			// The rest is out with other nodes; one may come back.
			s.set(func(st *wire.SessionState) { st.State = stateBackoff })
			if !sleep(ctx, l.wait) {
				return
			}
			continue
		}
		it := *l.item
		s.set(func(st *wire.SessionState) { st.Item = it.ID })
		tail := &tailBuffer{max: wire.MaxStdoutTail}
		var found int64
		env := append(s.env[:len(s.env):len(s.env)],
			wire.EnvItem+"="+it.Value, wire.EnvItemID+"="+strconv.FormatInt(it.ID, 10))
		code, err := s.once(ctx, runSpec{
			command: itemCommand(s.spec.Command, it.Value), env: env, tail: tail,
			onLine: func(line wire.Line) {
				if line.Metric == "" {
					found++
				}
				s.items.itemLine(name, it.ID, found, line)
			},
		})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// Not the item's fault: the next lease request puts it back.
			s.log.Warn("item run could not start", "session", name, "item", it.ID, "err", err)
			if !sleep(ctx, jitter(backoff)) {
				return
			}
			continue
		}
		s.items.finished(ctx, wire.ItemResult{
			Session: name, ID: it.ID, Lease: l.lease, ExitCode: code,
			StdoutTail: tail.String(), Outputs: outputs(s.spec.Outputs, it.Value), At: time.Now().UTC(),
		})
		s.set(func(st *wire.SessionState) {
			c := code
			st.ExitCode, st.Item = &c, 0
			st.ItemsDone++
		})
	}
}

// outputs describes the declared output files of one item run.
func outputs(paths []string, value string) []wire.Output {
	var out []wire.Output
	for _, p := range paths {
		p = strings.ReplaceAll(p, wire.ItemPlaceholder, value)
		o := wire.Output{Path: p}
		if f, err := os.Open(p); err == nil {
			h := sha256.New()
			if n, err := io.Copy(h, f); err == nil {
				o.Bytes, o.SHA256 = n, hex.EncodeToString(h.Sum(nil))
			}
			f.Close()
		}
		out = append(out, o)
	}
	return out
}

// tailBuffer keeps the last max bytes written to it, cut at a line start
// when one is near, and valid UTF-8.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	if len(b) == t.max {
		// Cut mid-line: start at the next line, if there is one.
		if i := strings.IndexByte(string(b), '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
	}
	return strings.ToValidUTF8(string(b), "")
}

// lease asks the coordinator for the session's next item.
func (a *agent) lease(ctx context.Context, session string) (leased, error) {
	var l wire.ItemLease
	status, err := a.client.postStatus(ctx, wire.PathItemsLease,
		wire.ItemLeaseRequest{Fleet: a.cfg.Fleet, Node: a.cfg.Node, Session: session}, &l)
	if err != nil {
		return leased{}, err
	}
	if status == http.StatusNoContent {
		return leased{done: true}, nil
	}
	if l.Item != nil {
		if l.Item.ID <= 0 || l.Item.Value == "" {
			return leased{}, fmt.Errorf("coordinator leased an item without an id or a value: %+v", *l.Item)
		}
		return leased{item: l.Item, lease: l.Lease}, nil
	}
	wait := a.scaledInterval(time.Duration(l.RetryS * float64(time.Second)))
	if l.RetryS <= 0 {
		wait = time.Duration(a.interval.Load())
	}
	return leased{wait: wait}, nil
}

// finished spools the result (from here on it survives a crash or an
// outage) and sends it at once, so that the coordinator has it before this
// session asks for its next item; what is not acknowledged now the
// results sender retries.
func (a *agent) finished(ctx context.Context, r wire.ItemResult) {
	r.Fleet, r.Node = a.cfg.Fleet, a.cfg.Node
	if err := a.results.add(r); err != nil {
		a.log.Error("item result kept in memory only", "item", r.ID, "err", err)
	}
	if err := a.flushResults(ctx); err != nil {
		select {
		case a.wakeResults <- struct{}{}:
		default:
		}
	}
}

// itemLine handles a structured line of an item run. A finding's key is
// the item and its place in the run, not this node: a second run of the
// item (after its lease ran out) reports the same keys, and the
// coordinator stores each once.
func (a *agent) itemLine(session string, item int64, n int64, l wire.Line) {
	if l.Metric != "" {
		a.onLine(session, l)
		return
	}
	a.addFinding(wire.Finding{
		Key:     fmt.Sprintf("item/%d/%d", item, n),
		Session: session,
		Item:    item,
		At:      time.Now().UTC(),
		Data:    append([]byte(nil), l.Found...),
	})
}

func resultKey(r wire.ItemResult) string {
	return fmt.Sprintf("%d/%s/%s", r.ID, r.Lease, r.Session)
}

// flushResults sends the spooled results one by one, oldest first, until
// none is left or one fails. One sender at a time: a result is never in
// flight twice from this agent. The findings spooled before a result go
// first: once the coordinator counts an item done, what the item found is
// stored, so a job that ends on its last result (and destroys the fleet)
// loses no finding.
func (a *agent) flushResults(ctx context.Context) error {
	a.resultsMu.Lock()
	defer a.resultsMu.Unlock()
	if a.results.len() == 0 {
		return nil
	}
	if err := a.flushFindings(ctx); err != nil {
		return fmt.Errorf("findings before the item result: %w", err)
	}
	for {
		batch := a.results.batch(1, 1)
		if len(batch) == 0 {
			return nil
		}
		r := batch[0]
		var ack wire.ItemResultAck
		err := a.client.post(ctx, wire.PathItemsResult, r, &ack)
		var se *statusError
		if errors.As(err, &se) && permanentStatus(se.Status) {
			// Sending it again would be refused again.
			a.log.Error("item result refused; dropping it", "item", r.ID, "err", err)
			err = nil
		}
		if err != nil {
			return err
		}
		if _, err := a.results.ack([]string{resultKey(r)}); err != nil {
			return err
		}
	}
}

// permanentStatus is a refusal that no retry changes.
func permanentStatus(code int) bool {
	return code/100 == 4 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests &&
		code != http.StatusUnauthorized // a token the coordinator may yet reload
}

// sendResults retries what finished could not send, with capped backoff.
func (a *agent) sendResults(ctx context.Context) {
	a.send(ctx, "item results", a.results.len, a.wakeResults, a.flushResults)
}
