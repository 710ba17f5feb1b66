// Package agent is the small program that runs on every instance of a
// fleet: it supervises the node's named sessions, turns their structured
// output into metrics and findings, reports to the coordinator, keeps every
// finding in a spool on disk until the coordinator acknowledges it, and
// stops or destroys its own instance when the coordinator has been silent
// for too long (the dead-man switch).
//
// It links the standard library and internal/wire only, so that the binary
// stays small and never carries the store, SQLite or the marketplace client.
//
// Measuring the idle footprint of the built binary (one `sleep` session):
//
//	go test -run '^$' -bench BenchmarkAgentIdle -benchtime 1x ./internal/agent
//
// reports rss_MB, cpu_%_core and binary_MB for a binary built with
// -ldflags='-s -w'.
package agent

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/certpin"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// Config is everything the agent is told. FromEnv fills it from the
// environment the onstart sets; tests build it directly.
type Config struct {
	CoordURL string // http(s)://host:port, without a trailing slash
	Fleet    string
	Node     string
	Token    string // the fleet's agent token
	// Fingerprint, when set, is the lowercase hex sha256 of the DER of the
	// coordinator's TLS certificate: the only certificate accepted.
	Fingerprint string
	Sessions    []wire.Session

	// OrphanAfter is how long the coordinator may stay silent before the
	// dead-man switch acts, in market time (divided by TimeScale for the
	// agent's own clock); 0 disarms it. OrphanPolicy is wire.PolicyStop or
	// wire.PolicyDestroy. The coordinator's replies may change both.
	OrphanAfter  time.Duration
	OrphanPolicy string
	// MaxLifetime, market time, has the agent stop its own instance this
	// long after the instance first ran (the teardown ladder's first
	// rung, held even when no coordinator or reap is left); 0: none.
	MaxLifetime time.Duration
	// IdleAfter, market time, has the agent stop its own instance once its
	// CPU and GPU use, averaged over that long, stayed below IdleBelow
	// percent (the ladder's idle rung; only the instance sees its use);
	// 0: none.
	IdleAfter time.Duration
	IdleBelow float64
	// Cgroup is the cgroup v2 directory the agent reads the container's
	// CPU use and quota from; /proc is read where it holds no cpu.stat.
	Cgroup string
	// TimeScale is market seconds per wall second (simulator only); 0 or 1
	// on a real market. Every duration the agent is told (orphan-after, the
	// heartbeat interval) is divided by it.
	TimeScale float64

	StateDir     string // spool, logs, agent.log
	InstanceID   int64  // CONTAINER_ID
	ContainerKey string // CONTAINER_API_KEY: this instance's own key
	VastURL      string // the marketplace API

	// Probe, when set, runs the boot probe (probe.go) before the sessions
	// start and reports it with the first heartbeat. FromEnv sets it
	// unless VASTFLEET_PROBE=off.
	Probe *ProbeConfig

	// StopGrace is how long a session has between SIGINT and SIGKILL;
	// 0 means 10 s (dstack's runner uses the same).
	StopGrace time.Duration
	// FirstInterval is the heartbeat interval before the coordinator has
	// said one, in market time like IntervalS; 0 means 10 s.
	FirstInterval time.Duration
	// FirstJitter bounds the random delay of the first heartbeat, so that a
	// fleet booting together does not report in one burst; 0 means 1 s,
	// negative means none.
	FirstJitter time.Duration

	// restartBase is the first restart backoff of a session and retryBase
	// the first retry backoff of a send (tests shorten them); 0 means 1 s
	// and 500 ms.
	restartBase time.Duration
	retryBase   time.Duration
}

// Defaults for the knobs above.
const (
	DefaultStopGrace     = 10 * time.Second
	DefaultInterval      = 10 * time.Second
	DefaultFirstJitter   = time.Second
	defaultRestartBase   = time.Second
	defaultRetryBase     = 500 * time.Millisecond
	maxRestartBackoff    = time.Minute
	minHeartbeatInterval = 10 * time.Millisecond // floor once scaled, so a fast simulator cannot spin the agent
)

// FromEnv reads the agent's configuration from the environment the onstart
// exports (the wire.Env* variables). Each error names the variable at fault.
func FromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{
		CoordURL:     strings.TrimRight(strings.TrimSpace(getenv(wire.EnvCoordURL)), "/"),
		Fleet:        strings.TrimSpace(getenv(wire.EnvFleet)),
		Node:         strings.TrimSpace(getenv(wire.EnvNode)),
		Token:        strings.TrimSpace(getenv(wire.EnvToken)),
		OrphanAfter:  wire.DefaultOrphanAft,
		OrphanPolicy: wire.PolicyStop,
		TimeScale:    1,
		StateDir:     getenv(wire.EnvStateDir),
		ContainerKey: strings.TrimSpace(getenv(wire.EnvContainerKey)),
		VastURL:      strings.TrimRight(strings.TrimSpace(getenv(wire.EnvVastURL)), "/"),
		Cgroup:       cmp.Or(strings.TrimSpace(getenv(wire.EnvCgroup)), "/sys/fs/cgroup"),
	}
	if err := checkCoordURL(cfg.CoordURL); err != nil {
		return Config{}, err
	}
	if cfg.Fleet == "" {
		return Config{}, fmt.Errorf("%s is not set: the fleet this node belongs to", wire.EnvFleet)
	}
	if cfg.Token == "" {
		return Config{}, fmt.Errorf("%s is not set: the fleet's agent token", wire.EnvToken)
	}
	if fp := getenv(wire.EnvFingerprint); fp != "" {
		norm, err := certpin.Parse(fp)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %v", wire.EnvFingerprint, err)
		}
		cfg.Fingerprint = norm
	}
	if s := strings.TrimSpace(getenv(wire.EnvSessions)); s != "" {
		if err := json.Unmarshal([]byte(s), &cfg.Sessions); err != nil {
			return Config{}, fmt.Errorf("%s: want a JSON array of {\"name\",\"command\",\"restart\"}: %v", wire.EnvSessions, err)
		}
		if err := checkSessions(cfg.Sessions); err != nil {
			return Config{}, fmt.Errorf("%s: %v", wire.EnvSessions, err)
		}
	}
	if s := strings.TrimSpace(getenv(wire.EnvOrphanAfter)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return Config{}, fmt.Errorf("%s=%q: want a Go duration such as 30m (0 disarms the dead-man switch)", wire.EnvOrphanAfter, s)
		}
		cfg.OrphanAfter = d
	}
	if s := strings.TrimSpace(getenv(wire.EnvOrphanPolicy)); s != "" {
		if s != wire.PolicyStop && s != wire.PolicyDestroy {
			return Config{}, fmt.Errorf("%s=%q: want %q or %q", wire.EnvOrphanPolicy, s, wire.PolicyStop, wire.PolicyDestroy)
		}
		cfg.OrphanPolicy = s
	}
	if s := strings.TrimSpace(getenv(wire.EnvMaxLifetime)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return Config{}, fmt.Errorf("%s=%q: want a Go duration such as 12h (0: no lifetime)", wire.EnvMaxLifetime, s)
		}
		cfg.MaxLifetime = d
	}
	if s := strings.TrimSpace(getenv(wire.EnvIdleAfter)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return Config{}, fmt.Errorf("%s=%q: want a Go duration such as 30m (0: never stop for idleness)", wire.EnvIdleAfter, s)
		}
		cfg.IdleAfter = d
	}
	if s := strings.TrimSpace(getenv(wire.EnvIdleBelow)); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(f > 0 && f <= 100) {
			return Config{}, fmt.Errorf("%s=%q: want a percentage of CPU and GPU between 0 and 100", wire.EnvIdleBelow, s)
		}
		cfg.IdleBelow = f
	}
	if (cfg.IdleAfter > 0) != (cfg.IdleBelow > 0) {
		return Config{}, fmt.Errorf("%s and %s go together: the idle rung needs both a duration and a percentage", wire.EnvIdleAfter, wire.EnvIdleBelow)
	}
	if s := strings.TrimSpace(getenv(wire.EnvTimeScale)); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(f > 0) || f > 1e9 {
			return Config{}, fmt.Errorf("%s=%q: want a positive number (market seconds per wall second)", wire.EnvTimeScale, s)
		}
		cfg.TimeScale = f
	}
	if s := strings.TrimSpace(getenv(wire.EnvContainerID)); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return Config{}, fmt.Errorf("%s=%q: want the instance's numeric id", wire.EnvContainerID, s)
		}
		cfg.InstanceID = id
	}
	if cfg.Node == "" {
		if cfg.InstanceID == 0 {
			return Config{}, fmt.Errorf("%s is not set and neither is %s to name the node after", wire.EnvNode, wire.EnvContainerID)
		}
		cfg.Node = "C." + strconv.FormatInt(cfg.InstanceID, 10)
	}
	if cfg.OrphanAfter > 0 {
		// The switch is armed at boot; without these it could never act,
		// and a silent disarm would leave an orphan billing.
		if cfg.InstanceID == 0 {
			return Config{}, fmt.Errorf("%s is not set: the dead-man switch needs the instance's id (or set %s=0 to disarm it)", wire.EnvContainerID, wire.EnvOrphanAfter)
		}
		if cfg.ContainerKey == "" {
			return Config{}, fmt.Errorf("%s is not set: the dead-man switch needs the instance's own key (or set %s=0 to disarm it)", wire.EnvContainerKey, wire.EnvOrphanAfter)
		}
	}
	if cfg.MaxLifetime > 0 && (cfg.InstanceID == 0 || cfg.ContainerKey == "") {
		return Config{}, fmt.Errorf("%s is set, but the agent cannot stop this instance without %s and %s", wire.EnvMaxLifetime, wire.EnvContainerID, wire.EnvContainerKey)
	}
	if cfg.IdleAfter > 0 && (cfg.InstanceID == 0 || cfg.ContainerKey == "") {
		return Config{}, fmt.Errorf("%s is set, but the agent cannot stop this instance without %s and %s", wire.EnvIdleAfter, wire.EnvContainerID, wire.EnvContainerKey)
	}
	probe, err := ProbeFromEnv(getenv)
	if err != nil {
		return Config{}, err
	}
	cfg.Probe = probe
	if cfg.VastURL == "" {
		cfg.VastURL = wire.DefaultVastURL
	} else if u, err := url.Parse(cfg.VastURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Config{}, fmt.Errorf("%s=%q: want an http(s) URL", wire.EnvVastURL, cfg.VastURL)
	}
	if cfg.StateDir == "" {
		home := getenv("HOME")
		if home == "" {
			home = "/root"
		}
		cfg.StateDir = home + "/.vastfleet"
	}
	return cfg, nil
}

// ProbeFromEnv reads the boot probe's settings: what the offer advertised
// (the launch passes it) and VASTFLEET_PROBE (off, or the time bound).
func ProbeFromEnv(getenv func(string) string) (*ProbeConfig, error) {
	p := &ProbeConfig{Simulated: getenv(simMachineEnv) != ""}
	switch s := strings.TrimSpace(getenv(wire.EnvProbe)); s {
	case "":
	case "off":
		return nil, nil
	default:
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s=%q: want off or a Go duration such as 30s (the probe's bound)", wire.EnvProbe, s)
		}
		p.Timeout = d
	}
	for _, v := range []struct {
		name string
		dst  *float64
	}{{wire.EnvOfferCores, &p.Advertised.Cores}, {wire.EnvOfferRAMMB, &p.Advertised.RAMMB}} {
		if s := strings.TrimSpace(getenv(v.name)); s != "" {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || f < 0 || f > 1e9 {
				return nil, fmt.Errorf("%s=%q: want a non-negative number", v.name, s)
			}
			*v.dst = f
		}
	}
	if s := strings.TrimSpace(getenv(wire.EnvOfferGPUs)); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 1024 {
			return nil, fmt.Errorf("%s=%q: want a GPU count", wire.EnvOfferGPUs, s)
		}
		p.Advertised.GPUs = n
	}
	return p, nil
}

// simMachineEnv is set in every process of a simulated machine
// (sim/host): the probe then counts run-queue waits as the machine's own.
const simMachineEnv = "VASTFLEET_SIM_MACHINE"

func checkCoordURL(s string) error {
	if s == "" {
		return fmt.Errorf("%s is not set: the coordinator's URL as this instance reaches it", wire.EnvCoordURL)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s=%q: want http://host:port or https://host:port", wire.EnvCoordURL, s)
	}
	return nil
}

func checkSessions(ss []wire.Session) error {
	seen := map[string]bool{}
	for i, s := range ss {
		if !wire.ValidSessionName(s.Name) {
			return fmt.Errorf("session %d: name %q: want %s (it names a tmux session and a log file)", i, s.Name, wire.SessionNameRule)
		}
		if seen[s.Name] {
			return fmt.Errorf("session %q appears twice", s.Name)
		}
		seen[s.Name] = true
		if strings.TrimSpace(s.Command) == "" {
			return fmt.Errorf("session %q has no command", s.Name)
		}
		switch s.Restart {
		case "", restartOnFailure, restartAlways, restartNever:
		default:
			return fmt.Errorf("session %q: restart %q: want on-failure, always or never", s.Name, s.Restart)
		}
	}
	return nil
}

// check validates a Config built by hand and fills its defaults.
func (c Config) check() (Config, error) {
	if err := checkCoordURL(c.CoordURL); err != nil {
		return c, err
	}
	c.CoordURL = strings.TrimRight(c.CoordURL, "/")
	if c.Fleet == "" || c.Node == "" || c.Token == "" {
		return c, fmt.Errorf("agent config: fleet, node and token are required")
	}
	if c.StateDir == "" {
		return c, fmt.Errorf("agent config: no state directory")
	}
	if c.Fingerprint != "" {
		fp, err := certpin.Parse(c.Fingerprint)
		if err != nil {
			return c, fmt.Errorf("agent config: fingerprint: %v", err)
		}
		c.Fingerprint = fp
	}
	if err := checkSessions(c.Sessions); err != nil {
		return c, fmt.Errorf("agent config: %v", err)
	}
	if c.OrphanAfter > 0 && (c.InstanceID == 0 || c.ContainerKey == "") {
		return c, fmt.Errorf("agent config: the dead-man switch needs the instance id and its key")
	}
	if c.OrphanPolicy == "" {
		c.OrphanPolicy = wire.PolicyStop
	}
	if c.OrphanPolicy != wire.PolicyStop && c.OrphanPolicy != wire.PolicyDestroy {
		return c, fmt.Errorf("agent config: orphan policy %q", c.OrphanPolicy)
	}
	if !(c.TimeScale > 0) {
		c.TimeScale = 1
	}
	if c.VastURL == "" {
		c.VastURL = wire.DefaultVastURL
	}
	c.VastURL = strings.TrimRight(c.VastURL, "/")
	if c.StopGrace <= 0 {
		c.StopGrace = DefaultStopGrace
	}
	if c.FirstInterval <= 0 {
		c.FirstInterval = DefaultInterval
	}
	if c.FirstJitter == 0 {
		c.FirstJitter = DefaultFirstJitter
	}
	if c.restartBase <= 0 {
		c.restartBase = defaultRestartBase
	}
	if c.retryBase <= 0 {
		c.retryBase = defaultRetryBase
	}
	return c, nil
}

// wall turns a market duration into the agent's own (wall) time.
func (c Config) wall(d time.Duration) time.Duration {
	if c.TimeScale > 0 && c.TimeScale != 1 {
		return time.Duration(float64(d) / c.TimeScale)
	}
	return d
}
