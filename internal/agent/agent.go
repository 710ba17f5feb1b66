package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/filelock"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// ErrOrphaned is what Run returns after the dead-man switch has stopped
// or destroyed the instance.
var ErrOrphaned = errors.New("the coordinator was silent too long: this instance stopped or destroyed itself")

// StoppedItself reports whether err is Run's account of the agent
// stopping or destroying its own instance (dead-man switch, lifetime,
// idle): the agent's exit status 3.
func StoppedItself(err error) bool {
	return errors.Is(err, ErrOrphaned) || errors.Is(err, ErrLifetime) || errors.Is(err, ErrIdle)
}

// ErrLifetime is what Run returns after the agent stopped its instance at
// its maximum lifetime (the teardown ladder's first rung).
var ErrLifetime = errors.New("this instance reached its maximum lifetime and stopped itself")

// Finding batches: at most this many, and about this much JSON, a request,
// well inside wire.MaxBody.
const (
	findingsPerBatch  = 500
	findingsBatchSize = 512 << 10
	maxSendBackoff    = 30 * time.Second
)

type agent struct {
	cfg    Config
	log    *slog.Logger
	client *coordClient
	spool  *spool[wire.Finding]
	// findingsMu lets one sender at a time drain spool.
	findingsMu sync.Mutex
	// results holds item results until the coordinator acknowledges
	// them; resultsMu lets one sender at a time drain it.
	results     *spool[wire.ItemResult]
	resultsMu   sync.Mutex
	wakeResults chan struct{}
	stats       *sampler
	probe       atomic.Pointer[wire.Probe] // the boot probe's result, nil until it is done (or when off)
	boot        string                     // this run's random id: part of every finding key
	seq         atomic.Int64

	sessions []*session

	mu      sync.Mutex
	metrics map[string]float64

	wakeSender chan struct{} // a finding is waiting
	acked      chan struct{} // a heartbeat was acknowledged

	// What the coordinator last said (or the config): read by the
	// heartbeat and dead-man loops.
	interval     atomic.Int64 // wall ns
	orphanAfter  atomic.Int64 // wall ns; 0: disarmed
	orphanPolicy atomic.Value // string
}

// Run runs the agent until ctx ends or the dead-man switch has acted
// (then it returns ErrOrphaned). On return every session has been
// stopped: SIGINT to its process group, SIGKILL after cfg.StopGrace.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	cfg, err := cfg.check()
	if err != nil {
		return err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "logs"), 0o700); err != nil {
		return fmt.Errorf("agent state directory: %w", err)
	}
	unlock, err := lockDir(cfg.StateDir)
	if err != nil {
		return err
	}
	defer unlock()
	agentLog, err := openLog(filepath.Join(cfg.StateDir, "agent.log"), maxLogBytes)
	if err != nil {
		return fmt.Errorf("agent log: %w", err)
	}
	defer agentLog.Close()
	// Everything the agent says goes to agent.log too: after a dead-man
	// stop, that file is where the reason survives.
	log = slog.New(slog.NewMultiHandler(log.Handler(), slog.NewTextHandler(agentLog, nil))).
		With("fleet", cfg.Fleet, "node", cfg.Node)

	sp, err := openSpool(filepath.Join(cfg.StateDir, "spool.jsonl"))
	if err != nil {
		return err
	}
	defer sp.close()
	rs, err := openSpoolOf(filepath.Join(cfg.StateDir, "results.jsonl"), resultKey,
		func(r wire.ItemResult) int { return len(r.StdoutTail) + 256 })
	if err != nil {
		return err
	}
	defer rs.close()

	a := &agent{
		cfg:         cfg,
		log:         log,
		client:      newCoordClient(cfg),
		spool:       sp,
		results:     rs,
		wakeResults: make(chan struct{}, 1),
		stats:       newSampler(cfg.Cgroup, "/proc", cfg.StateDir),
		boot:        randomID(),
		metrics:     map[string]float64{},
		wakeSender:  make(chan struct{}, 1),
		acked:       make(chan struct{}, 1),
	}
	defer a.client.close()
	if a.client.enroll != nil {
		a.client.enroll.log = log
	}
	a.interval.Store(int64(a.scaledInterval(cfg.FirstInterval)))
	a.orphanAfter.Store(int64(cfg.wall(cfg.OrphanAfter)))
	a.orphanPolicy.Store(cfg.OrphanPolicy)
	log.Info("agent starting", "coordinator", cfg.CoordURL, "sessions", len(cfg.Sessions),
		"unsent_findings", sp.len(), "orphan_after", cfg.OrphanAfter, "orphan_policy", cfg.OrphanPolicy, "time_scale", cfg.TimeScale)

	// The sessions are set up now and started after the probe; the
	// heartbeats go out meanwhile, saying the agent is probing.
	sessCtx, stopSessions := context.WithCancel(context.WithoutCancel(ctx))
	var sessWG sync.WaitGroup
	env := sessionEnv(os.Environ())
	var outs []*logFile
	for _, spec := range cfg.Sessions {
		out, err := openLog(filepath.Join(cfg.StateDir, "logs", spec.Name+".log"), maxLogBytes)
		if err != nil {
			for _, o := range outs {
				o.Close()
			}
			stopSessions()
			return fmt.Errorf("session %s log: %w", spec.Name, err)
		}
		outs = append(outs, out)
		s := &session{spec: spec, out: out, onLine: a.onLine, items: a, env: env,
			grace: cfg.StopGrace, base: cfg.restartBase, log: log}
		s.state = wire.SessionState{Name: spec.Name, State: stateStarting}
		a.sessions = append(a.sessions, s)
	}
	defer func() {
		stopSessions()
		sessWG.Wait()
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); a.heartbeats(ctx) }()
	go func() { defer wg.Done(); a.sendFindings(ctx) }()
	go func() { defer wg.Done(); a.sendResults(ctx) }()

	if cfg.Probe != nil {
		pc := *cfg.Probe
		if pc.Advertised == (wire.Capacity{}) && a.client.enrolling() {
			// Not in the environment (a bulk create gives every offer one
			// body): ask the coordinator. The probe is reported through it
			// and a node is ready only once it has, so waiting costs
			// nothing; a probe sized without the offer's figures measures
			// this computer's CPUs instead and is judged short (13 of 187
			// at 1,000 nodes, when enrollment took over the probe's own
			// 60 s bound). The wait is bounded all the same.
			ectx, cancel := context.WithTimeout(ctx, enrollWaitForProbe*pc.withDefaults().Timeout)
			if listed := a.client.listedCapacity(ectx); listed != nil {
				pc.Advertised = *listed
			}
			cancel()
		}
		if pc.Download == nil && a.cfg.CoordURL != "" {
			pc.Download = a.client.download
		}
		a.probe.Store(a.runProbe(ctx, pc))
	}
	for i, s := range a.sessions {
		if ctx.Err() != nil { // stopped during the probe: never started
			outs[i].Close()
			continue
		}
		sessWG.Add(1)
		go func() {
			defer sessWG.Done()
			defer outs[i].Close()
			s.run(sessCtx)
		}()
	}
	ended := a.deadman(ctx, a.lifetimeEnd(), a.watchIdle(ctx))
	cancel()
	wg.Wait()
	if ended != nil {
		return ended
	}
	log.Info("agent stopping", "unsent_findings", sp.len(), "unsent_results", rs.len())
	return nil
}

// lockDir keeps a second agent off the same state directory: two would
// run every session twice.
func lockDir(dir string) (func(), error) {
	f, err := filelock.Acquire(filepath.Join(dir, "agent.lock"))
	if errors.Is(err, filelock.ErrBusy) {
		return nil, fmt.Errorf("another agent runs with state directory %s", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("agent lock: %w", err)
	}
	return func() { filelock.Release(f) }, nil
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// enrollWaitForProbe is how many probe bounds the probe waits for the
// enrollment that tells it the offer's figures.
const enrollWaitForProbe = 10

// scaledInterval is a heartbeat interval in market time as wall time,
// floored so that a fast simulator cannot spin the agent.
func (a *agent) scaledInterval(d time.Duration) time.Duration {
	return max(a.cfg.wall(d), minHeartbeatInterval)
}

// onLine takes a structured line from a session's stdout.
func (a *agent) onLine(sess string, l wire.Line) {
	if l.Metric != "" {
		a.mu.Lock()
		a.metrics[l.Metric] = *l.Value
		a.mu.Unlock()
		return
	}
	a.addFinding(wire.Finding{
		Key:     fmt.Sprintf("%s/%s/%s-%d", a.cfg.Node, sess, a.boot, a.seq.Add(1)),
		Session: sess,
		At:      time.Now().UTC(),
		Data:    append([]byte(nil), l.Found...),
	})
}

// addFinding spools a finding and wakes the sender.
func (a *agent) addFinding(f wire.Finding) {
	// On disk before anything else: from here on it survives a crash.
	if err := a.spool.add(f); err != nil {
		a.log.Error("finding kept in memory only", "key", f.Key, "err", err)
	}
	select {
	case a.wakeSender <- struct{}{}:
	default:
	}
}

func (a *agent) heartbeat(now time.Time) wire.Heartbeat {
	hb := wire.Heartbeat{
		Fleet:      a.cfg.Fleet,
		Node:       a.cfg.Node,
		InstanceID: a.cfg.InstanceID,
		SentAt:     now.UTC(),
	}
	a.mu.Lock()
	if len(a.metrics) > 0 {
		hb.Metrics = make(map[string]float64, len(a.metrics))
		for k, v := range a.metrics {
			hb.Metrics[k] = v
		}
	}
	a.mu.Unlock()
	for _, s := range a.sessions {
		hb.Sessions = append(hb.Sessions, s.snapshot())
	}
	return hb
}

// heartbeats reports at the interval the coordinator asks for; the first
// one is jittered so that a fleet that boots together spreads out.
func (a *agent) heartbeats(ctx context.Context) {
	wait := time.Duration(0)
	if a.cfg.FirstJitter > 0 {
		wait = time.Duration(mrand.Int64N(int64(a.cfg.FirstJitter) + 1))
	}
	var seq int64
	failures := 0
	probeAcked := false
	for {
		if !sleep(ctx, wait) {
			return
		}
		seq++
		now := time.Now()
		hb := a.heartbeat(now)
		hb.Seq = seq
		a.stats.fill(ctx, &hb, now)
		sentProbe := a.probe.Load()
		if sentProbe == nil && a.cfg.Probe != nil {
			hb.Stage = wire.StageProbe
		}
		if !probeAcked {
			hb.Probe = sentProbe
		}
		var reply wire.HeartbeatReply
		err := a.client.post(ctx, wire.PathHeartbeat, hb, &reply)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			// The first failure and then every tenth: a long outage should
			// not fill the log.
			if failures == 1 || failures%10 == 0 {
				a.log.Warn("heartbeat not acknowledged", "failures", failures, "err", err)
			}
		} else {
			if failures > 0 {
				a.log.Info("coordinator reachable again", "after_failures", failures)
			}
			failures = 0
			probeAcked = probeAcked || sentProbe != nil
			a.apply(reply)
			select {
			case a.acked <- struct{}{}:
			default:
			}
		}
		wait = time.Duration(a.interval.Load())
		// However slow a cadence the coordinator asks for, an armed switch
		// hears from it several times before it would act.
		if orphan := time.Duration(a.orphanAfter.Load()); orphan > 0 {
			wait = min(wait, orphan/4)
		}
	}
}

// apply takes what the coordinator said about cadence and the switch.
func (a *agent) apply(r wire.HeartbeatReply) {
	if r.IntervalS > 0 {
		a.interval.Store(int64(a.scaledInterval(time.Duration(r.IntervalS * float64(time.Second)))))
	}
	if r.OrphanAfterS > 0 && a.cfg.InstanceID != 0 && a.cfg.ContainerKey != "" {
		a.orphanAfter.Store(int64(a.cfg.wall(time.Duration(r.OrphanAfterS * float64(time.Second)))))
	}
	if r.OrphanPolicy == wire.PolicyStop || r.OrphanPolicy == wire.PolicyDestroy {
		a.orphanPolicy.Store(r.OrphanPolicy)
	}
}

// sendFindings drains the spool to the coordinator whenever a finding
// waits, retrying with capped backoff.
func (a *agent) sendFindings(ctx context.Context) {
	a.send(ctx, "findings", a.spool.len, a.wakeSender, a.flushFindings)
}

// send flushes to the coordinator whenever something is pending (wake
// says so), until ctx ends, retrying a failed flush with capped backoff;
// what names it in the log.
func (a *agent) send(ctx context.Context, what string, pending func() int, wake <-chan struct{}, flush func(context.Context) error) {
	backoff := time.Duration(0)
	for {
		if backoff == 0 && pending() == 0 {
			select {
			case <-ctx.Done():
				return
			case <-wake:
			}
		} else if !sleep(ctx, jitter(backoff)) {
			return
		}
		err := flush(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			backoff = min(max(2*backoff, a.cfg.retryBase), maxSendBackoff)
			a.log.Warn(what+" not acknowledged", "pending", pending(), "retry_in", backoff, "err", err)
			continue
		}
		backoff = 0
	}
}

// flushFindings sends the spooled findings in batches until none is left
// or a batch fails; each acknowledged key is dropped from the spool.
func (a *agent) flushFindings(ctx context.Context) error {
	a.findingsMu.Lock()
	defer a.findingsMu.Unlock()
	for {
		batch := a.spool.batch(findingsPerBatch, findingsBatchSize)
		if len(batch) == 0 {
			return nil
		}
		var ack wire.FindingsAck
		err := a.client.post(ctx, wire.PathFindings, wire.Findings{
			Fleet: a.cfg.Fleet, Node: a.cfg.Node, InstanceID: a.cfg.InstanceID, Items: batch,
		}, &ack)
		if err != nil {
			return err
		}
		dropped, err := a.spool.ack(ack.Acked)
		if err != nil {
			return err
		}
		if dropped == 0 {
			return errors.New("coordinator acknowledged none of the batch")
		}
	}
}

// firstRunFile keeps, in the state directory, when the instance first
// ran: an agent started again (a restart, a stop and start) counts the
// lifetime from there.
const firstRunFile = "first-run"

// lifetimeEnd is the wall time the instance's maximum lifetime ends, zero
// for none.
func (a *agent) lifetimeEnd() time.Time {
	if a.cfg.MaxLifetime <= 0 {
		return time.Time{}
	}
	p := filepath.Join(a.cfg.StateDir, firstRunFile)
	first := time.Now()
	if b, err := os.ReadFile(p); err == nil {
		if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b))); err == nil && t.Before(first) {
			first = t
		}
	} else if err := atomicfile.WriteFile(p, []byte(first.UTC().Format(time.RFC3339Nano)+"\n"), 0o600); err != nil {
		a.log.Warn("max lifetime: cannot keep the first run's time; counting from this start", "err", err)
	}
	end := first.Add(a.cfg.wall(a.cfg.MaxLifetime))
	a.log.Info("max lifetime armed", "max_lifetime", a.cfg.MaxLifetime, "first_run", first.UTC(), "stops_in_wall", time.Until(end).Round(time.Second))
	return end
}

// deadman waits for heartbeats to be acknowledged; when none has been for
// the orphan-after time, it stops or destroys this instance and returns
// ErrOrphaned. At lifeEnd (zero: never) it stops the instance whatever the
// coordinator says, and returns ErrLifetime; when idle closes, likewise,
// and returns ErrIdle. It returns nil when ctx ends first.
func (a *agent) deadman(ctx context.Context, lifeEnd time.Time, idle <-chan struct{}) error {
	var lifeC <-chan time.Time
	if !lifeEnd.IsZero() {
		lt := time.NewTimer(time.Until(lifeEnd))
		defer lt.Stop()
		lifeC = lt.C
	}
	armed := time.Now()
	lastAck := armed
	for {
		after := time.Duration(a.orphanAfter.Load())
		var fire <-chan time.Time
		var t *time.Timer
		if after > 0 {
			t = time.NewTimer(time.Until(lastAck.Add(after)))
			fire = t.C
		}
		fired := false
		var rung error // a teardown-ladder rung that fell due: stop, whatever the coordinator says
		select {
		case <-ctx.Done():
		case <-a.acked:
			lastAck = time.Now()
		case <-fire:
			fired = true
		case <-lifeC:
			a.log.Error("max lifetime reached: stopping this instance, as the teardown ladder says",
				"max_lifetime", a.cfg.MaxLifetime, "instance", a.cfg.InstanceID)
			rung = ErrLifetime
		case <-idle:
			a.log.Error("idle: stopping this instance, as the teardown ladder says",
				"idle_after", a.cfg.IdleAfter, "idle_below_percent", a.cfg.IdleBelow, "instance", a.cfg.InstanceID)
			rung = ErrIdle
		}
		if t != nil {
			t.Stop()
		}
		if rung != nil {
			if err := selfAct(ctx, a.cfg, wire.PolicyStop, a.log); err != nil {
				return nil // ctx ended while retrying
			}
			return rung
		}
		if ctx.Err() != nil {
			return nil
		}
		if !fired {
			continue
		}
		// A reply may have changed the setting while the timer ran.
		if after2 := time.Duration(a.orphanAfter.Load()); after2 != after {
			continue
		}
		policy := a.orphanPolicy.Load().(string)
		silent := time.Since(lastAck).Round(time.Millisecond)
		a.log.Error("dead-man switch: the coordinator has acknowledged no heartbeat for longer than the orphan-after time; "+
			"acting so that this instance stops billing",
			"silent_for", silent, "orphan_after_wall", after,
			"silent_for_market", time.Duration(float64(silent)*a.cfg.TimeScale).Round(time.Second), "time_scale", a.cfg.TimeScale,
			"policy", policy, "instance", a.cfg.InstanceID, "never_acknowledged", lastAck.Equal(armed))
		if err := selfAct(ctx, a.cfg, policy, a.log); err != nil {
			return nil // ctx ended while retrying
		}
		return ErrOrphaned
	}
}

// sleep waits d or until ctx ends, and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// jitter spreads d by ±20% so that a fleet retrying together spreads out.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d + time.Duration((mrand.Float64()-0.5)*0.4*float64(d))
}
