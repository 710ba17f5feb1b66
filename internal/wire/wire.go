// Package wire is what an agent on an instance and the coordinator say to
// each other over HTTP: the messages, the paths, the session-output line
// format, and the agent's environment. It links the standard library only,
// so that the agent binary stays small.
package wire

import (
	"encoding/json"
	"strings"
	"time"
)

// Paths on the coordinator. An agent enrolls once with its fleet's agent
// token (the bootstrap token, which can do nothing else but fetch the
// agent binary) and then sends everything with the per-instance
// credential it got back; viewers use the viewer token (read-only); all
// as "Authorization: Bearer TOKEN".
const (
	PathEnroll    = "/api/v1/enroll"    // POST EnrollRequest (bootstrap token) → EnrollReply
	PathHeartbeat = "/api/v1/heartbeat" // POST Heartbeat → HeartbeatReply
	PathFindings  = "/api/v1/findings"  // POST Findings → FindingsAck
	PathState     = "/api/v1/state"     // GET (viewer) → Snapshot
	PathEvents    = "/api/v1/events"    // GET (viewer) → text/event-stream of Snapshot
	PathAgentBin  = "/agent/bin"        // GET (agent token) → the agent binary
	PathAgentSum  = "/agent/sha256"     // GET (agent token) → hex sha256 of it
	PathMetrics   = "/metrics"          // GET (viewer) → Prometheus text format
	// PathProbeBlob: GET (agent credential) ?bytes=N → N bytes (at most
	// MaxProbeBlob) that the boot probe times to measure its download.
	PathProbeBlob = "/api/v1/probe/blob"
	// Work items (see ItemLease): an item-worker session leases one item
	// at a time and reports its result.
	PathItemsLease  = "/api/v1/items/lease"  // POST ItemLeaseRequest → 200 ItemLease, or 204 when every item is done
	PathItemsResult = "/api/v1/items/result" // POST ItemResult → ItemResultAck (idempotent)
)

// MaxBody is the largest request body the coordinator reads.
const MaxBody = 1 << 20

// The agent's environment, set by the onstart that installs it.
const (
	EnvCoordURL      = "VASTFLEET_COORD_URL"     // http(s)://host:port, reachable from the instance
	EnvFleet         = "VASTFLEET_FLEET"         // fleet name
	EnvNode          = "VASTFLEET_NODE"          // node name; defaults to C.$CONTAINER_ID
	EnvToken         = "VASTFLEET_AGENT_TOKEN"   // the fleet's agent token
	EnvFingerprint   = "VASTFLEET_COORD_SHA256"  // optional: pinned sha256 of the coordinator's TLS certificate (hex)
	EnvSessions      = "VASTFLEET_SESSIONS"      // JSON array of Session
	EnvOrphanAfter   = "VASTFLEET_ORPHAN_AFTER"  // Go duration: coordinator silence before the dead-man switch acts
	EnvOrphanPolicy  = "VASTFLEET_ORPHAN_POLICY" // "stop" or "destroy"
	EnvMaxLifetime   = "VASTFLEET_MAX_LIFETIME"  // Go duration: the agent stops its instance this long after it first ran
	EnvIdleAfter     = "VASTFLEET_IDLE_AFTER"    // Go duration: the agent stops its instance once its CPU and GPU averaged below EnvIdleBelow this long
	EnvIdleBelow     = "VASTFLEET_IDLE_BELOW"    // percent of the instance's CPU (and GPU) under which it is idle
	EnvCgroup        = "VASTFLEET_CGROUP"        // the cgroup v2 directory the agent reads its use from (default /sys/fs/cgroup)
	EnvTimeScale     = "VASTFLEET_TIME_SCALE"    // simulator only: market seconds per wall second
	EnvStateDir      = "VASTFLEET_AGENT_DIR"     // spool, logs; defaults to $HOME/.vastfleet
	EnvItem          = "VASTFLEET_ITEM"          // set for an item run: the item's value
	EnvItemID        = "VASTFLEET_ITEM_ID"       // set for an item run: the item's id
	EnvOfferCores    = "VASTFLEET_OFFER_CORES"   // advertised effective cores for the boot probe, for an agent run by hand (else the enrollment's)
	EnvOfferRAMMB    = "VASTFLEET_OFFER_RAM_MB"  // advertised RAM, MB (likewise)
	EnvOfferGPUs     = "VASTFLEET_OFFER_GPUS"    // advertised GPU count (likewise)
	EnvProbe         = "VASTFLEET_PROBE"         // "off" skips the boot probe; a Go duration bounds it (default 60s)
	EnvContainerID   = "CONTAINER_ID"            // set by vast
	EnvContainerKey  = "CONTAINER_API_KEY"       // set by vast: this instance's own key
	EnvVastURL       = "VAST_URL"                // marketplace API; https://console.vast.ai when unset
	DefaultVastURL   = "https://console.vast.ai"
	PolicyStop       = "stop"
	PolicyDestroy    = "destroy"
	DefaultOrphanAft = 30 * time.Minute
)

// EnrollRequest trades the fleet's bootstrap token for this instance's
// own credential. An instance enrolls once: the coordinator refuses a
// second enrollment of the same instance id while its credential stands.
type EnrollRequest struct {
	Fleet      string `json:"fleet"`
	InstanceID int64  `json:"instance_id"` // CONTAINER_ID
	Node       string `json:"node"`        // the name to report under
}

// EnrollReply is the instance's credential: every later request names
// this node, whatever its body says.
type EnrollReply struct {
	Token string `json:"token"`
	Node  string `json:"node"`
	// Advertised is what the marketplace lists for the instance's machine,
	// for the boot probe to test (absent: unknown). A launch that rents in
	// bulk creates cannot put each offer's figures in its environment.
	Advertised *Capacity `json:"advertised,omitempty"`
}

// Session is one named, supervised command on a node.
type Session struct {
	Name    string `json:"name"`
	Command string `json:"command"` // run with /bin/sh -c
	// Restart is "on-failure" (default), "always" or "never". An item
	// worker ignores it: it runs until no item is left.
	Restart string `json:"restart,omitempty"`
	// Items makes the session an item worker: it leases the fleet's work
	// items one at a time and runs Command once per item, with {item}
	// replaced by the item's value, shell-quoted. IsItemWorker says
	// whether a session is one.
	Items bool `json:"items,omitempty"`
	// Outputs are files an item run declares (paths relative to the
	// session's directory, {item} substituted); their size and sha256 go
	// into the item's result.
	Outputs []string `json:"outputs,omitempty"`
	// After is a file (relative to $HOME, or absolute) the session waits
	// for before its first run: an item worker leases nothing until its
	// node is set up, so no item sits leased on a node that never starts.
	After string `json:"after,omitempty"`
}

// ItemPlaceholder in a session's command is replaced by the item's value.
const ItemPlaceholder = "{item}"

// IsItemWorker reports whether the session works through the fleet's
// items: it says so, or its command names {item}.
func (s Session) IsItemWorker() bool {
	return s.Items || strings.Contains(s.Command, ItemPlaceholder)
}

// ItemLeaseRequest asks for the next queued item for one session of one
// node. Asking again releases what that session held before: a worker
// runs one item at a time, so an item it still holds was abandoned.
type ItemLeaseRequest struct {
	Fleet   string `json:"fleet"`
	Node    string `json:"node"`
	Session string `json:"session"`
}

// Item is one unit of work: its value is substituted for {item}.
type Item struct {
	ID    int64  `json:"id"`
	Value string `json:"value"`
}

// ItemLease answers a lease request. With Item set, the session holds it
// for LeaseS seconds of market time past the node's latest heartbeat:
// heartbeats renew every lease of their node, so a lease ends when its
// node goes quiet. With Item nil, every remaining item is leased to
// someone else and may come back to the queue: ask again after RetryS.
// (When every item is done the answer is 204 No Content.)
type ItemLease struct {
	Item   *Item   `json:"item,omitempty"`
	Lease  string  `json:"lease,omitempty"` // names this lease in the result
	LeaseS float64 `json:"lease_s,omitempty"`
	RetryS float64 `json:"retry_s,omitempty"`
	Left   int64   `json:"left"` // items not done, this one included
}

// Output is a file an item run declared.
type Output struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256,omitempty"` // empty when the file is missing
}

// ItemResult is what one run of an item produced. The first result the
// coordinator receives for an item is kept; later ones (a replay, or a
// second node that ran the item after its lease expired) are
// acknowledged and ignored.
type ItemResult struct {
	Fleet      string    `json:"fleet"`
	Node       string    `json:"node"`
	Session    string    `json:"session,omitempty"`
	ID         int64     `json:"id"`
	Lease      string    `json:"lease"`
	ExitCode   int       `json:"exit_code"`
	StdoutTail string    `json:"stdout_tail,omitempty"` // at most MaxStdoutTail bytes
	Outputs    []Output  `json:"outputs,omitempty"`
	At         time.Time `json:"at"`
}

// MaxStdoutTail is how much of an item run's stdout its result keeps.
const MaxStdoutTail = 4 << 10

// ItemResultAck acknowledges a result: Stored says whether this one was
// the first (and is the one kept).
type ItemResultAck struct {
	ID     int64 `json:"id"`
	Stored bool  `json:"stored"`
}

// SessionState is a session as the agent sees it.
type SessionState struct {
	Name     string `json:"name"`
	State    string `json:"state"` // starting, running, exited, failed, backoff
	PID      int    `json:"pid,omitempty"`
	Restarts int    `json:"restarts"`
	ExitCode *int   `json:"exit_code,omitempty"`
	// An item worker's progress: the item it runs now (0: none) and how
	// many it has finished.
	Item      int64 `json:"item,omitempty"`
	ItemsDone int64 `json:"items_done,omitempty"`
}

// GPU is one device's use, from nvidia-smi.
type GPU struct {
	Index       int     `json:"index"`
	UtilPercent float64 `json:"util_percent"`
	MemUsedMB   float64 `json:"mem_used_mb"`
	MemTotalMB  float64 `json:"mem_total_mb"`
}

// Heartbeat is a node's periodic report. CPUPercent is summed over cores:
// a 128-core node at full load reports 12,800.
type Heartbeat struct {
	Fleet          string             `json:"fleet"`
	Node           string             `json:"node"`
	InstanceID     int64              `json:"instance_id,omitempty"`
	Seq            int64              `json:"seq"`
	SentAt         time.Time          `json:"sent_at"`
	CPUPercent     float64            `json:"cpu_percent"`
	CPUCores       float64            `json:"cpu_cores"`
	RAMUsedBytes   int64              `json:"ram_used_bytes"`
	RAMTotalBytes  int64              `json:"ram_total_bytes"`
	DiskUsedBytes  int64              `json:"disk_used_bytes"`
	DiskTotalBytes int64              `json:"disk_total_bytes"`
	UptimeS        float64            `json:"uptime_s"`
	GPUs           []GPU              `json:"gpus,omitempty"`
	Sessions       []SessionState     `json:"sessions,omitempty"`
	Metrics        map[string]float64 `json:"metrics,omitempty"` // latest value of each custom metric
	// Probe is the boot probe's result: sent with every heartbeat until
	// one is acknowledged (an older coordinator ignores it).
	Probe *Probe `json:"probe,omitempty"`
	// Stage is where the agent's boot is: StageProbe while the probe
	// runs (the sessions wait for it), empty once the sessions started.
	Stage string `json:"stage,omitempty"`
}

// StageProbe: the agent is probing its machine.
const StageProbe = "probe"

// Probe statuses.
const (
	ProbeOK     = "ok"
	ProbeFailed = "failed" // an error or the time bound: never a pass
)

// What demanding the GPUs showed (Probe.GPUAlloc).
const (
	GPUAllocOK          = "ok"
	GPUAllocShort       = "short"
	GPUAllocNotMeasured = "not measured"
)

// Probe is what the agent's boot probe measured of its machine, before
// any session started: what the machine delivers, not what it lists.
type Probe struct {
	Status    string  `json:"status"` // ProbeOK or ProbeFailed
	Error     string  `json:"error,omitempty"`
	DurationS float64 `json:"duration_s"`
	// Cores is the usable cores measured by a parallel spin of Workers
	// threads; CoresMethod says how (cpu-time: CPU seconds obtained per
	// second; availability: on a simulated machine, the share of time
	// the threads may run, times the advertised cores).
	Cores       float64 `json:"cores"`
	CoresMethod string  `json:"cores_method,omitempty"`
	Workers     int     `json:"workers,omitempty"`
	// RAMBytes were allocated and touched, of RAMTargetBytes tried (the
	// advertised RAM, bounded).
	RAMBytes       int64 `json:"ram_bytes"`
	RAMTargetBytes int64 `json:"ram_target_bytes"`
	// GPUs nvidia-smi lists (0 without it), with their names and memory.
	GPUs     int      `json:"gpus"`
	GPUNames []string `json:"gpu_names,omitempty"`
	GPUMemMB float64  `json:"gpu_mem_mb,omitempty"` // per GPU, the first one's
	GPUError string   `json:"gpu_error,omitempty"`
	// GPUAlloc is what demanding the GPUs showed, where nvidia-smi lists
	// any: "ok" (GPUAllocGPUs of them each gave GPUAllocMB and ran a
	// fill), "short" (fewer did than nvidia-smi lists), or "not measured"
	// with GPUAllocError saying why (no CUDA runtime to allocate with).
	GPUAlloc      string  `json:"gpu_alloc,omitempty"`
	GPUAllocGPUs  int     `json:"gpu_alloc_gpus,omitempty"`
	GPUAllocMB    float64 `json:"gpu_alloc_mb,omitempty"`
	GPUAllocError string  `json:"gpu_alloc_error,omitempty"`
	DiskMBps      float64 `json:"disk_write_mbps"`
	// DownloadMBps is a download from the coordinator (MB/s, 1e6 bytes)
	// of DownloadBytes, read within a bounded window; DownloadError says
	// why it was not measured or was cut short. The coordinator's own
	// link bounds it too, so it is reported against the offer's inet_down,
	// never judged.
	DownloadMBps  float64  `json:"download_mbps"`
	DownloadBytes int64    `json:"download_bytes,omitempty"`
	DownloadError string   `json:"download_error,omitempty"`
	Advertised    Capacity `json:"advertised"` // what the probe was sized from
}

// MaxProbeBlob is the most bytes one probe download asks for.
const MaxProbeBlob = 64 << 20

// Capacity is a machine's cores, RAM and GPUs: as an offer advertises
// them, or as a probe measured them.
type Capacity struct {
	Cores float64 `json:"cores"`
	RAMMB float64 `json:"ram_mb"`
	GPUs  int     `json:"gpus"`
	// DownMbps is the download speed in Mb/s: the offer's inet_down, or
	// the probe's download from the coordinator (× 8).
	DownMbps float64 `json:"down_mbps,omitempty"`
}

// HeartbeatReply tells the agent when to report next and how its
// dead-man switch is set.
type HeartbeatReply struct {
	IntervalS    float64 `json:"interval_s"`
	OrphanAfterS float64 `json:"orphan_after_s,omitempty"`
	OrphanPolicy string  `json:"orphan_policy,omitempty"`
}

// Finding is one result a session reported. Key makes it idempotent: the
// coordinator stores a key once, however often it is sent.
type Finding struct {
	Key     string `json:"key"`
	Node    string `json:"node,omitempty"` // filled by the coordinator
	Session string `json:"session,omitempty"`
	Item    int64  `json:"item,omitempty"` // the work item whose run reported it
	// At is the node's own clock, which a host may skew; ReceivedAt is
	// the coordinator's (the market's clock on a simulated market), the
	// one time the dashboard and reports show.
	At         time.Time       `json:"at"`
	ReceivedAt time.Time       `json:"received_at,omitzero"`
	Data       json.RawMessage `json:"data"`
}

// Findings is a batch from one node.
type Findings struct {
	Fleet      string    `json:"fleet"`
	Node       string    `json:"node"`
	InstanceID int64     `json:"instance_id,omitempty"`
	Items      []Finding `json:"items"`
}

// FindingsAck names what is committed; the agent drops exactly those
// keys from its spool.
type FindingsAck struct {
	Acked      []string `json:"acked"`
	Stored     int      `json:"stored"`
	Duplicates int      `json:"duplicates"`
	// Rejected are acknowledged keys the job's verify command refused:
	// not stored, and their node's host is on the bad-host list.
	Rejected []string `json:"rejected,omitempty"`
}

// Error is every non-2xx answer's body.
type Error struct {
	Error string `json:"error"`
}

// Line is one structured line on a session's stdout: either a custom
// metric ({"metric":"keys_per_s","value":1.2e6}) or a finding
// ({"found":{...}}). Other lines are plain log output.
type Line struct {
	Metric string          `json:"metric,omitempty"`
	Value  *float64        `json:"value,omitempty"`
	Found  json.RawMessage `json:"found,omitempty"`
}

// ParseLine reads a session's stdout line; ok is false for plain output.
func ParseLine(b []byte) (Line, bool) {
	if len(b) < 2 || b[0] != '{' {
		return Line{}, false
	}
	var l Line
	if err := json.Unmarshal(b, &l); err != nil {
		return Line{}, false
	}
	switch {
	case l.Metric != "" && l.Value != nil:
		return l, true
	case len(l.Found) > 0 && string(l.Found) != "null":
		return l, true
	}
	return Line{}, false
}

// Node is one node in a Snapshot.
type Node struct {
	Fleet         string             `json:"fleet"`
	Node          string             `json:"node"`
	InstanceID    int64              `json:"instance_id,omitempty"`
	State         string             `json:"state"` // alive, stale, dead
	LastSeen      time.Time          `json:"last_seen"`
	CPUPercent    float64            `json:"cpu_percent"`
	CPUCores      float64            `json:"cpu_cores"`
	RAMUsedBytes  int64              `json:"ram_used_bytes"`
	RAMTotalBytes int64              `json:"ram_total_bytes"`
	GPUs          []GPU              `json:"gpus,omitempty"`
	Sessions      []SessionState     `json:"sessions,omitempty"`
	Metrics       map[string]float64 `json:"metrics,omitempty"`
	Probe         *Probe             `json:"probe,omitempty"` // the boot probe's result, once reported
	Stage         string             `json:"stage,omitempty"` // the agent's boot stage (StageProbe), empty once sessions run
	DPH           float64            `json:"dph"`
	// PerDPH is each custom metric per $/hr this node costs (omitted
	// while its price is unknown): what it delivers for the money.
	PerDPH map[string]float64 `json:"per_dph,omitempty"`
	// PerDPHShare is PerDPH over the median of the fleet's alive nodes,
	// metric by metric: 0.5 delivers half what the median node does for
	// the same money.
	PerDPHShare map[string]float64 `json:"per_dph_share,omitempty"`
	// Refused counts this node's requests answered 403 (a result for an
	// item it does not hold, another node's name) since the coordinator
	// started.
	Refused int64 `json:"refused,omitempty"`
}

// Totals are the fleet's live sums.
type Totals struct {
	NodesAlive    int                `json:"nodes_alive"`
	NodesStale    int                `json:"nodes_stale"`
	NodesDead     int                `json:"nodes_dead"`
	CPUCores      float64            `json:"cpu_cores"`
	CPUPercent    float64            `json:"cpu_percent"`
	RAMUsedBytes  int64              `json:"ram_used_bytes"`
	RAMTotalBytes int64              `json:"ram_total_bytes"`
	GPUs          int                `json:"gpus"`
	GPUUtilAvg    float64            `json:"gpu_util_avg"`
	Metrics       map[string]float64 `json:"metrics"`
	Findings      int64              `json:"findings"`
	ItemsDone     int64              `json:"items_done"`
	ItemsLeft     int64              `json:"items_left"` // queued or leased
	// ItemsStarved are queued items no enrolled, uncaught machine of the
	// fleet may run: their results disagreed on every machine that could.
	ItemsStarved int64   `json:"items_starved,omitempty"`
	DPH          float64 `json:"dph"`
	Spent        float64 `json:"spent"`
}

// Snapshot is the dashboard's whole view at one moment.
type Snapshot struct {
	At time.Time `json:"at"`
	// Clock names the time At and every finding's received_at are in:
	// "wall", or "market" for a simulated market's clock.
	Clock    string    `json:"clock"`
	Totals   Totals    `json:"totals"`
	Nodes    []Node    `json:"nodes"`
	Findings []Finding `json:"findings"` // the most recent, newest first
}

// SnapshotDelta is the dashboard's view since the previous one it was
// sent: the totals and newest findings whole, the nodes whose row changed,
// and the names of nodes gone.
type SnapshotDelta struct {
	At       time.Time         `json:"at"`
	Clock    string            `json:"clock"`
	Totals   Totals            `json:"totals"`
	Nodes    []json.RawMessage `json:"nodes"`
	Removed  []string          `json:"removed"`
	Findings []Finding         `json:"findings"`
}

// SessionNameRule is the session-name grammar in words, for error messages.
const SessionNameRule = "1-32 letters, digits, '_' or '-'"

// ValidSessionName reports whether name may name a session: 1 to 32
// ASCII letters, digits, '_' and '-'. The name becomes a tmux session
// (where '.' and ':' separate window and pane in a target) and a log file
// name, so nothing else is allowed. The job file, launch --session, logs
// --session and the agent all check this one rule.
func ValidSessionName(name string) bool {
	if name == "" || len(name) > 32 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
