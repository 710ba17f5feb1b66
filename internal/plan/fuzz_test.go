package plan

import (
	"strings"
	"testing"
)

// FuzzParseTask: the reader never panics, and whatever it accepts gives
// Requirements an input it either plans or refuses with an error.
func FuzzParseTask(f *testing.F) {
	f.Add(sampleTOML)
	f.Add("[task]\nmodel = \"7b\"\nhours = 1e400\n")
	f.Add("[task]\nimage = \"a\\\\\"\nparams = \"350M\" # c\n")
	f.Add("[task]\nbatch_size = -3\ngpus = 1e30\n")
	f.Add("[task\n= \n[task]\n'x' = 'y'")
	f.Fuzz(func(t *testing.T, text string) {
		task, err := ParseTask(strings.NewReader(text), "fuzz.toml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.toml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		_, _ = Requirements(task)
	})
}
