package host

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	gliderssh "github.com/gliderlabs/ssh"
)

// CopyUser is the SSH user of vast's copy daemon: `vastai copy` runs
// `rsync -e 'ssh -p PORT' SRC vastai_kaalia@ADDR::ID/PATH`, rsync's daemon
// mode over SSH with the instance's id as the module.
const CopyUser = "vastai_kaalia"

// rsyncd serves one rsync daemon session for CopyUser. Whatever the client
// asked to run, the daemon that runs is ours, with our configuration: one
// module per name the CLI may use (ID, C.ID) whose path is the machine's
// area, where /root and /workspace both lead to the instance directory
// and nothing else is visible (daemon filters). Without chroot, rsync
// sanitises every path ("..", a leading /) to stay in the module, and
// munges the symlinks it writes so that none can lead out later.
func (mc *machine) rsyncd(s gliderssh.Session) {
	if fk, ok := forcedCommand(s.Context()); ok && (fk.command != "" || fk.restrict) {
		fmt.Fprintln(s.Stderr(), "this key may not copy: it is restricted")
		s.Exit(1)
		return
	}
	if !strings.HasPrefix(s.RawCommand(), "rsync --server --daemon") {
		fmt.Fprintln(s.Stderr(), CopyUser+" only runs rsync's daemon (vastai copy)")
		s.Exit(1)
		return
	}
	rsync, err := exec.LookPath("rsync")
	if err != nil {
		fmt.Fprintln(s.Stderr(), "rsync is not installed on the simulator's machine")
		s.Exit(1)
		return
	}
	conf, err := mc.rsyncConf()
	if err != nil {
		fmt.Fprintf(s.Stderr(), "rsync daemon: %v\n", err)
		s.Exit(1)
		return
	}
	cmd := exec.Command(rsync, "--server", "--daemon", "--config="+conf, ".")
	cmd.Dir = filepath.Dir(mc.dir)
	// The marker, as every process of the machine has: a stop finds it.
	cmd.Env = append(append([]string{}, mc.sessionEnv...), mc.marker)
	cmd.Stdout, cmd.Stderr = s, s.Stderr()
	if !mc.startPiped(s, cmd) {
		return
	}
	pgid := cmd.Process.Pid
	defer mc.forget(pgid)
	s.Exit(exitCode(cmd.Wait()))
}

// rsyncConf writes the daemon's configuration beside the instance
// directory, where the instance's own files cannot shadow it, and the
// /workspace link that makes the two names of the directory one.
func (mc *machine) rsyncConf() (string, error) {
	area := filepath.Dir(mc.dir)
	ws := filepath.Join(area, "workspace")
	if _, err := os.Lstat(ws); os.IsNotExist(err) {
		if err := os.Symlink(filepath.Base(mc.dir), ws); err != nil {
			return "", err
		}
	}
	id := strconv.FormatInt(mc.id, 10)
	var b strings.Builder
	// uid/gid: a daemon started as root would otherwise drop to nobody,
	// who cannot write the instance's directory.
	fmt.Fprintf(&b, "use chroot = no\nmunge symlinks = yes\nread only = no\nuid = %d\ngid = %d\nlog file = /dev/null\n", os.Getuid(), os.Getgid())
	for _, name := range []string{id, "C." + id} {
		fmt.Fprintf(&b, "[%s]\npath = %s\nfilter = + /root + /root/** + /workspace + /workspace/** - *\n", name, area)
	}
	conf := filepath.Join(area, "rsyncd.conf")
	return conf, os.WriteFile(conf, []byte(b.String()), 0o600)
}
