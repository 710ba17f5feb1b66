package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A key the user adds to authorized_keys opens the machine as OpenSSH
// would: its forced command runs instead of the one asked, an expired
// line opens nothing, and vast's own keys in the file are not read again
// (a detached key stays detached).
func TestAuthorizedKeysFileAsSSHD(t *testing.T) {
	t.Parallel()
	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fleet, fleetLine := testKey(t)
	ports, err := m.Boot(Spec{ID: 1, Keys: []string{fleetLine}})
	if err != nil {
		t.Fatal(err)
	}
	forced, forcedLine := testKey(t)
	expired, expiredLine := testKey(t)
	f := filepath.Join(m.Dir(1), ".ssh", "authorized_keys")
	fh, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString(`restrict,command="echo \"forced\" $SSH_ORIGINAL_COMMAND" ` + forcedLine + "\n")
	fh.WriteString(`expiry-time="` + time.Now().Add(-time.Minute).Format("200601021504") + `" ` + expiredLine + "\n")
	fh.Close()

	c, err := dial(ports[0], forced)
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(t, c, "id")
	c.Close()
	if err != nil || strings.TrimSpace(out) != `forced id` {
		t.Errorf("forced key ran %q (%v), want the forced command", out, err)
	}
	if c, err := dial(ports[0], expired); err == nil {
		c.Close()
		t.Error("an expired key opened the machine")
	}
	m.SetKeys(1, nil)
	if c, err := dial(ports[0], fleet); err == nil {
		c.Close()
		t.Error("a detached key opened the machine through vast's copy in the file")
	}
}
