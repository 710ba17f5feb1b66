package iostreams

import (
	"bytes"
	"strings"
	"testing"
)

func TestPickTakesOnlyAnOptionInRange(t *testing.T) {
	for answer, want := range map[string]int{"2\n": 2, "\n": 0, "4\n": 0, "x\n": 0, " 1 \n": 1} {
		var errOut bytes.Buffer
		s := &IOStreams{In: strings.NewReader(answer), ErrOut: &errOut}
		if got := s.Pick(3); got != want {
			t.Errorf("answer %q: picked %d, want %d", answer, got, want)
		}
		if errOut.String() != "Rent which option? [1-3, Enter for none] " {
			t.Errorf("question %q", errOut.String())
		}
	}
}
