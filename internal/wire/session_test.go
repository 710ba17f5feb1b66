package wire

import (
	"strings"
	"testing"
)

func TestValidSessionName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"train":                 true,
		"eval_2":                true,
		"-x":                    true,
		strings.Repeat("a", 32): true,
		strings.Repeat("a", 33): false, // the agent once took 64
		"":                      false,
		"a.b":                   false, // tmux reads a.b as window b of session a
		"a:b":                   false,
		"a b":                   false,
		"../x":                  false,
		"é":                     false,
	} {
		if got := ValidSessionName(name); got != want {
			t.Errorf("ValidSessionName(%q) = %v, want %v", name, got, want)
		}
	}
}
