// Package bootstrap writes the onstart scripts that prepare an instance at
// boot: today, installing and starting the vastfleet agent. An onstart
// runs on every start of a vast container and must stay under vast's
// ~4 KB limit, so the script fetches the agent instead of carrying it.
package bootstrap

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/shell"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// MaxOnstart is vast's limit on the onstart field, in bytes.
const MaxOnstart = 4000

// Agent is what the agent on each node is told.
type Agent struct {
	CoordURL     string // as the instance reaches it
	Fleet        string
	Token        string // the fleet's agent token (write-only)
	BinarySHA256 string // hex; the downloaded binary must match it
	Fingerprint  string // optional: pinned coordinator certificate sha256 (hex)
	Sessions     []wire.Session
	OrphanAfter  time.Duration // 0: the agent's default
	OrphanPolicy string        // wire.PolicyStop or wire.PolicyDestroy
	MaxLifetime  time.Duration // the agent stops its instance this long after it first ran; 0: never
	IdleAfter    time.Duration // the agent stops its instance once idle (below IdleBelow percent) this long; 0: never
	IdleBelow    float64
	TimeScale    float64 // simulator only; 0 or 1 on a real market
	// TunnelPortBase > 0: the agent reaches the coordinator through a
	// reverse tunnel that vastfleet keeps over SSH, on the node's
	// 127.0.0.1:TunnelPort(TunnelPortBase, $CONTAINER_ID); CoordURL then
	// only gives the scheme (http or https).
	TunnelPortBase int
}

// Reverse tunnels: the port on each node is TunnelPortBase plus the
// instance id modulo TunnelPortSpan. A real node has its own loopback, so
// any fixed port would do there; simulated nodes all share this machine's
// loopback, so each needs its own. Deriving it from the instance id lets
// the onstart, written before the instance exists, and the tunnel, opened
// after, agree on it without talking, and a reconnect binds the same port
// so the agent's URL never changes. The default range 20000-29999 stays
// below Linux's ephemeral ports (32768 and up), which outgoing
// connections take.
const (
	DefaultTunnelPortBase = 20000
	TunnelPortSpan        = 10000
)

// TunnelPort is the port the agent of instance id dials on its node.
func TunnelPort(base int, id int64) int { return base + int(id%TunnelPortSpan) }

var hexSHA = regexp.MustCompile(`^[0-9a-f]{64}$`)

// AgentOnstart is user's onstart (run first) followed by the agent's
// installer. Re-running it on a restart is idempotent: a binary already in
// place with the right digest is not fetched again, and a running agent is
// not started twice.
func AgentOnstart(user string, a Agent) (string, error) {
	if !strings.HasPrefix(a.CoordURL, "http://") && !strings.HasPrefix(a.CoordURL, "https://") {
		return "", fmt.Errorf("coordinator URL %q: want http:// or https://", a.CoordURL)
	}
	if !hexSHA.MatchString(a.BinarySHA256) {
		return "", fmt.Errorf("agent binary digest %q: want 64 lowercase hex digits", a.BinarySHA256)
	}
	if a.Fingerprint != "" && !hexSHA.MatchString(a.Fingerprint) {
		return "", fmt.Errorf("certificate fingerprint %q: want 64 lowercase hex digits", a.Fingerprint)
	}
	sessions, err := json.Marshal(a.Sessions)
	if err != nil {
		return "", err
	}
	if a.TunnelPortBase < 0 || a.TunnelPortBase+TunnelPortSpan > 65536 {
		return "", fmt.Errorf("tunnel port base %d: want 1 to %d", a.TunnelPortBase, 65536-TunnelPortSpan)
	}
	env := map[string]string{
		wire.EnvCoordURL: strings.TrimRight(a.CoordURL, "/"),
		wire.EnvFleet:    a.Fleet,
		wire.EnvToken:    a.Token,
		wire.EnvSessions: string(sessions),
	}
	if a.Fingerprint != "" {
		env[wire.EnvFingerprint] = a.Fingerprint
	}
	if a.OrphanAfter > 0 {
		env[wire.EnvOrphanAfter] = a.OrphanAfter.String()
	}
	if a.OrphanPolicy != "" {
		env[wire.EnvOrphanPolicy] = a.OrphanPolicy
	}
	if a.MaxLifetime > 0 {
		env[wire.EnvMaxLifetime] = a.MaxLifetime.String()
	}
	if a.IdleAfter > 0 {
		env[wire.EnvIdleAfter] = a.IdleAfter.String()
		env[wire.EnvIdleBelow] = strconv.FormatFloat(a.IdleBelow, 'g', -1, 64)
	}
	if a.TimeScale > 0 && a.TimeScale != 1 {
		env[wire.EnvTimeScale] = fmt.Sprint(a.TimeScale)
	}
	if a.TunnelPortBase > 0 {
		delete(env, wire.EnvCoordURL) // computed on the node below
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	var b strings.Builder
	if strings.TrimSpace(user) != "" {
		b.WriteString(strings.TrimRight(user, "\n"))
		b.WriteString("\n")
	}
	b.WriteString("# vastfleet agent\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, shell.Quote(env[k]))
	}
	if a.TunnelPortBase > 0 {
		scheme, _, _ := strings.Cut(a.CoordURL, "://")
		fmt.Fprintf(&b, "export %s=\"%s://127.0.0.1:$((%d + ${CONTAINER_ID:-0} %% %d))\"\n", wire.EnvCoordURL, scheme, a.TunnelPortBase, TunnelPortSpan)
	}
	// A coordinator not yet reachable (a tunnel still coming up, a
	// restarting coordinator) is retried for 3 minutes; a download with
	// the wrong digest is not.
	// The certificate is pinned by the agent; the download's integrity
	// comes from the digest, so curl need not verify a self-signed one.
	insecure := ""
	if a.Fingerprint != "" {
		insecure = " -k"
	}
	fmt.Fprintf(&b, `D="${%s:-${HOME:-/root}/.vastfleet}"; export %s="$D"; mkdir -p "$D"
S=%s; A="$D/vastfleet-agent"
ok() { echo "$S  $1" | sha256sum -c - >/dev/null 2>&1; }
get() { H="Authorization: Bearer $%s"; curl -fsS%s --retry 5 --connect-timeout 20 -H "$H" "$1" -o "$2" 2>/dev/null || wget -q%s --header="$H" -O "$2" "$1"; }
i=0; until ok "$A" || [ $i -ge 90 ]; do i=$((i+1)); if get "$%s%s" "$A.tmp"; then ok "$A.tmp" && chmod 700 "$A.tmp" && mv "$A.tmp" "$A"; break; fi; sleep 2; done
ok "$A" || echo "vastfleet: agent download failed" >&2
P=$(cat "$D/agent.pid" 2>/dev/null); if ! { [ -n "$P" ] && kill -0 "$P" 2>/dev/null && { [ ! -r "/proc/$P/cmdline" ] || grep -aqF "$A" "/proc/$P/cmdline"; }; }; then nohup "$A" agent >>"$D/agent.out" 2>&1 & echo $! >"$D/agent.pid"; fi
`, wire.EnvStateDir, wire.EnvStateDir, shell.Quote(a.BinarySHA256), wire.EnvToken, insecure,
		map[bool]string{true: " --no-check-certificate", false: ""}[a.Fingerprint != ""],
		wire.EnvCoordURL, wire.PathAgentBin)
	if n := b.Len(); n > MaxOnstart {
		return "", fmt.Errorf("the onstart with the agent installer is %d bytes, over vast's limit of %d: shorten --onstart or the sessions (put long commands in a script synced with `vastfleet sync`)", n, MaxOnstart)
	}
	return b.String(), nil
}
