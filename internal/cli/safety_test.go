package cli

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/sim"
	"github.com/vastfleet/vastfleet/internal/store"
)

// TestLaunchRefusedAfterLockFileDeleted is issue 9's two-drivers case: one
// process holds the data dir while the lock file is deleted under it; a
// `launch --resume` of the same fleet, and a new launch, must be refused
// and rent nothing.
func TestLaunchRefusedAfterLockFileDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.speed = "300" // launches pace their rents in wall time
	e.ok("launch", "--count", "2", "--deadline", "30m", "--fleet", "f1", "-n", launchQuery)
	before := len(decode[[]map[string]any](t, e.ok("ls", "--json").out))

	held, err := store.AcquireLock(e.home, "vastfleet launch --fleet f1")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	if err := os.Remove(filepath.Join(e.home, store.LockFileName)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"launch", "--resume", "f1"},
		{"launch", "--count", "2", "--deadline", "30m", "--fleet", "f2", "-n", launchQuery},
	} {
		r := e.run(args...)
		if r.code != 1 || !strings.Contains(r.err, "another vastfleet") {
			t.Errorf("%v with the lock file deleted: exit %d, stderr %q; want refused", args, r.code, r.err)
		}
	}
	if after := len(decode[[]map[string]any](t, e.ok("ls", "--json").out)); after != before {
		t.Errorf("ls lists %d instances after the refused launches, %d before", after, before)
	}
	held.Unlock()
	e.ok("destroy", "--all", "--yes")
}

// TestDataDirAndFilesPrivate: a data dir left group/world-accessible is
// tightened to 0700 with a warning, once, and every file vastfleet writes
// in it is 0600 (state.db and its WAL, the lock, keys, launch secrets, the
// simulator's state), every directory 0700; a simulated machine's files
// sit in a 0700 directory of their own.
func TestDataDirAndFilesPrivate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.speed = "300" // launches pace their rents in wall time
	if err := os.Chmod(e.home, 0o755); err != nil {
		t.Fatal(err)
	}
	r := e.ok("ls")
	if !strings.Contains(r.err, "warning: data dir "+e.home+" was accessible to other users (mode 0755); it is now 0700") {
		t.Errorf("ls stderr %q lacks the warning", r.err)
	}
	if r := e.ok("ls"); strings.Contains(r.err, "warning") {
		t.Errorf("second ls warns again: %q", r.err)
	}
	e.ok("launch", "--count", "2", "--deadline", "30m", "--fleet", "f1", "--env", "A=1", "--onstart", "true", "-n", launchQuery)
	e.ok("rent", "--onstart", "true", "--no-wait", firstOfferID(t, e))
	out := filepath.Join(e.home, "nodes.cfg")
	e.ok("export", "--format", "ssh-config", "--fleet", "f1", "--out", out)
	e.ok("export", "--format", "vast-instances", "--out", filepath.Join(e.home, "instances.json"))
	var files int
	hosts := sim.HostsDir(filepath.Join(e.home, "sim"))
	err := filepath.WalkDir(e.home, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		// A simulated machine's own files (its executables, its /sys) keep
		// the modes a machine gives them, inside its 0700 directory.
		if rel, _ := filepath.Rel(hosts, path); strings.Count(rel, string(filepath.Separator)) >= 1 && !strings.HasPrefix(rel, "..") {
			return nil
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		} else {
			files++
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %#o, want %#o", path, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"state.db", store.LockFileName, "secrets/launch-f1.json"} {
		if _, err := os.Stat(filepath.Join(e.home, name)); err != nil {
			t.Errorf("expected %s in the data dir: %v", name, err)
		}
	}
	e.ok("destroy", "--all", "--yes")
}

// TestLaunchSecretsNotAtRest: env values, onstart and session commands
// given to launch (and rent's onstart) never reach state.db or any
// command's output; launch keeps them for --resume in a 0600 file only.
func TestLaunchSecretsNotAtRest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.speed = "300" // launches pace their rents in wall time
	secrets := []string{"hf_envsecret_1", "onstartsecret_2", "sessionsecret_3", "rentonstartsecret_4"}
	var outs bytes.Buffer
	keep := func(r result) { outs.WriteString(r.out); outs.WriteString(r.err) }
	keep(e.ok("launch", "--count", "2", "--deadline", "30m", "--fleet", "f1", "--env", "HF_TOKEN="+secrets[0]+";TCP_PORTS=8000",
		"--onstart", "echo "+secrets[1], "--session", "train:python t.py --key "+secrets[2], "-n", launchQuery))
	keep(e.ok("launch", "--count", "1", "--deadline", "30m", "--fleet", "f2", "--json", "--env", "HF_TOKEN="+secrets[0],
		"--onstart", "echo "+secrets[1], "-n", launchQuery))
	keep(e.ok("rent", "--onstart", "echo "+secrets[3], "--env", "K="+secrets[0], "--json", firstOfferID(t, e)))
	keep(e.ok("ls", "--json"))
	keep(e.ok("ls"))
	keep(e.ok("cost"))
	keep(e.ok("cost", "--json"))
	keep(e.ok("export", "--format", "vast-instances"))
	for _, s := range secrets {
		if strings.Contains(outs.String(), s) {
			t.Errorf("a command printed the secret %s", s)
		}
	}
	// Every file in the data dir, the database and its WAL included, but
	// the secrets file and the in-process simulator's state: that stands
	// for the marketplace, which is given the env and onstart to run them.
	err := filepath.WalkDir(e.home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if rel, _ := filepath.Rel(e.home, path); strings.HasPrefix(rel, "secrets"+string(filepath.Separator)) || strings.HasPrefix(rel, "sim"+string(filepath.Separator)) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds the secret %s", path, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(filepath.Join(e.home, "state.db"))
	if err != nil || !bytes.Contains(db, []byte("HF_TOKEN")) || !bytes.Contains(db, []byte("redacted")) {
		t.Errorf("state.db should keep the env keys with redacted values (err %v)", err)
	}
	kept, err := os.ReadFile(filepath.Join(e.home, "secrets", "launch-f1.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets[:3] {
		if !bytes.Contains(kept, []byte(s)) {
			t.Errorf("the secrets file lacks %s, which --resume needs", s)
		}
	}
	e.ok("destroy", "--all", "--yes")
}

// firstOfferID is the id of an offer the launch query matches.
func firstOfferID(t *testing.T, e *env) string {
	t.Helper()
	offers := decode[[]map[string]any](t, e.ok("search", "--json", "--limit", "50", "-n", launchQuery).out)
	if len(offers) == 0 {
		t.Fatal("no offers")
	}
	return strings.TrimSuffix(strings.TrimSuffix(fmtJSONNumber(offers[len(offers)-1]["id"]), ".0"), "")
}

func fmtJSONNumber(v any) string {
	f, _ := v.(float64)
	return strconv.FormatInt(int64(f), 10)
}
