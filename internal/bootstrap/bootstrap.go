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
	"strings"
	"time"

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
	TimeScale    float64       // simulator only; 0 or 1 on a real market
}

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
	if a.TimeScale > 0 && a.TimeScale != 1 {
		env[wire.EnvTimeScale] = fmt.Sprint(a.TimeScale)
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
		fmt.Fprintf(&b, "export %s=%s\n", k, Quote(env[k]))
	}
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
if ! ok "$A"; then get "$%s%s" "$A.tmp" && ok "$A.tmp" && chmod 700 "$A.tmp" && mv "$A.tmp" "$A" || echo "vastfleet: agent download failed" >&2; fi
if ! { [ -f "$D/agent.pid" ] && kill -0 "$(cat "$D/agent.pid")" 2>/dev/null; }; then nohup "$A" agent >>"$D/agent.out" 2>&1 & echo $! >"$D/agent.pid"; fi
`, wire.EnvStateDir, wire.EnvStateDir, Quote(a.BinarySHA256), wire.EnvToken, insecure,
		map[bool]string{true: " --no-check-certificate", false: ""}[a.Fingerprint != ""],
		wire.EnvCoordURL, wire.PathAgentBin)
	if n := b.Len(); n > MaxOnstart {
		return "", fmt.Errorf("the onstart with the agent installer is %d bytes, over vast's limit of %d: shorten --onstart or the sessions (put long commands in a script synced with `vastfleet sync`)", n, MaxOnstart)
	}
	return b.String(), nil
}

// Quote is s in single quotes for /bin/sh.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
