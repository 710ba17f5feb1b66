package launch

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// What a launch does with a node whose machine delivers less than its
// offer advertised (HardwarePolicy.OnShort).
const (
	// ShortReplace puts the machine on the bad-host list with the
	// measured figures and replaces the node like a failed boot.
	ShortReplace = "replace"
	// ShortWarn puts the machine on the bad-host list and keeps the node.
	ShortWarn = "warn"
	// ShortKeep only reports it.
	ShortKeep = "keep"
)

// Defaults of the readiness gates.
const (
	// DefaultShortBelow: a node measuring less than this share of its
	// offer's cores, RAM or GPUs is short.
	DefaultShortBelow = 0.7
	// DefaultProbeWait is how long (market time) a usable node may go
	// without its boot probe reported before it counts as failed.
	DefaultProbeWait = 15 * time.Minute
	// DefaultUsableFor is how long (market time) a running node may
	// refuse to finish an SSH handshake before it is replaced like a
	// failed boot.
	DefaultUsableFor = 5 * time.Minute
	// DefaultUsableTimeout bounds one handshake attempt (wall time).
	DefaultUsableTimeout = 10 * time.Second
)

// HardwarePolicy is how a launch judges nodes by their boot probes: a
// node counts as ready once its probe is in and shows at least Below of
// what the offer advertised.
type HardwarePolicy struct {
	OnShort string  `json:"on_short_hardware"` // replace (default), warn or keep
	Below   float64 `json:"below"`             // 0: DefaultShortBelow
	// ProbeWait: 0 is DefaultProbeWait.
	ProbeWait time.Duration `json:"probe_wait,omitempty"`
}

func (h HardwarePolicy) withDefaults() HardwarePolicy {
	if h.OnShort == "" {
		h.OnShort = ShortReplace
	}
	if h.Below <= 0 {
		h.Below = DefaultShortBelow
	}
	if h.ProbeWait <= 0 {
		h.ProbeWait = DefaultProbeWait
	}
	return h
}

// ParseOnShort checks an on_short_hardware value ("" is the default).
func ParseOnShort(s string) (string, error) {
	switch s {
	case "":
		return ShortReplace, nil
	case ShortReplace, ShortWarn, ShortKeep:
		return s, nil
	}
	return "", fmt.Errorf("on_short_hardware %q: want replace, warn or keep", s)
}

// Checks are what the launch asks of the world beyond the marketplace:
// whether a node is usable and what its boot probe measured. The caller
// (the CLI's factory) supplies them on every run and resume.
type Checks struct {
	// Usable, when set, completes an SSH handshake with a running node:
	// only then does it count as ready (a port that accepts TCP and never
	// answers does not).
	Usable func(ctx context.Context, host string, port int) error
	// UsableTimeout bounds one attempt (wall time); 0: DefaultUsableTimeout.
	UsableTimeout time.Duration
	// UsableFor: 0 is DefaultUsableFor.
	UsableFor time.Duration
	// ProbeWait, when set, replaces HardwarePolicy.ProbeWait (a fast
	// simulated clock needs more market time for the same wall time).
	ProbeWait time.Duration
	// AgentWait is how long (wall time) each node whose agent or probe is
	// due may hold the ticks while the coordinator has no probe from it;
	// 0 looks once a tick. On a virtual clock the market stands still
	// meanwhile, so a simulated agent's real boot time is not market time.
	AgentWait time.Duration
	// Agents returns what the coordinator knows of the fleet's agents,
	// by instance id: their boot stage and probe.
	Agents func(ctx context.Context, fleet string) (map[int64]wire.Node, error)
}

// HardwareCheck is a node's probe against its offer: the
// short_hardware and probe_failed events carry it.
type HardwareCheck struct {
	ProbeStatus string        `json:"probe_status"`
	Measured    wire.Capacity `json:"measured"`
	Advertised  wire.Capacity `json:"advertised"`
	// RAMTargetMB is the RAM the probe tried to allocate (the advertised
	// RAM, bounded): Measured.RAMMB is what it got of that.
	RAMTargetMB float64  `json:"ram_target_mb"`
	Short       []string `json:"short,omitempty"` // cores, ram, gpus; probe when it failed
	Action      string   `json:"action"`          // replace, warn or keep
	Error       string   `json:"error,omitempty"`
}

// judge compares a probe with the offer its instance was rented from.
// A failed probe is never a pass.
func judge(p wire.Probe, o market.Offer, below float64) HardwareCheck {
	c := HardwareCheck{
		ProbeStatus: p.Status,
		Measured: wire.Capacity{Cores: round2(p.Cores), RAMMB: round2(float64(p.RAMBytes) / 1e6), GPUs: p.GPUs,
			DownMbps: round2(8 * p.DownloadMBps)},
		Advertised:  wire.Capacity{Cores: o.CPUCoresEffective, RAMMB: o.CPURAM, GPUs: o.NumGPUs, DownMbps: o.InetDown},
		RAMTargetMB: round2(float64(p.RAMTargetBytes) / 1e6),
		Error:       p.Error,
	}
	if p.Status != wire.ProbeOK {
		c.Short = append(c.Short, "probe")
		return c
	}
	if c.Advertised.Cores > 0 && p.Cores < below*c.Advertised.Cores {
		c.Short = append(c.Short, "cores")
	}
	if p.RAMTargetBytes > 0 && float64(p.RAMBytes) < below*float64(p.RAMTargetBytes) {
		c.Short = append(c.Short, "ram")
	}
	if p.GPUAlloc == wire.GPUAllocOK || p.GPUAlloc == wire.GPUAllocShort {
		// Demanded, not enumerated: the GPUs that took the allocation.
		c.Measured.GPUs = min(p.GPUs, p.GPUAllocGPUs)
	}
	if c.Advertised.GPUs > 0 && float64(c.Measured.GPUs) < below*float64(c.Advertised.GPUs) {
		c.Short = append(c.Short, "gpus")
	}
	return c
}

func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

// figures says a check's measured and advertised figures in words.
func (c HardwareCheck) figures() string {
	if c.ProbeStatus != wire.ProbeOK {
		return "boot probe failed: " + c.Error
	}
	var parts []string
	for _, s := range c.Short {
		switch s {
		case "cores":
			parts = append(parts, fmt.Sprintf("%.1f of %.1f cores", c.Measured.Cores, c.Advertised.Cores))
		case "ram":
			parts = append(parts, fmt.Sprintf("%.0f of %.0f MB RAM allocatable", c.Measured.RAMMB, c.RAMTargetMB))
		case "gpus":
			parts = append(parts, fmt.Sprintf("%d of %d GPUs", c.Measured.GPUs, c.Advertised.GPUs))
		}
	}
	return "short hardware: measured " + strings.Join(parts, ", ")
}

// gateChecks does this tick's I/O for the nodes waiting at the gates
// (running, not yet ready): a handshake with each node not yet usable,
// and one look at the coordinator's probes.
func (r *runner) gateChecks(ctx context.Context) {
	ck := r.spec.Checks
	var shake, aside []*node
	wantProbes := false
	for _, n := range r.sorted() {
		if !n.atGate() {
			continue
		}
		switch {
		case ck.Usable != nil && !n.usable && n.shakeSlow:
			aside = append(aside, n)
		case ck.Usable != nil && !n.usable:
			shake = append(shake, n)
		case r.awaitsAgent(n):
			wantProbes = true
		}
	}
	r.handshakes(ctx, shake)
	// After the tick's own handshakes, so that none of theirs is spent
	// while the market stands still for those.
	for _, n := range aside {
		r.shakeAside(ctx, n)
	}
	for _, n := range append(shake, aside...) {
		wantProbes = wantProbes || n.usable && r.awaitsAgent(n)
	}
	if !wantProbes || ck.Agents == nil {
		return
	}
	r.readProbes(ctx)
}

// awaitsAgent: the gate still needs to hear from the node's agent: its
// probe when hardware is judged, else its first report.
func (m *model) awaitsAgent(n *node) bool {
	if m.spec.Hardware != nil {
		return n.probe == nil
	}
	return m.spec.Checks.Agents != nil && !n.agentSeen
}

// atGate: the node runs, has not passed the gates and is still wanted.
func (n *node) atGate() bool {
	return !n.doomed && !n.dropping && n.phase == phBooting && n.state == provider.StateRunning
}

// handshakes tries an SSH handshake with each node, at most Workers at
// once; each goroutine writes its own node only. The tick waits for them,
// so a virtual market stands still meanwhile: a node whose handshake runs
// out of its time is marked slow, and its later tries no longer hold the
// ticks (shakeAside).
func (r *runner) handshakes(ctx context.Context, ns []*node) {
	ck := r.spec.Checks
	timeout := r.usableTimeout()
	r.parallel(ctx, ns, func(ctx context.Context, n *node) error {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		start := time.Now()
		if err := ck.Usable(sctx, n.sshHost, n.sshPort); err != nil {
			n.unusable = err.Error()
			// Slow: it took the whole time, whichever timer ended it.
			n.shakeSlow = ctx.Err() == nil && time.Since(start) >= timeout
			return nil
		}
		n.usable, n.unusable = true, ""
		return nil
	})
}

func (r *runner) usableTimeout() time.Duration {
	if t := r.spec.Checks.UsableTimeout; t > 0 {
		return t
	}
	return DefaultUsableTimeout
}

// shakeAside handles the handshakes of a node whose port once took
// UsableTimeout of wall time without answering (SSHHang in the simulator,
// a wedged sshd on vast). Waiting that long on every tick would hold a
// virtual market UsableTimeout a tick for as long as the node is kept
// (UsableFor), and on vast delay every other node's tick: two such nodes
// among a demo's 69 rentals made its launch take 170 s of wall time where
// 50 s did without them. So it holds the ticks once, in handshakes; after
// that one try at a time runs in the background, the market moving as it
// would on vast, and the first tick after it ends takes its result in.
// What it leaves waiting is a node already known to answer slowly, never
// one that answers: the outcome does not depend on this machine's load
// unless a loopback handshake took the whole UsableTimeout.
func (r *runner) shakeAside(ctx context.Context, n *node) {
	if n.shaking != nil {
		select {
		case err := <-n.shaking:
			n.shaking = nil
			if err != nil {
				n.unusable = err.Error()
				break
			}
			n.usable, n.unusable = true, ""
			return
		default:
			return // still under way
		}
	}
	if r.shakeCtx == nil {
		r.shakeCtx, r.shakeStop = context.WithCancel(ctx)
	}
	done := make(chan error, 1)
	n.shaking = done
	usable, host, port, timeout := r.spec.Checks.Usable, n.sshHost, n.sshPort, r.usableTimeout()
	r.shakes.Add(1)
	go func() {
		defer r.shakes.Done()
		sctx, cancel := context.WithTimeout(r.shakeCtx, timeout)
		defer cancel()
		done <- usable(sctx, host, port)
	}()
}

// endShakes stops the background handshakes and waits for them.
func (r *runner) endShakes() {
	if r.shakeStop != nil {
		r.shakeStop()
	}
	r.shakes.Wait()
}

// readProbes takes the coordinator's probes into the nodes at the gates.
// On a simulator the agents are real processes: a tick waits for each,
// up to AgentWait of wall time from when it first became due, and a
// virtual market does not move meanwhile, since the launch is busy. A
// dark node holds the market once, for AgentWait at most. The wait holds
// the clock as a request in flight does: the clock's other sleepers (the
// market's own) must not read it as quiet.
func (r *runner) readProbes(ctx context.Context) {
	r.hold(1)
	defer r.hold(-1)
	for {
		waiting, until, ok := r.probesOnce(ctx)
		if !ok || waiting == 0 || !time.Now().Before(until) {
			return
		}
		t := time.NewTimer(min(agentPoll, time.Until(until)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		// Still at work: a virtual clock moves anyway after a long
		// silence (its guard against a miscounted goroutine).
		r.hold(0)
	}
}

// probesOnce reads the coordinator's agents once: how many nodes still
// wait for a probe, and until when (wall time) they may hold the tick;
// ok is false when the read failed.
func (r *runner) probesOnce(ctx context.Context) (waiting int, until time.Time, ok bool) {
	ck := r.spec.Checks
	ns, err := ck.Agents(ctx, r.spec.Fleet)
	if err != nil {
		if ctx.Err() == nil {
			r.emit(Event{Event: EvWarn, At: r.now(), Msg: "reading boot probes from the coordinator: " + err.Error()})
		}
		return 0, time.Time{}, false
	}
	for _, n := range r.nodes {
		if !n.atGate() || !r.awaitsAgent(n) {
			continue
		}
		if a, ok := ns[n.id]; ok {
			n.agentSeen = true
			n.probe = a.Probe
		}
		if r.awaitsAgent(n) && (ck.Usable == nil || n.usable) {
			waiting++
			if u := n.probeDue(ck.AgentWait); u.After(until) {
				until = u
			}
		}
	}
	return waiting, until, true
}

// probeDue is until when (wall time) the node may hold the ticks for its
// probe: wait from when it first became due; an agent not heard from at
// all (an onstart that failed) holds the market a third as long as one
// that probes.
func (n *node) probeDue(wait time.Duration) time.Time {
	if n.dueAt.IsZero() {
		n.dueAt = time.Now()
	}
	if !n.agentSeen {
		wait /= 3
	}
	return n.dueAt.Add(wait)
}

// agentPoll spaces the coordinator reads within one AgentWait.
const agentPoll = 100 * time.Millisecond

// Boot stages of a node not yet ready (Progress.Stages): the image
// pulling or extracting (from the marketplace's status), loading (the
// marketplace says no more), ssh (the container runs, its SSH handshake
// does not complete yet), agent (the onstart installs and starts the
// agent, not heard from yet) and probe (the agent measures its machine).
const (
	StagePulling    = "pulling"
	StageExtracting = "extracting"
	StageLoading    = "loading"
	StageSSH        = "ssh"
	StageAgent      = "agent"
	StageProbe      = "probe"
)

// stage is where a booting node is.
func (m *model) stage(n *node) string {
	if n.state != provider.StateRunning {
		msg := strings.ToLower(n.statusMsg)
		switch {
		case strings.Contains(msg, "extract"):
			return StageExtracting
		case strings.Contains(msg, "pull"):
			return StagePulling
		}
		return StageLoading
	}
	ck := m.spec.Checks
	switch {
	case ck.Usable != nil && !n.usable:
		return StageSSH
	case !n.agentSeen:
		return StageAgent
	}
	return StageProbe
}

// SimulatedChecks are the gates' waits on a simulated market whose clock
// runs scale market seconds a wall second (virtual: it moves only while
// vastfleet waits). The gates wait in market time, but a handshake, an
// agent's download and its probe take wall time: on a fast simulated
// clock they get at least a wall minute and three. The simulated
// machines' agents run in wall time: a virtual market would otherwise
// pass its deadline while they boot. Half a minute of wall time is what
// ten agents on two busy cores took to download, probe and report, with
// room to spare. A market on a scaled wall clock (`sim serve`, another
// process's) moves anyway: waiting there only blinds the launch, so it
// looks once a tick.
func SimulatedChecks(scale float64, virtual bool) Checks {
	c := Checks{
		UsableFor: max(DefaultUsableFor, time.Duration(scale*float64(time.Minute))),
		ProbeWait: max(DefaultProbeWait, time.Duration(scale*float64(3*time.Minute))),
	}
	if virtual {
		c.AgentWait = 30 * time.Second
	}
	return c
}
