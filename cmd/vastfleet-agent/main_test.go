package main

import (
	"testing"

	"github.com/vastfleet/vastfleet/internal/wire"
)

func TestRunArguments(t *testing.T) {
	for _, v := range []string{wire.EnvCoordURL, wire.EnvFleet, wire.EnvToken} {
		t.Setenv(v, "")
	}
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-version"}, 0},
		{[]string{"agent", "extra"}, 2},
		{[]string{"coord"}, 2},
		{[]string{"-nope"}, 2},
		{[]string{"agent"}, 2}, // no configuration in the environment
		{nil, 2},
	} {
		if got := run(tc.args); got != tc.want {
			t.Errorf("run(%q) = %d, want %d", tc.args, got, tc.want)
		}
	}
}
