package job

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/stat"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// What became of a culled node's replacement (Replacement.State).
const (
	NotReplaced   = "not replaced" // it would not pay for itself
	Replacing     = "replacing"    // rented, booting or being prepared
	Replaced      = "replaced"     // it runs the job
	ReplaceFailed = "failed"       // none became ready and prepared; nothing of it stays rented
)

// Replacement is what the cull policy did to replace a culled node: the
// payback it was judged on and, when it paid, the instance that took the
// node's place.
type Replacement struct {
	State      string  `json:"state"`
	Payback    Payback `json:"payback"`
	InstanceID int64   `json:"instance_id,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// Line is the replacement in words.
func (p Replacement) Line() string {
	switch p.State {
	case NotReplaced:
		if p.Error != "" {
			return "not replaced: " + p.Error
		}
		if p.Payback.OfferID == 0 {
			return "not replaced: " + p.Payback.Line()
		}
		return "not replaced: it would not pay for itself: " + p.Payback.Line()
	case Replaced:
		return fmt.Sprintf("replaced by instance %d (%s)", p.InstanceID, p.Payback.Line())
	case ReplaceFailed:
		return "replacement failed: " + p.Error
	}
	return "replacing (" + p.Payback.Line() + ")"
}

// ReplacedNode: a culled node's replacement joined the run, or failed to.
type ReplacedNode struct {
	About
	Culled int64 `json:"culled"`
	Replacement
}

// replacer rents and prepares the replacements of culled nodes beside
// the watch, one batch at a time, through the job's own launcher and
// prepare steps. Its state is the watch goroutine's; only the batch's
// goroutine runs apart, and hands its nodes back on done.
type replacer struct {
	r       *runner
	ctx     context.Context
	cancel  context.CancelFunc
	pending []Node // culled nodes waiting for a batch
	busy    bool
	batch   []Node // the batch under way, while busy
	batches int    // batches started: each prepares into its own logs
	// accept says which offers pay, at the last cull's figures: a batch
	// rents from those alone.
	accept func(market.Ranked) bool
	done   chan grown
}

// grown is one batch's outcome: the culled nodes it replaces, the nodes
// ready and prepared in their places (fewer when some failed) and what
// preparing them said.
type grown struct {
	culled []Node
	nodes  []Node
	events []Event
	err    error
}

func newReplacer(ctx context.Context, r *runner) *replacer {
	ctx, cancel := context.WithCancel(ctx)
	return &replacer{r: r, ctx: ctx, cancel: cancel, done: make(chan grown, 1)}
}

// coming is how many replacements are asked and not yet in the run.
func (p *replacer) coming() int {
	n := len(p.pending)
	if p.busy {
		n += len(p.batch)
	}
	return n
}

// ask queues a replacement for the culled node, to take its place.
func (p *replacer) ask(culled Node) {
	p.pending = append(p.pending, culled)
	p.next()
}

// next starts a batch for the pending replacements, unless one runs.
func (p *replacer) next() {
	if p.busy || len(p.pending) == 0 {
		return
	}
	batch := p.pending
	p.pending, p.busy, p.batch = nil, true, batch
	p.batches++
	sub := fmt.Sprintf("replacement-%d", p.batches)
	accept := p.accept
	go func() { p.done <- p.grow(batch, sub, accept) }()
}

// grow rents len(culled) replacements, waits until they are ready and
// prepares them, each in a culled node's place (its name and rank), their
// logs under sub, from the offers accept takes; what fails is destroyed.
func (p *replacer) grow(culled []Node, sub string, accept func(market.Ranked) bool) grown {
	r := p.r
	g := grown{culled: culled}
	sum, err := r.d.Launcher.Grow(p.ctx, len(culled), accept)
	if err != nil {
		g.err = fmt.Errorf("renting: %w", err)
	}
	if len(sum.ReadyIDs) == 0 {
		if g.err == nil {
			g.err = fmt.Errorf("none became ready (%d rented, %d failed%s)", sum.Rented, sum.Failed, capNote(sum.StoppedAtCap))
		}
		return g
	}
	nodes, err := r.d.Nodes.Select(p.ctx, sum.ReadyIDs)
	if err == nil {
		for i := range min(len(nodes), len(culled)) {
			nodes[i].Name, nodes[i].Rank = culled[i].Name, culled[i].Rank
		}
		emit := func(e Event) { g.events = append(g.events, e) }
		nodes, err = r.prepareNodes(p.ctx, nodes, sub, emit)
	}
	if err != nil {
		g.err = fmt.Errorf("preparing: %w", err)
	}
	g.nodes = nodes
	var failed []int64
	for _, id := range sum.ReadyIDs {
		if !slices.ContainsFunc(nodes, func(n Node) bool { return n.ID == id }) {
			failed = append(failed, id)
		}
	}
	if len(failed) > 0 {
		// Never left rented: it is no node of the run.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), finishTimeout)
		defer cancel()
		if err := r.d.Fleet.Destroy(dctx, failed); err != nil {
			g.err = fmt.Errorf("%v; destroying %v: %w (`vastfleet down %s` destroys them)", g.err, failed, err, r.rec.ID)
		}
	}
	return g
}

func capNote(cap string) string {
	if cap == "" {
		return ""
	}
	return "; " + cap
}

// joined takes in a finished batch, if any: its nodes join the run (the
// ids returned, for the watch), each cull records its outcome.
func (p *replacer) joined(ctx context.Context) []int64 {
	select {
	case g := <-p.done:
		p.busy = false
		in := p.take(ctx, g, true)
		p.next()
		return in
	default:
		return nil
	}
}

// take records a batch: with join, its nodes run the job; without (the
// run is over) they are left to the job's destroy.
func (p *replacer) take(ctx context.Context, g grown, join bool) []int64 {
	r := p.r
	for _, e := range g.events {
		r.d.emit(e)
	}
	var in []int64
	for _, culled := range g.culled {
		rp := Replacement{State: ReplaceFailed}
		i := slices.IndexFunc(g.nodes, func(n Node) bool { return n.Name == culled.Name })
		switch {
		case i >= 0 && join:
			rp.State, rp.InstanceID = Replaced, g.nodes[i].ID
			r.nodes = append(r.nodes, g.nodes[i])
			r.rec.RunIDs = append(r.rec.RunIDs, g.nodes[i].ID)
			in = append(in, g.nodes[i].ID)
		case i >= 0:
			rp.InstanceID, rp.Error = g.nodes[i].ID, "ready after the run ended; destroyed with the job"
		case g.err != nil:
			rp.Error = g.err.Error()
		default:
			rp.Error = "fewer replacements became ready than asked"
		}
		r.replaced(culled.ID, rp)
	}
	_ = r.save(ctx) // the next save tries again
	return in
}

// stop ends the replacements once the run is over: a batch under way is
// cancelled (the launch destroys what it rented) and recorded, and those
// waiting are not rented.
func (p *replacer) stop(ctx context.Context) {
	p.cancel()
	if p.busy {
		p.take(ctx, <-p.done, false)
		p.busy = false
	}
	for _, culled := range p.pending {
		p.r.replaced(culled.ID, Replacement{State: ReplaceFailed, Error: "the run ended first"})
	}
	p.pending = nil
	_ = p.r.save(ctx)
}

// replaced records what became of a cull's replacement and tells it.
func (r *runner) replaced(culled int64, rp Replacement) {
	for i := range r.rec.Culls {
		k := &r.rec.Culls[i]
		if k.ID != culled || k.Replacement == nil {
			continue
		}
		rp.Payback = k.Replacement.Payback
		k.Replacement = &rp
		r.d.emit(ReplacedNode{About{r.rec.ID}, culled, rp})
	}
}

// replacement judges whether a culled node is replaced: the payback of
// the first offer a replacement would be rented from that pays (past
// those the replacements under way take), at the job's figures now
// (totals are the coordinator's). The replacer rents only from offers
// that pay at these figures.
func (r *runner) replacement(ctx context.Context, k Cull, c *culler, t wire.Totals) *Replacement {
	if r.d.Launcher == nil || k.Median <= 0 {
		return nil
	}
	offers, err := r.d.Launcher.GrowOffers(ctx)
	if err != nil {
		return &Replacement{State: NotReplaced, Payback: Payback{Median: k.Median},
			Error: fmt.Sprintf("reading the offers left: %v", err)}
	}
	_, units := market.Quantity(r.o.Job.By)
	s := stay{median: k.Median, units: units, perUnit: c.perUnit(offers.Listed, units)}
	if cost, err := r.d.Fleet.Cost(ctx, r.rec.ID); err == nil {
		var pulls []float64
		for _, ic := range cost.Instances {
			pulls = append(pulls, ic.Bandwidth)
		}
		s.pull = stat.Median(pulls)
	}
	elapsed := r.d.Clock.Now().Sub(r.began)
	s.left, s.known, s.of = timeLeft(r.o.Job.MaxDuration, elapsed, t.ItemsDone, t.ItemsLeft)
	s.load = r.loadTime(ctx, c.inst)
	taken := r.repl.coming()
	var first *Payback
	for _, o := range offers.Next {
		pb := s.payback(o)
		if first == nil {
			first = &pb
		}
		if !pb.Pays {
			continue
		}
		if taken > 0 {
			taken-- // a replacement under way rents it
			continue
		}
		r.repl.accept = func(o market.Ranked) bool { return s.payback(o).Pays }
		return &Replacement{State: Replacing, Payback: pb}
	}
	if first == nil {
		first = &Payback{LeftOf: s.of, Median: s.median, PerUnit: s.perUnit}
	}
	return &Replacement{State: NotReplaced, Payback: *first}
}

// loadTime is how long a node is expected to take from its rent to
// running the job: the fleet's median boot (its rent to its first
// running, as the store dated them), plus the job's prepare steps as
// they took from the launch's end to the run's start (when this up
// launched).
func (r *runner) loadTime(ctx context.Context, inst map[int64]store.Instance) time.Duration {
	var boots []float64
	for id, in := range inst {
		evs, err := r.d.Store.Events(ctx, id)
		if err != nil {
			continue
		}
		for _, e := range evs {
			if e.To == provider.StateRunning {
				boots = append(boots, float64(e.At.Sub(in.CreatedAt)))
				break
			}
		}
	}
	load := time.Duration(stat.Median(boots))
	if !r.launched.IsZero() {
		load += max(r.began.Sub(r.launched), 0)
	}
	return load
}

// releases says whether the job releases each node once its run has
// exited: a `run:` job that destroys its nodes at the end (auto_destroy)
// and runs no other session on them, so that a node done early (or a
// replacement that started the run over) leaves no other billing idle.
// A job with items releases none: its run is how items get done.
func (r *runner) releases() bool {
	j := r.o.Job
	return j.Run != "" && j.AutoDestroy && len(j.Sessions) == 0
}

// releaseExited collects and destroys the nodes of a job that releases
// (releases) whose run has exited, while others still run; running are
// the nodes whose run has not exited.
func (r *runner) releaseExited(ctx context.Context, running map[int64]bool, t wire.Totals) {
	if !r.releases() || t.ItemsDone+t.ItemsLeft > 0 {
		return
	}
	var done []Node
	for _, n := range r.nodes {
		if !running[n.ID] && !r.kept[n.ID] {
			done = append(done, n)
		}
	}
	if len(done) == 0 || len(done) == len(r.nodes) && r.repl.coming() == 0 {
		return // the run is over: the job's finish collects and destroys
	}
	if err := collectFiles(ctx, r.d, r.rec, done); err != nil {
		// Nothing is destroyed before its results are home: these stay
		// for the finish, which collects again first.
		if r.kept == nil {
			r.kept = map[int64]bool{}
		}
		for _, n := range done {
			r.kept[n.ID] = true
		}
		return
	}
	if err := r.d.Fleet.Destroy(ctx, ids(done)); err != nil {
		return // the job's finish destroys them
	}
	r.nodes = slices.DeleteFunc(r.nodes, func(n Node) bool { return slices.Contains(done, n) })
	r.released = append(r.released, done...)
	r.d.emit(Released{About{r.rec.ID}, ids(done)})
}

// Released: nodes whose run exited were destroyed while the others ran.
type Released struct {
	About
	IDs []int64 `json:"ids"`
}
