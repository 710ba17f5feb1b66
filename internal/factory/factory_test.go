package factory

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/iostreams"
)

// TestSettingsFixedAtInit: Init fixes the settings once, from the global
// flags and the command's needs; a second Init, or a construction-time
// setting given after it, is refused. Only the command that runs has its
// needs applied.
func TestSettingsFixedAtInit(t *testing.T) {
	t.Parallel()
	f := New(&iostreams.IOStreams{ErrOut: io.Discard, Getenv: func(string) string { return "" }}, "test")
	f.Opts.Market = "sim"
	f.Opts.SimHosts = true // --sim-hosts
	changed := func(name string) bool { return name == "sim-speed" }
	cmd, other := new(int), new(int)
	f.Declare(other, func([]string) Needs { return Needs{Paced: true, SimHosts: true} })
	f.Declare(cmd, func(args []string) Needs { return Needs{WaitsOnMarket: len(args) == 1} })
	if err := f.Init(changed, cmd, []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if got, want := f.Settings(), (Needs{SimHosts: true, WaitsOnMarket: true, Paced: true}); got != want {
		t.Errorf("settings %+v, want %+v", got, want)
	}
	if err := f.Init(func(string) bool { return false }, other, nil); !errors.Is(err, ErrInitialised) {
		t.Errorf("second Init: %v, want ErrInitialised", err)
	}
	if got := f.Settings(); !got.SimHosts || !got.WaitsOnMarket {
		t.Errorf("a refused Init changed the settings: %+v", got)
	}
	for what, set := range map[string]func(){
		"ServeDurable": func() { f.ServeDurable(func(context.Context) error { return nil }) },
		"Declare":      func() { f.Declare(cmd, func([]string) Needs { return Needs{} }) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s after Init was accepted", what)
				}
			}()
			set()
		}()
	}
}

// TestServedArgs: a command a server runs in its process gets the
// server's global flags back as it was given them, here.
func TestServedArgs(t *testing.T) {
	t.Parallel()
	o := Options{Market: "vast", SimSpeed: 60, SimFaults: "harsh", SimSeed: 7, APIRate: 2.5, APIURL: "https://x", Verbose: true}
	got := strings.Join(o.ServedArgs("/d"), " ")
	want := "--server local --data-dir /d --market vast --sim-speed 60 --sim-faults harsh --sim-seed 7 --api-rate 2.5 --api-url https://x -v"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
