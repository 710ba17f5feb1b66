package shell

import (
	"os/exec"
	"testing"
)

func TestQuoteIsOneWordForSh(t *testing.T) {
	t.Parallel()
	words := []string{"", "plain-word_1.2:/x@y=z+", "two words", "it's", `"$HOME"`, "`id`", "a\nb", "'", `\`, "*", "~", "-n", "$(rm -rf /)"}
	for _, w := range words {
		out, err := exec.Command("sh", "-c", `printf '%s' `+Quote(w)).Output()
		if err != nil {
			t.Fatalf("sh on %q: %v", Quote(w), err)
		}
		if string(out) != w {
			t.Errorf("Quote(%q) = %s, sh reads it as %q", w, Quote(w), out)
		}
	}
	if Quote("node-1") != "node-1" {
		t.Errorf("a plain word is quoted: %s", Quote("node-1"))
	}
}

func TestJoinKeepsEachArgument(t *testing.T) {
	t.Parallel()
	args := []string{"a b", "it's", "", "-c"}
	out, err := exec.Command("sh", "-c", `for a in `+Join(args)+`; do printf '[%s]' "$a"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "[a b][it's][][-c]"; string(out) != want {
		t.Fatalf("sh read Join(%q) as %s, want %s", args, out, want)
	}
}
