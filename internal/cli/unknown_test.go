package cli

import (
	"strings"
	"testing"
)

func TestUnknownCommandIsOneLineUsageError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("lss")
	want := `error: unknown command "lss" for "vastfleet"; did you mean logs, ls, ssh? (see vastfleet --help)` + "\n"
	if r.code != 2 || r.err != want {
		t.Fatalf("vastfleet lss: exit %d, stderr %q; want exit 2 and %q", r.code, r.err, want)
	}
	r = e.run("frobnicate")
	if r.code != 2 || strings.Count(r.err, "\n") != 1 || strings.Contains(r.err, `\n`) || strings.Contains(r.err, "did you mean") {
		t.Fatalf("vastfleet frobnicate: exit %d, stderr %q; want exit 2 on one line", r.code, r.err)
	}
}
