package buildinfo

import "testing"

// TestStringNamesVersionCommitAndGo: the line `version` prints, with the
// commit cut to 12 characters and a modified tree said.
func TestStringNamesVersionCommitAndGo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   Info
		want string
	}{
		{Info{Version: "v1.2.0"}, "v1.2.0"},
		{Info{Version: "v1.2.0", GoVersion: "go1.26.0"}, "v1.2.0 go1.26.0"},
		{Info{Version: "(devel)", Commit: "0123456789abcdef0123", Modified: true, GoVersion: "go1.26.0"}, "(devel) (commit 0123456789ab, modified) go1.26.0"},
		{Info{Version: "dev", Commit: "abc"}, "dev (commit abc)"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.in, got, tc.want)
		}
	}
	if b := Read("v9.9.9"); b.Version != "v9.9.9" || b.GoVersion == "" {
		t.Errorf("Read(v9.9.9) = %+v, want that version and the Go version", b)
	}
}
