package host

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	gliderssh "github.com/gliderlabs/ssh"
	gossh "golang.org/x/crypto/ssh"
)

// A vast container runs OpenSSH, which also honours keys a user adds to
// /root/.ssh/authorized_keys by hand, with their options: vastfleet's
// relay installs a one-transfer key there (restrict, command=,
// expiry-time=) and removes it after. The keys vast manages stay in
// memory (attach and detach change them at once), so a line of the file
// holding one vast ever set is vast's own copy and is not read again.

// forcedKey is the context key under which a forced command travels from
// authentication to the session.
type forcedKey struct{}

// fileKey is one usable line of the instance's authorized_keys file.
type fileKey struct {
	key      gossh.PublicKey
	command  string // forced command; "" when none
	restrict bool
}

// fileAuthorized looks k up in the instance's authorized_keys file as
// OpenSSH would: an expired line or one with an option not understood
// here does not authorize.
func (mc *machine) fileAuthorized(k gossh.PublicKey) (fileKey, bool) {
	b, err := os.ReadFile(filepath.Join(mc.dir, ".ssh", "authorized_keys"))
	if err != nil {
		return fileKey{}, false
	}
	want := string(k.Marshal())
	for len(b) > 0 {
		key, _, opts, rest, err := gossh.ParseAuthorizedKey(b)
		if err != nil {
			return fileKey{}, false
		}
		b = rest
		if string(key.Marshal()) != want || mc.isManaged(key) {
			continue
		}
		fk, ok := parseKeyOptions(opts, time.Now())
		if ok {
			fk.key = key
			return fk, true
		}
	}
	return fileKey{}, false
}

// isManaged reports a key vast set on the machine at some time.
func (mc *machine) isManaged(k gossh.PublicKey) bool {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.managed[string(k.Marshal())]
}

// parseKeyOptions reads the options of an authorized_keys line.
func parseKeyOptions(opts []string, now time.Time) (fileKey, bool) {
	var fk fileKey
	for _, o := range opts {
		name, val, _ := strings.Cut(o, "=")
		val = dequote(val)
		switch strings.ToLower(name) {
		case "restrict", "no-pty", "no-port-forwarding", "no-agent-forwarding", "no-x11-forwarding", "no-user-rc":
			fk.restrict = true
		case "command":
			fk.command = val
		case "expiry-time":
			exp, err := parseExpiry(val)
			if err != nil || !now.Before(exp) {
				return fileKey{}, false
			}
		default:
			return fileKey{}, false
		}
	}
	return fk, true
}

// dequote undoes an option value's quoting: OpenSSH drops the quotes and
// turns \" into ".
func dequote(v string) string {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return v
	}
	return strings.ReplaceAll(v[1:len(v)-1], `\"`, `"`)
}

// parseExpiry reads YYYYMMDD[HHMM[SS]][Z], local time unless Z, as sshd(8).
func parseExpiry(v string) (time.Time, error) {
	loc := time.Local
	if s, ok := strings.CutSuffix(v, "Z"); ok {
		v, loc = s, time.UTC
	}
	layout := map[int]string{8: "20060102", 12: "200601021504", 14: "20060102150405"}[len(v)]
	if layout == "" {
		layout = "bad"
	}
	return time.ParseInLocation(layout, v, loc)
}

// forcedCommand is the command a session's key forces, "" when none.
func forcedCommand(ctx gliderssh.Context) (fileKey, bool) {
	fk, ok := ctx.Value(forcedKey{}).(fileKey)
	return fk, ok
}
