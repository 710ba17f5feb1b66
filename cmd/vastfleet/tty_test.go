package main

import (
	"bytes"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// ansi matches the terminal escapes a progress view writes.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// On a terminal a launch shows a progress bar of ready instances with the
// status beside it, and its log lines above the bar: each log line starts
// its own line, never inside the bar's.
func TestLaunchOnATerminalShowsABarWithTheLogAbove(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	cmd := exec.Command(bin, "--data-dir", dataDir(t), "--sim-faults", "none",
		"launch", "--by", "vcpu", "--count", "5", "--deadline", "10m", "--park")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var out bytes.Buffer
	read := make(chan struct{})
	go func() { io.Copy(&out, tty); close(read) }() // ends with EIO once the command exits
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("launch on a terminal did not end in 3 minutes:\n%s", out.String())
	}
	tty.Close()
	<-read
	raw := out.String()
	if err != nil {
		t.Fatalf("launch: %v\n%q", err, raw)
	}
	plain := ansi.ReplaceAllString(raw, "")
	if !regexp.MustCompile(`ready\s+\d+/5 \[[=>\-_ ]+\]`).MatchString(plain) {
		t.Errorf("no progress bar of ready instances in the terminal output:\n%q", plain)
	}
	if !strings.Contains(plain, "$/hr now") && !strings.Contains(plain, "/hr now") {
		t.Errorf("no status beside the bar:\n%q", plain)
	}
	logLine := regexp.MustCompile(`^\d\d:\d\d:\d\d (rented|ready|parked|release|running) `)
	rented := 0
	for _, seg := range regexp.MustCompile(`[\r\n]+`).Split(plain, -1) {
		i := strings.Index(seg, " rented ")
		if i < 0 || !strings.Contains(seg, "instance") {
			continue
		}
		rented++
		if !logLine.MatchString(seg) {
			t.Errorf("a log line was written into another line: %q", seg)
		}
	}
	if rented < 5 {
		t.Errorf("%d rented lines on the terminal, want at least 5:\n%s", rented, plain)
	}
}
