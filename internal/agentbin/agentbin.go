// Package agentbin finds the agent binary a coordinator serves to its
// instances. The small agent (cmd/vastfleet-agent: 6.6 MiB, 7.5 MB of RSS
// idle) is the one to ship; the main vastfleet binary also runs as the
// agent (`vastfleet agent`) but is 31.5 MiB and 19 MB of RSS idle, on
// every node. After `go install` or `go run` no vastfleet-agent sits
// beside vastfleet, so the small agent is built on demand from the module
// source (the checkout the binary was built from, or the module cache for
// a tagged `go install`) into a cache keyed by the running binary, and
// the main binary is served only as a last resort, with a warning.
package agentbin

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Module is the module whose cmd/vastfleet-agent is built.
const Module = "github.com/vastfleet/vastfleet"

// Name is the small agent's file name, beside vastfleet or in the cache.
const Name = "vastfleet-agent"

// buildTimeout bounds one build of the agent: a cold build on a busy
// 2-core machine takes about a minute.
const buildTimeout = 5 * time.Minute

// How says where the served binary came from.
type How string

const (
	FromFlag   How = "flag"   // --agent-bin
	Beside     How = "beside" // vastfleet-agent beside the running binary
	Cached     How = "cached" // built earlier from the module source
	Built      How = "built"  // built now from the module source
	MainBinary How = "main"   // the running binary itself (last resort)
)

// defaultArch is vast.ai's hosts' GOARCH.
const defaultArch = "amd64"

// Found is the binary to serve and how it was found.
type Found struct {
	Path string
	How  How
	// Warning is set when the main binary is served: why no small agent
	// could be had, and how to get one.
	Warning string
}

// Options say where to look and build.
type Options struct {
	// Flag is --agent-bin; set, it is served as given.
	Flag string
	// CacheDir holds built agents, one folder per running binary.
	CacheDir string
	// Arch is the instances' GOARCH (GOOS is linux); "" is amd64.
	Arch string
	// Self is the running binary; "" is os.Executable().
	Self string
	// Source is the module's source tree; "" finds it (see source).
	Source string
	// Log, when set, is told of a build before it starts (it can take a
	// minute).
	Log func(string)
}

// Find returns the agent to serve: the flag's, vastfleet-agent beside the
// running binary, one built earlier for this binary, one built now from
// the module source, or, failing all of them, the running binary with a
// warning.
func Find(ctx context.Context, o Options) (Found, error) {
	if o.Flag != "" {
		return Found{Path: o.Flag, How: FromFlag}, nil
	}
	self := o.Self
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return Found{}, fmt.Errorf("agent: where is this binary: %w", err)
		}
	}
	if beside := filepath.Join(filepath.Dir(self), Name); regular(beside) {
		return Found{Path: beside, How: Beside}, nil
	}
	arch := o.Arch
	if arch == "" {
		arch = defaultArch
	}
	var why error
	if o.CacheDir == "" {
		why = errors.New("no cache folder to build into")
	} else {
		p, how, err := cached(ctx, o, self, arch)
		if err == nil {
			return Found{Path: p, How: how}, nil
		}
		why = err
	}
	return Found{Path: self, How: MainBinary, Warning: fmt.Sprintf(
		"serving this vastfleet binary as the agent (a large agent: 20-30 MiB to every node, 17 MB of memory idle on each): no %s beside it, and none could be built (%v); build one with `CGO_ENABLED=0 GOOS=linux GOARCH=%s go build -trimpath -ldflags='-s -w' -o %s ./cmd/vastfleet-agent` in a checkout and put it beside vastfleet, or pass --agent-bin",
		Name, why, arch, filepath.Join(filepath.Dir(self), Name))}, nil
}

// cached is the agent built for self and arch, building it when the cache
// does not have it yet.
func cached(ctx context.Context, o Options, self, arch string) (string, How, error) {
	key, err := fileKey(self)
	if err != nil {
		return "", "", err
	}
	// Absolute: go build runs in the source tree, where a relative -o
	// (a relative --data-dir) would put the agent beside the source.
	dir, err := filepath.Abs(filepath.Join(o.CacheDir, "agent", key+"-linux-"+arch))
	if err != nil {
		return "", "", err
	}
	bin := filepath.Join(dir, Name)
	if regular(bin) {
		return bin, Cached, nil
	}
	src := o.Source
	if src == "" {
		if src, err = source(ctx); err != nil {
			return "", "", err
		}
	} else if !isModule(src) {
		return "", "", fmt.Errorf("%s is not the source of %s", src, Module)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", "", fmt.Errorf("no go toolchain on PATH to build it from %s", src)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	if o.Log != nil {
		o.Log(fmt.Sprintf("building the small agent (%s, linux/%s) from %s into %s; once per vastfleet binary", Name, arch, src, dir))
	}
	// Built beside its final name and renamed: an interrupted build never
	// leaves a half-written agent to be served.
	tmp, err := os.CreateTemp(dir, Name+".*.tmp")
	if err != nil {
		return "", "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-trimpath", "-ldflags=-s -w", "-o", tmp.Name(), "./cmd/vastfleet-agent")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build ./cmd/vastfleet-agent in %s: %v: %s", src, err, strings.TrimSpace(lastLines(string(out), 5)))
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", "", err
	}
	return bin, Built, nil
}

// source is the module's source tree for the running binary: the checkout
// it was built from (`go run`, `go build` or `go install` in a checkout:
// this file's compiled path says where), else the module cache's copy of
// the version a `go install module@version` built.
func source(ctx context.Context) (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root := filepath.Dir(filepath.Dir(filepath.Dir(file))) // internal/agentbin/agentbin.go
		if isModule(root) {
			return root, nil
		}
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Path != Module || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return "", errors.New("the module source this binary was built from is not on this machine")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("no go toolchain on PATH to find the module cache")
	}
	out, err := exec.CommandContext(ctx, gobin, "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	// The module path is all lower case: its cache folder needs no escaping.
	root := filepath.Join(strings.TrimSpace(string(out)), filepath.FromSlash(Module)+"@"+bi.Main.Version)
	if !isModule(root) {
		return "", fmt.Errorf("module %s@%s is not in the module cache (%s)", Module, bi.Main.Version, root)
	}
	return root, nil
}

// isModule says whether dir holds this module's source with the agent's
// command in it.
func isModule(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if mod, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(mod), `"`) == Module && regular(filepath.Join(dir, "cmd", Name, "main.go"))
		}
	}
	return false
}

// fileKey names a file by its content: a rebuilt vastfleet (a new `go
// run` of changed source) gets its own agent, the same binary reuses it.
func fileKey(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func regular(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
