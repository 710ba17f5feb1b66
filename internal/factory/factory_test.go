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
	f.Declare(other, func([]string) (Needs, error) { return Needs{Paced: true, SimHosts: true}, nil })
	f.Declare(cmd, func(args []string) (Needs, error) { return Needs{WaitsOnMarket: len(args) == 1}, nil })
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
		"Declare":      func() { f.Declare(cmd, func([]string) (Needs, error) { return Needs{}, nil }) },
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

// TestDeclaredOptions: a command's declared market, speed, data dir and
// streams are the factory's from Init, unless the user gave the flag;
// the process's streams stay as they were, and an error working out the
// needs is Init's.
func TestDeclaredOptions(t *testing.T) {
	t.Parallel()
	var out, errOut, filtered strings.Builder
	declared := Needs{Market: "vast", SimSpeed: 40, DataDir: "/scratch", Out: &filtered}
	for _, tc := range []struct {
		given string
		want  Options
	}{
		{"", Options{Market: "vast", SimSpeed: 40, DataDir: "/scratch"}},
		{"market", Options{Market: "sim", SimSpeed: 40, DataDir: "/scratch"}},
		{"sim-speed", Options{Market: "vast", SimSpeed: 60, DataDir: "/scratch"}},
		{"data-dir", Options{Market: "vast", SimSpeed: 40, DataDir: "/mine"}},
	} {
		ios := &iostreams.IOStreams{Out: &out, ErrOut: &errOut, Getenv: func(string) string { return "" }}
		f := New(ios, "test")
		f.Opts = Options{Market: "sim", SimSpeed: 60, DataDir: "/mine"}
		cmd := new(int)
		f.Declare(cmd, func([]string) (Needs, error) { return declared, nil })
		if err := f.Init(func(name string) bool { return name == tc.given }, cmd, nil); err != nil {
			t.Fatal(err)
		}
		if f.Opts != tc.want {
			t.Errorf("%q given: options %+v, want %+v", tc.given, f.Opts, tc.want)
		}
		if f.IO.Out != &filtered || f.IO.ErrOut != &errOut {
			t.Errorf("%q given: the command's streams are not the declared ones", tc.given)
		}
		if ios.Out != &out {
			t.Errorf("%q given: the process's stream was changed", tc.given)
		}
	}
	f := New(&iostreams.IOStreams{ErrOut: io.Discard}, "test")
	f.Opts.Market = "sim"
	cmd, refused := new(int), errors.New("refused")
	f.Declare(cmd, func([]string) (Needs, error) { return Needs{}, refused })
	if err := f.Init(func(string) bool { return false }, cmd, nil); !errors.Is(err, refused) {
		t.Errorf("Init gave %v, want the needs' error", err)
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
